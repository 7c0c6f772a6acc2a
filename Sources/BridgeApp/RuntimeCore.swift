import BotCrypto
import BotSupport
import Bridge
import BridgeCore
import Courier
import MeshSync
import Nostr
import SpamFilter
import ModerationLog
import Geohash

/// The bridge's decisions for a configuration: its Nostr keys for each role, the judge (spam filter, block list,
/// denylist) and the router, in the ``BridgeMachine``. One builder of the composition root.
struct RuntimeCore {
    /// Signs the channel's presence and board copies (gateway role), nil with the role off.
    let channelKey: SchnorrSecretKey?
    /// Signs the rendezvous presence (rendezvous role), nil with the role off.
    let rendezvousKey: SchnorrSecretKey?

    /// The keys, and the machine built with them (handed on to the coordinator alone).
    static func build(
        _ config: BridgeConfiguration, stores: RuntimeStores, host: BridgeHost, liveView: Bool
    ) throws(CommandExit) -> (RuntimeCore, BridgeMachine) {
        let keys = stores.keys
        let channelKey: SchnorrSecretKey?
        let rendezvousKey: SchnorrSecretKey?
        do {
            channelKey = config.gateway ? try keys.channelKey(geohash: config.geohash.string) : nil
            rendezvousKey = try config.rendezvousCell.map { try keys.rendezvousKey(cell: $0.string) }
        } catch {
            throw .failure("cannot derive Nostr keys: \(error)")
        }
        let ownKeys = Set([channelKey?.publicKey, rendezvousKey?.publicKey].compactMap { $0 })
        var policy = AdmissionPolicy(config: stores.spamConfig, exemptSenders: Set(ownKeys.map(\.hex)))
        if config.shadow { policy.setShadowMode(true) }
        var judge = BridgeJudge(settings: .init(channel: config.geohash.string, logText: stores.modlogConfig.logText), policy: policy)
        judge.setDenylist(stores.denylist)
        let router = BridgeRouter(
            settings: .init(
                channel: config.gateway ? config.geohash : nil, rendezvousCell: config.rendezvous ? config.rendezvousCell : nil,
                mirrorDownlink: config.mirrorDownlink, mirrorUplink: config.mirrorUplink,
                servedChannels: config.gateway ? config.servedChannels : nil),
            ownKeys: ownKeys, rendezvousKey: rendezvousKey, remembered: stores.remembered, channelKey: channelKey,
            presenceSeed: host.seed(), judge: judge, clockOrigin: .now)
        var configuration = BridgeMachine.Configuration(
            keys: keys, powBits: config.powBits, fleet: stores.fleet,
            sync: SyncResponder.Configuration(
                airtime: AirtimeBudget.Configuration(bytesPerWindow: config.syncReplyBudgetBytes), pacing: SyncResponder.Pacing()),
            boardCopies: config.gateway, liveView: liveView, seed: host.seed())
        configuration.nickname = config.nickname
        if config.courier {
            // The drop keys come from secret bytes drawn at every start: one fresh key per publish, unlinkable.
            configuration.courier = CourierGateway.Configuration(
                ownNoiseKey: keys.noiseKey.publicKey, dropKeySeed: host.courierSeed())
        }
        let machine = BridgeMachine(router: router, configuration: configuration)
        return (RuntimeCore(channelKey: channelKey, rendezvousKey: rendezvousKey), machine)
    }
}
