/// Classic Bech32 (BIP-173) as NIP-19 uses it for `npub` / `nsec` (no Bech32m, no 90-char limit for keys).
public enum Bech32 {
    /// Why a bech32 string was rejected.
    public enum DecodeError: Error, Equatable, Sendable {
        case mixedCase
        case missingSeparator
        case invalidCharacter(Character)
        case badChecksum
        case tooShort
        case invalidPadding
        case wrongPrefix(expected: String, actual: String)
        case wrongLength(expected: Int, actual: Int)
    }

    private static let charset: [Character] = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l")
    private static let generator: [UInt32] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3]

    private static func polymod(_ values: [UInt8]) -> UInt32 {
        var checksum: UInt32 = 1
        for value in values {
            let top = checksum >> 25
            checksum = (checksum & 0x1ff_ffff) << 5 ^ UInt32(value)
            for i in 0..<5 where (top >> UInt32(i)) & 1 == 1 {
                checksum ^= generator[i]
            }
        }
        return checksum
    }

    private static func expand(_ hrp: String) -> [UInt8] {
        let bytes = Array(hrp.utf8)
        return bytes.map { $0 >> 5 } + [0] + bytes.map { $0 & 31 }
    }

    /// Regroups bits (8 → 5 when encoding, 5 → 8 when decoding).
    static func convertBits(_ data: [UInt8], from: Int, to: Int, pad: Bool) throws(DecodeError) -> [UInt8] {
        var accumulator = 0
        var bits = 0
        var out: [UInt8] = []
        let maxValue = (1 << to) - 1
        for value in data {
            accumulator = (accumulator << from) | Int(value)
            bits += from
            while bits >= to {
                bits -= to
                out.append(UInt8((accumulator >> bits) & maxValue))
            }
        }
        if pad {
            if bits > 0 { out.append(UInt8((accumulator << (to - bits)) & maxValue)) }
        } else if bits >= from || (accumulator << (to - bits)) & maxValue != 0 {
            throw .invalidPadding
        }
        return out
    }

    /// Encodes 8-bit `data` under the human-readable part `hrp`.
    public static func encode(hrp: String, data: [UInt8]) -> String {
        // 8→5 with padding cannot fail.
        let values = (try? convertBits(data, from: 8, to: 5, pad: true)) ?? []
        let checksumInput = expand(hrp) + values + [0, 0, 0, 0, 0, 0]
        let mod = polymod(checksumInput) ^ 1
        var out = hrp + "1"
        for value in values { out.append(charset[Int(value)]) }
        for i in 0..<6 { out.append(charset[Int((mod >> UInt32(5 * (5 - i))) & 31)]) }
        return out
    }

    /// Decodes a bech32 string into its prefix and 8-bit data.
    public static func decode(_ text: String) throws(DecodeError) -> (hrp: String, data: [UInt8]) {
        let hasLower = text.contains { $0.isLowercase }
        let hasUpper = text.contains { $0.isUppercase }
        guard !(hasLower && hasUpper) else { throw .mixedCase }
        let lowered = text.lowercased()
        guard let separator = lowered.lastIndex(of: "1") else { throw .missingSeparator }
        let hrp = String(lowered[..<separator])
        guard !hrp.isEmpty else { throw .missingSeparator }
        var values: [UInt8] = []
        for c in lowered[lowered.index(after: separator)...] {
            guard let index = charset.firstIndex(of: c) else { throw .invalidCharacter(c) }
            values.append(UInt8(index))
        }
        guard values.count >= 6 else { throw .tooShort }
        guard polymod(expand(hrp) + values) == 1 else { throw .badChecksum }
        let data = try convertBits(Array(values.dropLast(6)), from: 5, to: 8, pad: false)
        return (hrp, data)
    }

    /// Decodes and checks the prefix and a 32-byte payload (npub / nsec).
    public static func decodeKey(_ text: String, hrp expected: String) throws(DecodeError) -> [UInt8] {
        let (hrp, data) = try decode(text)
        guard hrp == expected else { throw .wrongPrefix(expected: expected, actual: hrp) }
        guard data.count == 32 else { throw .wrongLength(expected: 32, actual: data.count) }
        return data
    }
}
