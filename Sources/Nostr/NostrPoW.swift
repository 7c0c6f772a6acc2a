import BotCrypto
import BotSupport

/// NIP-13 proof of work as bitchat uses it (NOSTR-GEO §4).
public enum NostrPoW {
    public enum Limits {
        /// Largest target that means anything for a 256-bit id (iOS rejects committed values above).
        public static let maxTarget = 256
        /// Attempts between progress callbacks (≈ 30 ms of hashing), so cancellation is prompt.
        public static let progressInterval: UInt64 = 1 << 16
    }

    /// Default committed target for the bridge: ≥ 8 lets iOS skip its per-sender bucket, 16 also
    /// satisfies most Android users who demand PoW (§4 "Bot").
    public static let defaultTarget = 16

    /// NIP-13 leading zero bits of `bytes` (MSB first).
    public static func leadingZeroBits(_ bytes: [UInt8]) -> Int {
        var count = 0
        for byte in bytes {
            if byte == 0 {
                count += 8
                continue
            }
            return count + byte.leadingZeroBitCount
        }
        return count
    }

    /// iOS `validatedDifficulty`: the **last** `nonce` tag with ≥ 3 elements commits a target 1…256; the
    /// score is that target if the id has at least that many leading zero bits, else 0. Extra luck
    /// earns nothing.
    public static func validatedDifficulty(tags: [[String]], idHex: String) -> Int {
        guard let nonce = tags.last(where: { $0.first == "nonce" }), nonce.count >= 3,
            let committed = Int(nonce[2]), (1...Limits.maxTarget).contains(committed),
            let id = try? Hex.decode(idHex, expectedCount: 32)
        else { return 0 }
        return leadingZeroBits(id) >= committed ? committed : 0
    }

    public static func validatedDifficulty(_ event: NostrEvent) -> Int {
        validatedDifficulty(tags: event.tags, idHex: event.id.hex)
    }

    /// Mines `event`: appends exactly one `["nonce", <16 lowercase hex>, "<target>"]` tag last (after
    /// removing any existing `nonce` tag) and searches nonces from `startNonce` upward until the id has
    /// ≥ `target` leading zero bits. `createdAt` is never touched.
    ///
    /// Pure and synchronous: callers run it **off** any event loop. `progress(attempts)` is called every
    /// ``Limits/progressInterval`` attempts; returning false cancels with ``NostrError/miningCancelled(attempts:)``.
    ///
    /// Each attempt rewrites the 16 nonce digits in place in the canonical bytes and hashes once.
    public static func mine(
        _ event: UnsignedEvent,
        target: Int,
        startNonce: UInt64 = 0,
        progress: (UInt64) -> Bool = { _ in true }
    ) throws(NostrError) -> (event: UnsignedEvent, id: EventID, attempts: UInt64) {
        guard (0...Limits.maxTarget).contains(target) else { throw .invalidTarget(target) }
        var candidate = event
        candidate.tags.removeAll { $0.first == "nonce" }
        let targetText = String(target)
        candidate.tags.append(["nonce", nonceHex(startNonce), targetText])
        var bytes = candidate.canonicalBytes
        // Bytes after the nonce digits: `","<target>"]],<content>]`.
        var tail = Array("\",\"\(targetText)\"]],".utf8)
        JSONWriter.appendString(candidate.content, into: &tail)
        tail.append(UInt8(ascii: "]"))
        let offset = bytes.count - tail.count - 16
        var nonce = startNonce
        var attempts: UInt64 = 0
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        while true {
            var value = nonce
            for i in stride(from: 15, through: 0, by: -1) {
                bytes[offset + i] = digits[Int(value & 0xf)]
                value >>= 4
            }
            let digest = SHA256.hash(bytes)
            attempts += 1
            if leadingZeroBits(digest) >= target {
                candidate.tags[candidate.tags.count - 1][1] = nonceHex(nonce)
                return (candidate, EventID(digest: digest), attempts)
            }
            nonce &+= 1
            if attempts % Limits.progressInterval == 0, !progress(attempts) {
                throw .miningCancelled(attempts: attempts)
            }
        }
    }

    static func nonceHex(_ nonce: UInt64) -> String {
        let hex = String(nonce, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
