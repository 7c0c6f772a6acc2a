import BotCrypto
public import Nostr
import BotSupport

/// Structural rules a carried or bridged event must pass, as phones apply them (NOSTR-GEO §8.7 step 6,
/// §8.9, §8.10, §9). Pure: time is passed in; signatures are checked elsewhere, before these run.
public enum EventRules {
    public enum Limits {
        /// Accepted clock skew in both directions (`maxEventAgeSeconds`): phones drop anything further off.
        public static let maxEventAgeSeconds: Int64 = 900
        /// Largest content phones accept (`maxContentBytes`, UTF-8 bytes).
        public static let maxContentBytes = 16_000
        /// Largest carried event JSON (carrier TLV 0x03 bound).
        public static let maxCarriedEventBytes = 16_384
    }

    /// Why an event is not carried.
    public enum Rejection: String, Error, Sendable {
        case stale = "stale"
        case future = "future"
        case wrongKind = "wrong_kind"
        case missingScopeTag = "missing_scope_tag"
        case scopeMismatch = "scope_mismatch"
        case emptyContent = "empty_content"
        case contentTooLarge = "content_too_large"
    }

    /// What a rendezvous event is.
    public enum RendezvousKind: Equatable, Sendable {
        case message
        case presence
    }

    /// Checks freshness: |now − created_at| ≤ 900 s.
    public static func checkFreshness(_ event: NostrEvent, now: Int64) throws(Rejection) {
        if event.createdAt < now - Limits.maxEventAgeSeconds { throw .stale }
        if event.createdAt > now + Limits.maxEventAgeSeconds { throw .future }
    }

    /// A chat message's content: non-empty after trimming, at most 16,000 UTF-8 bytes.
    public static func checkContent(_ event: NostrEvent) throws(Rejection) {
        guard event.content.utf8.count <= Limits.maxContentBytes else { throw .contentTooLarge }
        guard !event.content.allSatisfy(\.isWhitespace) else { throw .emptyContent }
    }

    /// A rendezvous event from the relay subscription: the **first** `r` tag names a cell of `ring`, the
    /// event is fresh, and it is a presence (20001) or a message (20000) with valid content.
    public static func classifyRendezvous(_ event: NostrEvent, ring: Set<String>, now: Int64) throws(Rejection)
        -> (cell: String, kind: RendezvousKind)
    {
        guard let tag = event.firstTag("r"), tag.count >= 2 else { throw .missingScopeTag }
        guard ring.contains(tag[1]) else { throw .scopeMismatch }
        try checkFreshness(event, now: now)
        switch event.kind {
        case NostrKind.presence: return (tag[1], .presence)
        case NostrKind.ephemeralChat:
            try checkContent(event)
            return (tag[1], .message)
        default: throw .wrongKind
        }
    }

    /// A rendezvous event carried in a `toBridge` / `fromBridge` carrier for `cell`: some `r` tag equals the
    /// carrier's cell (phones check the carrier geohash, not their own ring).
    public static func classifyCarriedRendezvous(_ event: NostrEvent, cell: String, now: Int64) throws(Rejection)
        -> RendezvousKind
    {
        guard event.tags.contains(where: { $0.count >= 2 && $0[0] == "r" }) else { throw .missingScopeTag }
        guard event.tags.contains(where: { $0.count >= 2 && $0[0] == "r" && $0[1] == cell }) else {
            throw .scopeMismatch
        }
        try checkFreshness(event, now: now)
        switch event.kind {
        case NostrKind.presence: return .presence
        case NostrKind.ephemeralChat:
            try checkContent(event)
            return .message
        default: throw .wrongKind
        }
    }

    /// A geohash-channel chat event for `channel` (gateway directions): kind 20000, the **first** `g` tag
    /// equals the channel (Android's rule, stricter than iOS so relays cannot inject foreign channels),
    /// fresh, with valid content.
    public static func checkChannelMessage(_ event: NostrEvent, channel: String, now: Int64) throws(Rejection) {
        guard event.kind == NostrKind.ephemeralChat else { throw .wrongKind }
        guard let tag = event.firstTag("g"), tag.count >= 2 else { throw .missingScopeTag }
        guard tag[1] == channel else { throw .scopeMismatch }
        try checkFreshness(event, now: now)
        try checkContent(event)
    }

    /// The `m` radio-copy hint of a rendezvous message as iOS ≥ 1.7.1 reads it: ≥ 4 elements, [2] exactly 16
    /// hex digits, [3] an unsigned 64-bit decimal. Returns (sender, timestamp ms); element [1] is ignored.
    public static func radioHint(_ event: NostrEvent) -> (senderHex: String, timestampMs: UInt64)? {
        guard let tag = event.firstTag("m"), tag.count >= 4 else { return nil }
        let sender = tag[2]
        guard sender.utf8.count == 16, sender.utf8.allSatisfy({ isHexDigit($0) }), let ms = UInt64(tag[3]) else {
            return nil
        }
        return (sender.lowercased(), ms)
    }

    /// The nickname phones show for a bridged author: `<n or anon>#<last 4 hex of pubkey>`.
    public static func displayName(_ event: NostrEvent) -> String {
        (nickname(event) ?? "anon") + "#" + String(event.pubkey.hex.suffix(4))
    }

    /// The event's `n` tag, trimmed; nil when missing or empty.
    public static func nickname(_ event: NostrEvent) -> String? {
        let nickname = event.firstTag("n").flatMap { $0.count >= 2 ? $0[1] : nil }?.trimmingSpaces ?? ""
        return nickname.isEmpty ? nil : nickname
    }

    private static func isHexDigit(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
    }
}
