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
        /// HKDF salt and info prefix of the persona keys (a new version would give every author new keys).
        static let salt = Array("bitchat-bridge persona v1".utf8)
    }

    private let seed: [UInt8]
    private var personas: [[UInt8]: Persona] = [:]
    /// Last use and last announce per author (Unix seconds).
    private var lastUsed: [[UInt8]: Double] = [:]
    private var lastAnnounced: [[UInt8]: Double] = [:]

    /// `seed`: the bridge's secret Nostr seed (``BridgeKeys/nostrSeed``).
    public init(seed: [UInt8]) {
        self.seed = seed
    }

    public var count: Int { personas.count }


    /// The persona of `author` (derived on first use), the nickname refreshed from `name` (the event's `n`
    /// tag), and whether it must announce before speaking at `now`.
    public mutating func persona(author: [UInt8], name: String?, now: Double) throws(CryptoError) -> (persona: Persona, announce: Bool) {
        let nickname = Self.nickname(name)
        var persona: Persona
        if let known = personas[author] {
            persona = known
            if known.nickname != nickname {
                persona = Persona(author: author, peerID: known.peerID, noisePublicKey: known.noisePublicKey,
                                  signingKey: known.signingKey, nickname: nickname)
                // A new nickname shows only after an announce.
                lastAnnounced[author] = nil
            }
        } else {
            persona = try derive(author: author, nickname: nickname)
            if personas.count >= Limits.maxPersonas, let stalest = lastUsed.min(by: { $0.value < $1.value })?.key {
                personas[stalest] = nil
                lastUsed[stalest] = nil
                lastAnnounced[stalest] = nil
            }
        }
        personas[author] = persona
        lastUsed[author] = now
        let announce = lastAnnounced[author].map { now - $0 >= Limits.reannounceAfter } ?? true
        return (persona, announce)
    }

    /// The announce went out at `now`.
    public mutating func announced(_ persona: Persona, now: Double) {
        if personas[persona.author] != nil { lastAnnounced[persona.author] = now }
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

    /// The persona's signed announce (TTL 7, no capabilities: it carries nothing but its lines).
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
