import Nostr
import BridgeCore

/// The router with its airtime machine, wired as ``BridgeMachine`` wires them: the downlinks the router lets cross
/// are offered to the airtime machine, and a tick puts the due ones on the air (after the router's re-check) beside
/// the router's own periodic work. For tests of what crosses and when, without the rest of the bridge.
struct RouterWithAirtime {
    var router: BridgeRouter
    var airtime: AirtimeMachine

    init(_ router: BridgeRouter) {
        self.router = router
        airtime = AirtimeMachine(limits: router.settings.limits)
    }

    /// `actions` with their downlinks offered to the airtime machine (and left out).
    private mutating func offered(_ actions: [BridgeRouter.Action], now: Double) -> [BridgeRouter.Action] {
        actions.filter { action in
            guard case .downlink(let offer) = action else { return true }
            airtime.offer(offer, now: now)
            return false
        }
    }

    mutating func relayEvent(_ event: NostrEvent, now: Double, random: Double, protected: Bool = false) -> [BridgeRouter.Action] {
        offered(router.relayEvent(event, now: now, random: random, protected: protected), now: now)
    }

    mutating func release(_ event: NostrEvent, now: Double, random: Double) -> Result<Void, BridgeRouter.ReleaseRefusal> {
        router.release(event, now: now, random: random).map { _ = offered($0, now: now) }
    }

    mutating func tick(now: Double) -> [BridgeRouter.Action] {
        airtime.tick(router: &router, now: now) + router.tick(now: now)
    }

    var counters: BridgeCounters { router.counters }
    var pendingDownlinks: Int { airtime.pendingCount }
}
