/// Standard base64 (RFC 4648 §4, `+` and `/`, `=` padding): the text form of a mesh packet carried in a Nostr
/// tag (the board's `bitchat-board` tag). Decoding is strict — padding required, no whitespace, zero unused
/// bits — so one packet has exactly one text form.
public enum Base64 {
    /// Why decoding failed.
    public enum DecodeError: Error, Equatable, Sendable {
        /// The length is not a multiple of 4.
        case badLength(Int)
        /// A character outside the alphabet, or `=` anywhere but the last one or two places.
        case invalidCharacter(offset: Int)
        /// The bits after the last byte are not zero (a second spelling of the same bytes).
        case nonCanonical
    }

    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xff, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var start = 0
        while start < bytes.count {
            let count = min(3, bytes.count - start)
            var value: UInt32 = 0
            for i in 0..<count { value |= UInt32(bytes[start + i]) << UInt32(16 - 8 * i) }
            for i in 0..<4 { out.append(i <= count ? alphabet[Int(value >> UInt32(18 - 6 * i) & 0x3f)] : UInt8(ascii: "=")) }
            start += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ text: String) throws(DecodeError) -> [UInt8] {
        let characters = Array(text.utf8)
        guard characters.count % 4 == 0 else { throw .badLength(characters.count) }
        var padding = 0
        if characters.last == UInt8(ascii: "=") { padding += 1 }
        if padding == 1, characters[characters.count - 2] == UInt8(ascii: "=") { padding += 1 }
        var out: [UInt8] = []
        out.reserveCapacity(characters.count / 4 * 3)
        var index = 0
        while index < characters.count {
            var value: UInt32 = 0
            let isLast = index + 4 == characters.count
            let used = isLast ? 4 - padding : 4
            for i in 0..<4 {
                let character = characters[index + i]
                if i >= used {
                    guard character == UInt8(ascii: "=") else { throw .invalidCharacter(offset: index + i) }
                    continue
                }
                let digit = values[Int(character)]
                guard digit != 0xff else { throw .invalidCharacter(offset: index + i) }
                value |= UInt32(digit) << UInt32(18 - 6 * i)
            }
            let bytes = used - 1
            if bytes < 3, value & (0xff_ffff >> UInt32(8 * bytes)) != 0 { throw .nonCanonical }
            for i in 0..<bytes { out.append(UInt8(truncatingIfNeeded: value >> UInt32(16 - 8 * i))) }
            index += 4
        }
        return out
    }
}
