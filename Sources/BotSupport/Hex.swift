/// Lowercase hexadecimal, the only text form of bytes this project emits.
public enum Hex {
    /// Why decoding failed.
    public enum DecodeError: Error, Equatable, Sendable {
        case oddLength(Int)
        case invalidCharacter(offset: Int)
        case wrongLength(expected: Int, actual: Int)
    }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Encodes a byte array as lowercase hex. The concrete overload callers in other modules get: it writes
    /// straight into the string's storage (the generic one below iterates through protocol witnesses
    /// when not specialised, ~30× slower, and ids, keys and signatures are encoded on every event).
    public static func encode(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBufferPointer { encode($0) }
    }

    /// Encodes the bytes of a buffer as lowercase hex.
    public static func encode(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            var index = 0
            for byte in bytes {
                out[index] = asciiDigit(byte >> 4)
                out[index + 1] = asciiDigit(byte & 0x0f)
                index += 2
            }
            return index
        }
    }

    /// Appends the lowercase hex of `bytes` to `out` (serialisers that build byte buffers).
    public static func append(_ bytes: [UInt8], to out: inout [UInt8]) {
        // Written in one pass into reserved space (ids, keys and signatures go into every carrier).
        let count = bytes.count * 2
        guard count > 0 else { return }
        out.reserveCapacity(out.count + count)
        bytes.withUnsafeBufferPointer { bytes in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { scratch in
                var index = 0
                for byte in bytes {
                    scratch[index] = asciiDigit(byte >> 4)
                    scratch[index + 1] = asciiDigit(byte & 0x0f)
                    index += 2
                }
                out.append(contentsOf: UnsafeBufferPointer(scratch))
            }
        }
    }

    @inline(__always)
    private static func asciiDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 + nibble : 0x61 - 10 + nibble
    }

    /// Encodes bytes as lowercase hex.
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes hex (either case) from a `String`: the concrete overload, reading the UTF-8 storage directly.
    /// Same rules and errors as the generic form.
    public static func decode(_ text: String, expectedCount: Int? = nil) throws(DecodeError) -> [UInt8] {
        var text = text
        let result = text.withUTF8 { utf8 in
            Result { () throws(DecodeError) -> [UInt8] in try decode(utf8: utf8, expectedCount: expectedCount) }
        }
        return try result.get()
    }

    private static func decode(utf8: UnsafeBufferPointer<UInt8>, expectedCount: Int?) throws(DecodeError) -> [UInt8] {
        guard utf8.count % 2 == 0 else { throw .oddLength(utf8.count) }
        if let expectedCount, utf8.count != expectedCount * 2 {
            throw .wrongLength(expected: expectedCount, actual: utf8.count / 2)
        }
        let count = utf8.count / 2
        var failure: DecodeError?
        let out = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            for i in 0..<count {
                guard let high = nibble(utf8[2 * i]) else {
                    failure = .invalidCharacter(offset: 2 * i)
                    return
                }
                guard let low = nibble(utf8[2 * i + 1]) else {
                    failure = .invalidCharacter(offset: 2 * i + 1)
                    return
                }
                buffer[i] = high << 4 | low
                initialized = i + 1
            }
        }
        if let failure { throw failure }
        return out
    }

    /// True when `text` is exactly `count` bytes of lowercase hex: the concrete overload for `String`.
    public static func isLowercase(_ text: String, byteCount count: Int) -> Bool {
        guard text.utf8.count == count * 2 else { return false }
        var text = text
        return text.withUTF8 { utf8 in
            utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
        }
    }

    /// Decodes hex (either case). With `expectedCount`, the byte count must match exactly.
    public static func decode(_ text: some StringProtocol, expectedCount: Int? = nil) throws(DecodeError) -> [UInt8] {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { throw .oddLength(utf8.count) }
        if let expectedCount, utf8.count != expectedCount * 2 {
            throw .wrongLength(expected: expectedCount, actual: utf8.count / 2)
        }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]) else { throw .invalidCharacter(offset: index) }
            guard let low = nibble(utf8[index + 1]) else { throw .invalidCharacter(offset: index + 1) }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    /// True when `text` is exactly `count` bytes of lowercase hex (the form Nostr requires).
    public static func isLowercase(_ text: some StringProtocol, byteCount count: Int) -> Bool {
        var seen = 0
        for unit in text.utf8 {
            guard (unit >= 0x30 && unit <= 0x39) || (unit >= 0x61 && unit <= 0x66) else { return false }
            seen += 1
        }
        return seen == count * 2
    }

    @inline(__always)
    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }
}
