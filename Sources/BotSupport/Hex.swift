/// Lowercase hexadecimal, the only text form of bytes this project emits.
public enum Hex {
    /// Why decoding failed.
    public enum DecodeError: Error, Equatable, Sendable {
        case oddLength(Int)
        case invalidCharacter(offset: Int)
        case wrongLength(expected: Int, actual: Int)
    }

    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

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
