import CZlib
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Raw DEFLATE (RFC 1951: no zlib header, no checksum) over Debian's zlib — the only zlib wrapper in
/// the package.
///
/// bitchat compresses mesh payloads with this exact configuration (MESH-WIRE §2.5, §4.4): level 5,
/// window bits −15, memLevel 8, default strategy, one-shot `Z_FINISH` — Apple's documented equivalent of
/// `COMPRESSION_ZLIB`. Inflating is always bounded by an output cap because the input is untrusted
/// (a 1-byte body can declare megabytes: a zip bomb).
public enum RawDeflate {
    public enum Limits {
        /// zlib level Apple documents for `COMPRESSION_ZLIB`; iPhones re-compress with it to verify signatures.
        public static let level: Int32 = 5
        /// Negative window bits select raw DEFLATE in zlib.
        public static let windowBits: Int32 = -15
        /// zlib's default memory level, as in Apple's documented configuration.
        public static let memLevel: Int32 = 8
    }

    /// Why inflating failed.
    public enum InflateError: Error, Equatable, Sendable, CustomStringConvertible {
        /// zlib rejected the stream (bad block type, bad distance, …).
        case corrupt
        /// The stream ended before its end-of-stream marker.
        case truncated
        /// The stream produced more bytes than the cap allows.
        case exceedsCap(Int)
        /// Bytes follow the end-of-stream marker.
        case trailingBytes(Int)
        /// zlib could not be initialised (out of memory).
        case initFailed(Int32)

        public var description: String {
            switch self {
            case .corrupt: "corrupt deflate stream"
            case .truncated: "truncated deflate stream"
            case .exceedsCap(let cap): "inflated data exceeds \(cap) bytes"
            case .trailingBytes(let n): "\(n) bytes after the end of the deflate stream"
            case .initFailed(let code): "inflateInit2 failed (\(code))"
            }
        }
    }

    /// Raw DEFLATE of `input` at `level` (default 5), or nil if zlib fails (only on out-of-memory).
    ///
    /// Each thread keeps one deflate stream per level and resets it between calls (`deflateReset`), so a
    /// packet does not pay for allocating and freeing zlib's ~256 KB of state: on glibc that round trip
    /// (memory returned to the kernel and faulted in again) cost several times the compression itself.
    /// A reset stream is in exactly the state of a fresh one, so the output is byte-identical
    /// (`RawDeflateTests` pins this against fresh streams).
    public static func compress(_ input: [UInt8], level: Int32 = Limits.level) -> [UInt8]? {
        guard let deflater = ReusableDeflater.forCurrentThread(level: level) else { return nil }
        return deflater.compress(input)
    }

    /// ``compress(_:level:)`` on a stream created for this call and ended after it (the reference the
    /// reusable streams are tested against).
    public static func compressWithFreshStream(_ input: [UInt8], level: Int32 = Limits.level) -> [UInt8]? {
        guard let deflater = ReusableDeflater(level: level) else { return nil }
        return deflater.compress(input)
    }

    /// Inflates a raw DEFLATE stream, producing at most `cap` bytes. The stream must end exactly at the
    /// end of `input`.
    public static func decompress(_ input: [UInt8], cap: Int) throws(InflateError) -> [UInt8] {
        try inflate(input, cap: cap, windowBits: Limits.windowBits)
    }

    /// Inflates a zlib-wrapped (RFC 1950) stream — Android accepts these, so we do too when a raw attempt fails.
    public static func decompressZlibWrapped(_ input: [UInt8], cap: Int) throws(InflateError) -> [UInt8] {
        try inflate(input, cap: cap, windowBits: 15)
    }

    private static func inflate(_ input: [UInt8], cap: Int, windowBits: Int32) throws(InflateError) -> [UInt8] {
        var stream = z_stream()
        let initStatus = CZlib_inflateInit2(&stream, windowBits)
        guard initStatus == Z_OK else { throw .initFailed(initStatus) }
        defer { inflateEnd(&stream) }
        // One byte of headroom past the cap detects "more than cap" without producing it all.
        var output = [UInt8](repeating: 0, count: cap + 1)
        var input = input
        let status: Int32 = input.withUnsafeMutableBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                stream.next_in = inBuffer.baseAddress
                stream.avail_in = uInt(inBuffer.count)
                stream.next_out = outBuffer.baseAddress
                stream.avail_out = uInt(outBuffer.count)
                return zlibInflate(&stream, Z_FINISH)
            }
        }
        let produced = Int(stream.total_out)
        switch status {
        case Z_STREAM_END:
            guard produced <= cap else { throw .exceedsCap(cap) }
            guard stream.avail_in == 0 else { throw .trailingBytes(Int(stream.avail_in)) }
            output.removeSubrange(produced...)
            return output
        case Z_BUF_ERROR:
            // Either the output filled up (stream longer than the cap) or the input ran out mid-stream.
            if stream.avail_out == 0 { throw .exceedsCap(cap) }
            throw .truncated
        default:
            throw .corrupt
        }
    }
}

/// zlib's `inflate`, named apart from our private `inflate(_:cap:windowBits:)`.
private func zlibInflate(_ stream: UnsafeMutablePointer<z_stream>, _ flush: Int32) -> Int32 {
    CZlib.inflate(stream, flush)
}

/// One zlib deflate stream, initialised once (raw DEFLATE, ``RawDeflate/Limits``) and reset before every
/// use. Not thread-safe: each thread gets its own through ``forCurrentThread(level:)``.
final class ReusableDeflater {
    /// Levels 0…9 each get a stream slot per thread; other values fail like zlib does.
    private static let levels = 10

    let level: Int32
    private let stream: UnsafeMutablePointer<z_stream>

    init?(level: Int32) {
        stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        guard CZlib_deflateInit2(stream, level, RawDeflate.Limits.windowBits, RawDeflate.Limits.memLevel, Z_DEFAULT_STRATEGY) == Z_OK
        else {
            stream.deinitialize(count: 1)
            stream.deallocate()
            return nil
        }
        self.level = level
    }

    deinit {
        deflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// One-shot `Z_FINISH` of `input` from a freshly reset stream.
    func compress(_ input: [UInt8]) -> [UInt8]? {
        guard deflateReset(stream) == Z_OK else { return nil }
        let bound = max(Int(deflateBound(stream, uLong(input.count))), 16)
        var status: Int32 = Z_STREAM_ERROR
        let output = input.withUnsafeBufferPointer { inBuffer in
            [UInt8](unsafeUninitializedCapacity: bound) { outBuffer, initialized in
                // zlib never writes through next_in; the C declaration just lacks the const.
                stream.pointee.next_in = inBuffer.baseAddress.map { UnsafeMutablePointer(mutating: $0) }
                stream.pointee.avail_in = uInt(inBuffer.count)
                stream.pointee.next_out = outBuffer.baseAddress
                stream.pointee.avail_out = uInt(outBuffer.count)
                status = deflate(stream, Z_FINISH)
                initialized = status == Z_STREAM_END ? Int(stream.pointee.total_out) : 0
            }
        }
        stream.pointee.next_in = nil
        stream.pointee.next_out = nil
        return status == Z_STREAM_END ? output : nil
    }

    /// This thread's stream for `level`, created on first use and released when the thread exits.
    static func forCurrentThread(level: Int32) -> ReusableDeflater? {
        // A level zlib rejects, or no thread-specific key to be had: a stream for this call only.
        guard (0..<Int32(levels)).contains(level), let key = threadSlots[Int(level)] else {
            return ReusableDeflater(level: level)
        }
        if let raw = pthread_getspecific(key) {
            return Unmanaged<ReusableDeflater>.fromOpaque(raw).takeUnretainedValue()
        }
        guard let fresh = ReusableDeflater(level: level) else { return nil }
        guard pthread_setspecific(key, Unmanaged.passRetained(fresh).toOpaque()) == 0 else {
            Unmanaged.passUnretained(fresh).release()
            return fresh
        }
        return fresh
    }

    /// One thread-specific slot per level; the destructor ends the stream when its thread exits.
    /// nil where the process ran out of keys (`PTHREAD_KEYS_MAX`); that level then uses fresh streams.
    private static let threadSlots: [pthread_key_t?] = (0..<levels).map { _ in
        var key = pthread_key_t()
        let created = pthread_key_create(&key) { raw in
            guard let raw else { return }
            Unmanaged<ReusableDeflater>.fromOpaque(raw).release()
        }
        return created == 0 ? key : nil
    }
}
