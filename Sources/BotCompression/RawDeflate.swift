import CZlib

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
    public static func compress(_ input: [UInt8], level: Int32 = Limits.level) -> [UInt8]? {
        var stream = z_stream()
        guard CZlib_deflateInit2(&stream, level, Limits.windowBits, Limits.memLevel, Z_DEFAULT_STRATEGY) == Z_OK else {
            return nil
        }
        defer { deflateEnd(&stream) }
        let bound = Int(deflateBound(&stream, uLong(input.count)))
        var output = [UInt8](repeating: 0, count: max(bound, 16))
        var input = input
        let status: Int32 = input.withUnsafeMutableBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                stream.next_in = inBuffer.baseAddress
                stream.avail_in = uInt(inBuffer.count)
                stream.next_out = outBuffer.baseAddress
                stream.avail_out = uInt(outBuffer.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        output.removeSubrange(Int(stream.total_out)...)
        return output
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
