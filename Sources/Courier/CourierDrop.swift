public import BitchatWire
public import BotCrypto
public import BotSupport
public import Nostr

/// A kind-1401 courier drop (COURIER.md §3): an envelope parked on relays for its recipient, signed by a key used once.
public enum CourierDrop {
    public static let kind = 1401

    public enum Limits {
        /// A drop's content is refused unread beyond this many characters (20,480 bytes in base64 is 27,308; the rest
        /// is slack): a flood of large events costs no decoding (COURIER.md §4.2).
        public static let maxContentCharacters = 28_000
        /// An envelope expiring later than this after now is refused, as the Android PR refuses it (COURIER.md §4.2):
        /// a deposit's lifetime is 24 h, plus 1 h of slack.
        public static let maxExpiryAheadMs: UInt64 = 25 * 3_600_000
    }

    /// Why a drop was not taken. The raw value is the metric label.
    public enum Refusal: String, Error, CounterKey, CaseIterable {
        case wrongKind = "wrong_kind"
        case tooLarge = "too_large"
        case badBase64 = "bad_base64"
        case malformed
        case expired
        case expiryTooFar = "expiry_too_far"
        /// No `x` tag equals the envelope's tag (a mislabeled drop).
        case tagMismatch = "tag_mismatch"
        /// The `expiration` tag is missing or more than 1 s from the envelope's expiry.
        case expirationMismatch = "expiration_mismatch"
    }

    /// The drop event for `envelope` (copies forced to 1), signed by `key`, created at `now`.
    public static func event(for envelope: CourierEnvelope, key: SchnorrSecretKey, now: Int64) throws -> NostrEvent {
        let bytes = try envelope.withCopies(1).encode()
        let unsigned = UnsignedEvent(
            pubkey: key.publicKey, createdAt: now, kind: kind,
            tags: [["x", Hex.encode(envelope.recipientTag)], ["expiration", String(envelope.expiryMs / 1000)]],
            content: Base64.encode(bytes))
        return try unsigned.signed(with: key)
    }

    /// The envelope a drop carries, after every check of COURIER.md §3.4 and §4.2 (the stricter Android PR rules); the
    /// first check it fails is thrown.
    public static func envelope(of event: NostrEvent, nowMs: UInt64) throws(Refusal) -> CourierEnvelope {
        guard event.kind == kind else { throw .wrongKind }
        guard event.content.utf8.count <= Limits.maxContentCharacters else { throw .tooLarge }
        guard let bytes = try? Base64.decode(event.content) else { throw .badBase64 }
        guard bytes.count <= CourierEnvelope.Limits.maxDropEnvelopeBytes else { throw .tooLarge }
        guard let envelope = try? CourierEnvelope.decode(bytes) else { throw .malformed }
        guard !envelope.isExpired(nowMs: nowMs) else { throw .expired }
        guard envelope.expiryMs <= nowMs + Limits.maxExpiryAheadMs else { throw .expiryTooFar }
        let tag = Hex.encode(envelope.recipientTag)
        guard event.tags.contains(where: { $0.count >= 2 && $0[0] == "x" && $0[1] == tag }) else { throw .tagMismatch }
        guard let expiration = event.firstTag("expiration").flatMap({ $0.count >= 2 ? Int64($0[1]) : nil }),
              abs(expiration - Int64(envelope.expiryMs / 1000)) <= 1
        else { throw .expirationMismatch }
        return envelope
    }
}
