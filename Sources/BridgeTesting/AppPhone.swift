public import AppModels
import BotCrypto
import BotSupport
public import BitchatWire
import Mesh
public import MeshRuntime
import Synchronization

/// A phone of the world that behaves as the app's own code does with what a bridge sends (``AppPhoneModel``: the
/// link binding, the ingress guard, the gossip store, what it shows), run by a node on the site's clock. Put it alone
/// with a bridge on a ``Site/bleLink(mtu:)`` for a phone's BLE link to the bridge.
public final class AppPhone: Sendable {
    public let name: String
    public let node: MeshNodeOf<AppPhoneModel>
    let transport: SegmentTransport
    private let running = Mutex<Task<Void, Never>?>(nil)
    public let id: MeshPeerID

    init(name: String, app: AppPhoneModel.App, segments: [Segment], time: ManualTime, seed: UInt64) {
        self.name = name
        transport = SegmentTransport(segments)
        let model = AppPhoneModel(
            app: app, nickname: name, noiseKey: .generate(), signingKey: .generate(), start: time.nowMs())
        id = model.peerID
        node = MeshNodeOf(engine: model, transport: transport, clock: time, seed: seed)
    }

    /// The model as it is now: what the phone shows, who owns its links, what it dropped and why.
    public var model: AppPhoneModel { get async { await node.machine } }

    func start() async {
        for (link, mtu, kind) in transport.links { await node.submit(.linkUp(link, mtu: mtu, kind: kind)) }
        let node = node
        running.withLock { $0 = Task { await node.run() } }
    }

    /// Returns once the phone's node has taken every frame that reached it.
    public func drained() async { await transport.events.drained() }

    /// Says `text` in the public chat.
    public func say(_ text: String) async { await node.submit(.sendPublicMessage(text)) }

    public func leave() async {
        transport.close()
        await running.withLock { $0 }?.value
    }
}
