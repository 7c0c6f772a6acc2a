/// A mesh state machine a node runs (`MeshRuntime`'s `MeshNodeOf`): inputs in, actions out, time and randomness
/// passed in, and the time it next has work of its own. The bridge's ``MeshPeerEngine`` is one; the test world's
/// models of the apps' link and sync behaviour are others.
public protocol MeshMachine: SendableMetatype {
    mutating func handle<R: RandomNumberGenerator>(_ input: MeshInput, now: UInt64, random: inout R) -> [MeshAction]
    /// When ``handle(_:now:random:)`` next wants ``MeshInput/tick`` (nil: nothing due).
    func nextDeadline() -> UInt64?
    /// The verified peers as ``MeshAction/peersResync(_:)`` reports them after dropped peer changes.
    var livePeers: [MeshPeer] { get }
}

extension MeshPeerEngine: MeshMachine {
    public var livePeers: [MeshPeer] { Array(table.peers.values) }
}
