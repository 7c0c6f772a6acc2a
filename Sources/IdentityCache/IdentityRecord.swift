public import Identity
/// How far the operator trusts an identity. Anything but `unknown` is a relationship (it protects).
public enum TrustLevel: Int, Sendable, CaseIterable {
    case unknown = 0
    /// Left behind when a verification is removed: still protects, until a wipe.
    case casual = 1
    case trusted = 2
    case verified = 3

    public var name: String {
        switch self {
        case .unknown: "unknown"
        case .casual: "casual"
        case .trusted: "trusted"
        case .verified: "verified"
        }
    }
}

/// The operator's relationships with one identity (STRANGER-CACHE §2). Stored on the identity's row, so the
/// classification can never be read out of step with the record it classifies.
public struct Annotations: Equatable, Sendable {
    public enum Limits {
        /// A petname is a short display name; 64 UTF-8 bytes is more than any phone shows.
        public static let maxPetnameBytes = 64
        /// Notes are a line or two for the operator; bounded so one row cannot grow the database.
        public static let maxNotesBytes = 1024
    }

    /// Favorite / allow-listed by the operator.
    public var allowed = false
    public var verified = false
    /// Blocked: never bridged, and (because it is a relationship) never evicted, so the block survives.
    public var blocked = false
    public var trust = TrustLevel.unknown
    public var petname: String?
    public var notes: String?

    public init() {}

    public init(
        allowed: Bool = false, verified: Bool = false, blocked: Bool = false, trust: TrustLevel = .unknown,
        petname: String? = nil, notes: String? = nil
    ) {
        self.allowed = allowed
        self.verified = verified
        self.blocked = blocked
        self.trust = trust
        self.petname = petname
        self.notes = notes
    }

    /// True when any relationship exists (the identity is protected, not a stranger).
    /// Having exchanged messages is deliberately not a relationship.
    public var isRelationship: Bool {
        allowed || verified || blocked || trust != .unknown || petname != nil || notes != nil
    }
}

/// One cached identity: pins, claimed nickname, sighting times and the operator's annotations.
public struct IdentityRecord: Equatable, Sendable {
    public enum Limits {
        /// iOS caps nicknames at 50 characters; 128 UTF-8 bytes holds that in any script. Longer claims are cut
        /// at a character boundary, never rejected (the announce itself was valid).
        public static let maxNicknameBytes = 128
    }

    public let key: IdentityKey
    /// Mesh pins (nil for Nostr identities, and for keys the operator annotated before ever seeing them).
    public var pins: MeshPins?
    /// The mesh peer's current 8-byte wire ID, read big-endian (``MeshPins/peerID(_:)``). At most one record holds
    /// a given peer ID; nil for Nostr identities and for a record whose peer ID another verified announce took.
    public var peerID: UInt64?
    /// The nickname claimed by the last verified sighting (announce, or the `n` tag).
    public var nickname: String?
    /// Exact time of the first verified sighting; nil when the operator annotated a key never seen.
    public var firstSeen: UTCTime?
    /// The weekly retention stamp (§3). Only strangers carry one: protected identities have none, so one whose
    /// protection lapses is stamped at the next pass and gets a full retention period.
    public var lastSeen: UTCDay?
    public var annotations: Annotations
    /// Announces refused because they claimed this identity's Noise key with another signing key (the pin
    /// held): how many, and the last one's time. A refusal refreshes nothing else.
    public var pinRefusals: Int
    public var lastPinRefusal: UTCTime?

    public init(
        key: IdentityKey, pins: MeshPins? = nil, peerID: UInt64? = nil, nickname: String? = nil, firstSeen: UTCTime? = nil,
        lastSeen: UTCDay? = nil, annotations: Annotations = Annotations(), pinRefusals: Int = 0, lastPinRefusal: UTCTime? = nil
    ) {
        self.pinRefusals = pinRefusals
        self.lastPinRefusal = lastPinRefusal
        self.key = key
        self.pins = pins
        self.peerID = peerID
        self.nickname = nickname
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.annotations = annotations
    }

    /// True when the record itself carries no relationship (the cache also consults the operator's lists).
    public var isStranger: Bool { !annotations.isRelationship }

    /// Cuts `text` to at most `maxBytes` UTF-8 bytes at a character boundary.
    public static func truncated(_ text: String, maxBytes: Int) -> String {
        if text.utf8.count <= maxBytes { return text }
        var result = ""
        var used = 0
        for character in text {
            let size = character.utf8.count
            if used + size > maxBytes { break }
            result.append(character)
            used += size
        }
        return result
    }
}

/// A stranger's row as the retention pass needs it: no pins, no annotations, nothing decoded beyond this.
public struct RetentionRow: Equatable, Sendable {
    public let key: IdentityKey
    public let lastSeen: UTCDay?
    public let firstSeen: UTCTime?

    public init(key: IdentityKey, lastSeen: UTCDay?, firstSeen: UTCTime?) {
        self.key = key
        self.lastSeen = lastSeen
        self.firstSeen = firstSeen
    }
}
