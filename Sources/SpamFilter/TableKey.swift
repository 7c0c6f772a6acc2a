/// A sender key or message id as the key of the policy's hash tables (tracked senders, cached verdicts).
///
/// Nostr pubkeys and event ids and mesh Noise fingerprints are 64 lowercase hex digits: those are packed
/// into four words held in the table itself, so a probe compares words where a `String` key follows every
/// stored key it meets to its heap buffer (a cache miss per probe once the tables outgrow the cache), and
/// hashing reads 32 bytes instead of 64. Any other string (mesh message ids, peer IDs, upper-case hex) is
/// kept whole. Packing is one-to-one on its domain (64 digits ↔ 256 bits) and the two cases never compare
/// equal, so two keys are equal exactly when their strings are.
enum TableKey: Hashable, Sendable {
    case hex(UInt64, UInt64, UInt64, UInt64)
    case text(String)

    init(_ string: String) {
        if let words = Self.packedHex(string) {
            self = .hex(words.0, words.1, words.2, words.3)
        } else {
            self = .text(string)
        }
    }

    /// The 64 lower-case hex digits of `string` as four big-endian words, or nil for any other string.
    private static func packedHex(_ string: String) -> (UInt64, UInt64, UInt64, UInt64)? {
        let utf8 = string.utf8
        guard utf8.count == 64 else { return nil }
        let packed = utf8.withContiguousStorageIfAvailable { bytes -> (UInt64, UInt64, UInt64, UInt64)? in
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            for word in 0..<4 {
                var value: UInt64 = 0
                for offset in 0..<16 {
                    let byte = bytes[word &* 16 &+ offset]
                    let digit: UInt8
                    if byte &- 0x30 < 10 {
                        digit = byte &- 0x30
                    } else if byte &- 0x61 < 6 {
                        digit = byte &- 0x61 &+ 10
                    } else {
                        return nil
                    }
                    value = value << 4 | UInt64(digit)
                }
                switch word {
                case 0: words.0 = value
                case 1: words.1 = value
                case 2: words.2 = value
                default: words.3 = value
                }
            }
            return words
        }
        // A bridged (non-contiguous) string: rare enough to keep whole.
        return packed ?? nil
    }
}
