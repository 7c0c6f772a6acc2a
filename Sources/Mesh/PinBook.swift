public import BitchatWire
public import BotCrypto

/// A pinned mesh identity: the Noise static key a peer ID is derived from and the Ed25519 signing key its
/// first verified announce bound to it (trust on first use). STRANGER-CACHE.md §1, §4.
public struct MeshPin: Sendable, Equatable {
    public let peerID: MeshPeerID
    public let noisePublicKey: [UInt8]
    public let signingPublicKey: Ed25519PublicKey
    /// The nickname last announced, shown for messages from a peer outside the live table.
    public var nickname: String

    public init(noisePublicKey: [UInt8], signingPublicKey: Ed25519PublicKey, nickname: String) {
        self.peerID = MeshPeerID(noisePublicKey: noisePublicKey)
        self.noisePublicKey = noisePublicKey
        self.signingPublicKey = signingPublicKey
        self.nickname = nickname
    }

    init(_ peer: MeshPeer) {
        self.init(noisePublicKey: peer.noisePublicKey, signingPublicKey: peer.signingPublicKey, nickname: peer.nickname)
    }
}

/// The pins the engine enforces beyond its live ``PeerTable``: every peer it verified, plus what its owner
/// loads from the durable stranger cache (``MeshInput/replacePins(_:)``). A peer that fell silent, or that
/// the bridge met before a restart, keeps its pin here, so
/// - an announce with the same Noise key and another signing key is refused (the pin outlives silence and
///   restarts: the stranger-cache write-up's trade-off 2), and
/// - its messages, leaves and deposits still verify against the pinned key (iOS checks peers outside its
///   live registry against its persisted identities the same way).
///
/// The owner removes the pins its cache forgot (``MeshInput/forgetPins(_:)``): an evicted stranger is first
/// contact again (trade-off 1). A full book takes no new first-contact pins (counted): the pins already held
/// are never pushed out by fresh identities, as the cache evicts the newest arrivals first.
struct PinBook {
    enum Limits {
        /// The stranger cache holds at most 2,000 strangers (trimmed to 1,500) plus the operator's protected
        /// identities; 4× that leaves room for a flood the cache has not trimmed yet. ~200 B each: ≤ 2 MB.
        static let maxPins = 8_192
    }

    private(set) var pins: [MeshPeerID: MeshPin] = [:]

    subscript(_ id: MeshPeerID) -> MeshPin? { pins[id] }
    var count: Int { pins.count }

    enum Check: Equatable {
        /// Never pinned (or forgotten).
        case unknown
        /// The same keys as the pin.
        case matches
        /// A pin exists with another Noise or signing key.
        case conflicts
    }

    func check(_ id: MeshPeerID, noiseKey: [UInt8], signingKey: Ed25519PublicKey) -> Check {
        guard let pin = pins[id] else { return .unknown }
        return pin.noisePublicKey == noiseKey && pin.signingPublicKey == signingKey ? .matches : .conflicts
    }

    /// Pins a verified peer (or refreshes its nickname). False when the book is full and the peer is new.
    mutating func pin(_ pin: MeshPin) -> Bool {
        if pins[pin.peerID] == nil, pins.count >= Limits.maxPins { return false }
        pins[pin.peerID] = pin
        return true
    }

    /// The owner's pins replace the loaded set; pins of peers still in the live table stay.
    mutating func replace(with loaded: [MeshPin], keeping live: [MeshPeerID: MeshPeer]) {
        var next: [MeshPeerID: MeshPin] = [:]
        for pin in loaded.prefix(Limits.maxPins) { next[pin.peerID] = pin }
        for (id, peer) in live where next[id] == nil && next.count < Limits.maxPins { next[id] = MeshPin(peer) }
        pins = next
    }

    mutating func forget(_ ids: [MeshPeerID]) {
        for id in ids { pins[id] = nil }
    }
}
