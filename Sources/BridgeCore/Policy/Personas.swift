public import BitchatWire
public import BotCrypto
import BotSupport

/// One Nostr author as a mesh identity of its own, for the plain-text downlink to phones without carrier
/// support (Android main has no type 0x28, `BinaryProtocol.kt`).
///
/// Decision (reach issue, part 2): the downlink speaks with one mesh identity per channel author instead of
/// the bridge's own. Phones judge public messages per sender — iOS `MessageRateLimiter` (5, then +1/s),
/// the ported spam filter (burst 6, then 1 per 10 s; 1,200 characters per minute) — so one mirror
/// identity carrying every author's lines would be hidden by the phones themselves as soon as a channel is
/// busy; per author, the limits fall on the author, as on Nostr. The nickname says where the line comes
/// from (`name@nostr`), so nobody takes it for someone in radio range. The keys are derived from the
/// bridge's seed and the author's key, so an author keeps its persona (and phones their pin of it) across
/// restarts, and another bridge cannot forge it.
///
/// How phones keep a persona (issue 33, APP-BEHAVIOUR §1, §4; `docs/behaviour.md`):
/// - its packets go at TTL 6 (``PersonaBook/Limits/ttl``): both apps take a TTL-7 announce for the link's own peer
///   (iOS rebinds the link to it and retires the bridge; Android maps the link to it and drops the bridge's sync);
/// - its nickname is its own on the mesh (``PersonaBook/persona(author:name:now:taken:)``): Android removes every
///   other peer of a nickname when one of them speaks;
/// - it announces before a line when it has not for ``PersonaBook/Limits/reannounceAfter`` (iOS forgets a relayed
///   peer 60 s after its last announce; Android's two clocks are 180 s), and the line follows the announce by
///   ``PersonaBook/Limits/announceLeadMs`` (Android may handle two packets of one sender out of order).
public struct Persona: Sendable, Equatable {
    /// The author's x-only Nostr public key.
    public let author: [UInt8]
    public let peerID: MeshPeerID
    public let noisePublicKey: [UInt8]
    public let signingKey: Ed25519PrivateKey
    public let nickname: String

    public static func == (a: Persona, b: Persona) -> Bool { a.author == b.author && a.nickname == b.nickname }
}

/// The bounded set of personas the downlink speaks with, and when each must announce (pure: time is passed in).
public struct PersonaBook: Sendable {
    public enum Limits {
        /// Personas kept at once; the least recently used is dropped for a new author (it is derived again
        /// when the author speaks, with the same keys). A busy channel has a few dozen active authors; each
        /// costs one announce per ``reannounceAfter`` while it speaks, so more would spend the airtime on
        /// announces.
        public static let maxPersonas = 32
        /// A persona announces before its message when it has not for this long: iOS forgets a peer after 60 s
        /// of silence (`peerTimeoutMs`) and then shows its messages as unknown; 50 s leaves the margin.
        public static let reannounceAfter: Double = 50
        /// Android's UI shows 15 characters of a nickname: the bridge's own nickname rule.
        public static let maxNicknameLength = 15
        /// Appended to the author's name: the line comes from the internet, not from radio range.
        public static let nicknameSuffix = "@nostr"
        /// A persona's packets go at TTL 6, one hop behind the bridge: never taken for a direct peer of the link (both
        /// apps call an announce direct only at TTL 7: iOS `BLEAnnounceHandler`, Android `DirectLinkAnnouncementPolicy`).
        public static let ttl: UInt8 = 6
        /// A persona's line follows its announce by this much: Android hands every packet to its sender's queue from a
        /// coroutine of its own (`PacketProcessor.processPacket`), so a line right behind its sender's first announce
        /// may be handled first and dropped; half a second is far beyond that race and short for a reader.
        public static let announceLeadMs: UInt64 = 500
        /// Tries for a nickname no one else holds: `name@nostr`, then `name@nostr#xxxx` with successive 2-byte slices
        /// of the persona's peer ID (Android draws a trailing `#` + 4 hex dimmed).
        static let suffixTries = 4
        /// HKDF salt and info prefix of the persona keys (a new version would give every author new keys).
        static let salt = Array("bitchat-bridge persona v1".utf8)
    }

    private let seed: [UInt8]
    private var personas: [[UInt8]: Persona] = [:]
    /// The personas' nicknames: who holds each.
    private var holders: [String: [UInt8]] = [:]
    /// Last use and last announce per author (Unix seconds).
    private var lastUsed: [[UInt8]: Double] = [:]
    private var lastAnnounced: [[UInt8]: Double] = [:]

    /// `seed`: the bridge's secret Nostr seed (``BridgeKeys/nostrSeed``).
    public init(seed: [UInt8]) {
        self.seed = seed
    }

    public var count: Int { personas.count }


    /// What a line needs: the persona, whether it must announce first, and how long the line waits for an announce
    /// sent just before (``Limits/announceLeadMs``).
    public struct Turn: Sendable {
        public var persona: Persona
        public var announce: Bool
        public var lineDelayMs: UInt64
    }

    /// The persona of `author` (derived on first use) for a line at `now`, named from `name` (the event's `n` tag)
    /// under a nickname no one else on the mesh holds — not another persona, and not one `taken` says a mesh peer or
    /// the bridge uses (a persona keeps the nickname it has while it stays its own). Call ``announced(_:now:)`` when
    /// ``Turn/announce`` is set.
    public mutating func turn(author: [UInt8], name: String?, now: Double, taken: (String) -> Bool) throws(CryptoError) -> Turn {
        var persona: Persona
        if let known = personas[author] {
            persona = known
        } else {
            persona = try derive(author: author, nickname: "")
            if personas.count >= Limits.maxPersonas, let stalest = lastUsed.min(by: { $0.value < $1.value })?.key {
                if let gone = personas.removeValue(forKey: stalest) { holders[gone.nickname] = nil }
                lastUsed[stalest] = nil
                lastAnnounced[stalest] = nil
            }
        }
        let nickname = uniqueNickname(for: persona, base: Self.nickname(name), taken: taken)
        if persona.nickname != nickname {
            if holders[persona.nickname] == author { holders[persona.nickname] = nil }
            persona = Persona(author: author, peerID: persona.peerID, noisePublicKey: persona.noisePublicKey,
                              signingKey: persona.signingKey, nickname: nickname)
            holders[nickname] = author
            // A new nickname shows only after an announce.
            lastAnnounced[author] = nil
        }
        personas[author] = persona
        lastUsed[author] = now
        let last = lastAnnounced[author]
        let announce = last.map { now - $0 >= Limits.reannounceAfter } ?? true
        let sinceAnnounce = last.map { UInt64(max(0, (now - $0) * 1_000)) } ?? 0
        let delay = announce ? Limits.announceLeadMs : Limits.announceLeadMs - min(Limits.announceLeadMs, sinceAnnounce)
        return Turn(persona: persona, announce: announce, lineDelayMs: delay)
    }

    /// The announce went out at `now`.
    public mutating func announced(_ persona: Persona, now: Double) {
        if personas[persona.author] != nil { lastAnnounced[persona.author] = now }
    }

    /// `base`, else `base#xxxx` from successive slices of the persona's peer ID: the first no other persona holds and
    /// `taken` does not name; the persona's current nickname while it qualifies.
    private func uniqueNickname(for persona: Persona, base: String, taken: (String) -> Bool) -> String {
        let id = persona.peerID.hex
        let candidates = [base] + (0..<Limits.suffixTries).map { i in
            base + "#" + String(id.dropFirst(4 * i).prefix(4))
        }
        func free(_ name: String) -> Bool { (holders[name] ?? persona.author) == persona.author && !taken(name) }
        if candidates.contains(persona.nickname), free(persona.nickname) { return persona.nickname }
        return candidates.first(where: free) ?? base + "#" + id
    }

    /// `name@nostr` within Android's 15 characters (`anon@nostr` without a name; `#` is dropped, as phones
    /// add their own `#xxxx` to tell equal names apart).
    public static func nickname(_ name: String?) -> String {
        let room = Limits.maxNicknameLength - Limits.nicknameSuffix.count
        let cleaned = (name ?? "").filter { $0 != "#" && !$0.isWhitespace || $0 == " " }.trimmingSpaces
        let base = cleaned.isEmpty ? "anon" : String(cleaned.prefix(room)).trimmingSpaces
        return base + Limits.nicknameSuffix
    }

    private func derive(author: [UInt8], nickname: String) throws(CryptoError) -> Persona {
        let material = try HKDFSHA256.deriveKey(inputKeyMaterial: seed, salt: Limits.salt, info: author, outputByteCount: 64)
        let noise = try X25519PrivateKey(rawRepresentation: Array(material[0..<32]))
        let signing = try Ed25519PrivateKey(seed: Array(material[32..<64]))
        return Persona(
            author: author, peerID: MeshPeerID(noisePublicKey: noise.publicKey), noisePublicKey: noise.publicKey,
            signingKey: signing, nickname: nickname)
    }

    /// The persona's signed announce (no capabilities: it carries nothing but its lines; sent at ``Limits/ttl``).
    public static func announce(_ persona: Persona, at timestampMs: UInt64) throws -> MeshPacket {
        let payload = try AnnouncePayload(
            nickname: persona.nickname, noisePublicKey: persona.noisePublicKey,
            signingPublicKey: persona.signingKey.publicKey.rawRepresentation
        ).encode()
        return try MeshPacket(type: .announce, timestamp: timestampMs, sender: persona.peerID, payload: payload)
            .signed(with: persona.signingKey)
    }

    /// The persona's signed public message.
    public static func message(_ persona: Persona, text: String, at timestampMs: UInt64) throws -> MeshPacket {
        try MeshPacket(type: .message, timestamp: timestampMs, sender: persona.peerID, payload: Array(text.utf8))
            .signed(with: persona.signingKey)
    }
}
