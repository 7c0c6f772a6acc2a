import BitchatWire
import BlueZ
import BotSupport
import Bridge
import BridgeCore
import Mesh
import MeshRuntime
import MeshSync
import VirtualRadio
import Geohash
import BotCrypto

/// The mesh side for a configuration: the transport (a radio hub's segments or BlueZ, unless the host brings one)
/// and the node running the peer engine as the bridge, with its identity and capabilities. One builder of the
/// composition root.
enum RuntimeMesh {
    static func node(
        _ config: BridgeConfiguration, keys: BridgeKeys, host: BridgeHost, logger: Logger
    ) throws(CommandExit) -> (MeshNode, any MeshTransport) {
        let transport: any MeshTransport
        if let given = host.transport { transport = given } else { transport = try Self.transport(config, logger: logger) }
        var capabilities = PeerCapabilities()
        if config.gateway { capabilities.insert(.gateway) }
        if config.rendezvous { capabilities.insert(.bridge) }
        // BOARD.md §1 "Ours": advertised once the bridge stores and serves posts (Android PR peers then include it in
        // board rounds; iOS ignores the bit).
        capabilities.insert(.board)
        let identity = MeshIdentity(
            noisePublicKey: keys.noiseKey.publicKey, signingKey: keys.signingKey, nickname: config.nickname,
            // TLV 0x06 goes with the bridge capability only (MESH-WIRE §4.7.3; it was sent with the rendezvous role off).
            capabilities: capabilities, bridgeGeohash: config.rendezvous ? config.rendezvousCell?.string : nil)
        var configuration = MeshPeerEngine.Configuration()
        // The bridge relays a public message only once its judgement passed it (SPAM-FILTER §1).
        configuration.gatePublicRelays = true
        configuration.peerTimeoutMs = UInt64(config.meshPeerTimeoutSeconds) * 1_000
        // Gossip sync as iOS (BOARD.md §8–§9): answer REQUEST_SYNC from the durable stores, ask direct peers.
        configuration.sync = SyncRequester.Configuration()
        let node = MeshNode(
            engine: MeshPeerEngine(identity: identity, configuration: configuration), transport: transport, clock: host.time,
            seed: host.seed())
        return (node, transport)
    }

    private static func transport(_ config: BridgeConfiguration, logger: Logger) throws(CommandExit) -> any MeshTransport {
        switch config.mesh {
        case .tcp:
            // The URL as configured, `?mtu=N` included, parsed as `mesh listen --mesh` parses it.
            do {
                return try RadioClientTransport.connect([RadioClientTransport.Endpoint(url: config.mesh.description)])
            } catch {
                throw .failure("cannot join the mesh at \(config.mesh): \(error)")
            }
        case .tcpSegments(let urls):
            do {
                return try RadioClientTransport.connect(try urls.map { try RadioClientTransport.Endpoint(url: $0) })
            } catch {
                throw .failure("cannot join the mesh at \(urls.joined(separator: ",")): \(error)")
            }
        case .bluez(let adapter):
            do {
                return try BlueZTransport.start(options: .init(adapter: adapter), logger: logger.child("bluez"))
            } catch {
                throw .failure(error.description)
            }
        }
    }
}
