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

    /// The 64 lower-case hex digits of `string` as four words, or nil for any other string.
    private static func packedHex(_ string: String) -> (UInt64, UInt64, UInt64, UInt64)? {
        let utf8 = string.utf8
        guard utf8.count == 64 else { return nil }
        let packed = utf8.withContiguousStorageIfAvailable { bytes -> (UInt64, UInt64, UInt64, UInt64)? in
            guard let base = bytes.baseAddress else { return nil }
            let raw = UnsafeRawPointer(base)
            guard let w0 = packedDigits(raw, at: 0), let w1 = packedDigits(raw, at: 16), let w2 = packedDigits(raw, at: 32),
                let w3 = packedDigits(raw, at: 48)
            else { return nil }
            return (w0, w1, w2, w3)
        }
        // A bridged (non-contiguous) string: rare enough to keep whole.
        return packed ?? nil
    }

    /// The 16 hex digits at `offset` as one word (first digit in the top nibble), or nil unless every one of
    /// them is `0`–`9` or `a`–`f`.
    @inline(__always)
    private static func packedDigits(_ raw: UnsafeRawPointer, at offset: Int) -> UInt64? {
        guard let high = packedEight(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))),
            let low = packedEight(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
        else { return nil }
        return UInt64(high) << 32 | UInt64(low)
    }

    /// Eight ASCII bytes (first in the low byte) as eight nibbles (first on top), or nil unless each is a
    /// lower-case hex digit. Per byte `b`, in parallel (no lane can carry into the next: every lane stays
    /// below 0x90): `n = (b & 0x0F) + 9·bit6(b)` is the digit's value for `0`–`9` and `a`–`f`; the byte is
    /// accepted when `n ≤ 15` and encoding `n` back (`0x30 + n`, plus 0x27 from 10 up) gives `b` again. The
    /// encoding only yields those 16 digits, so exactly they are accepted, each with its own value.
    @inline(__always)
    private static func packedEight(_ bytes: UInt64) -> UInt32? {
        let lanes: UInt64 = 0x0101_0101_0101_0101
        let n = (bytes & (lanes &* 0x0F)) &+ ((bytes >> 6) & lanes) &* 9
        guard (n &+ lanes &* 0x70) & (lanes &* 0x80) == 0 else { return nil }
        let tenOrMore = ((n &+ lanes &* 0x06) >> 4) & lanes
        guard n &+ lanes &* 0x30 &+ tenOrMore &* 0x27 == bytes else { return nil }
        // Byte 2k becomes n(2k)·16 + n(2k+1); then the four even bytes, first on top.
        let pairs = ((n << 4) | (n >> 8)) & 0x00FF_00FF_00FF_00FF
        return UInt32(truncatingIfNeeded: (pairs & 0xFF) << 24 | ((pairs >> 16) & 0xFF) << 16 | ((pairs >> 32) & 0xFF) << 8 | (pairs >> 48))
    }
}
