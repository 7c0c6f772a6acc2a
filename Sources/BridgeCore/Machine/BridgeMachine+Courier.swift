import BotSupport
import Courier
import Mesh
public import Nostr

/// What the courier relays (the DM relays drops live on, COURIER.md §4.2) report to the machine.
public enum CourierRelayInput: Sendable {
    /// A verified event from the courier subscriptions, with the subscription that brought it.
    case drop(NostrEvent, subscription: String)
    /// Every relay sent what it stored for `subscription` (or the pool's 10 s passed).
    case endOfStored(subscription: String)
    /// How many courier relays are connected now.
    case connectedRelays(Int)
    /// A relay's `OK` for an event published there.
    case answered(EventID, accepted: Bool)
    /// A relay's `CLOSED` for `subscription`, or its `NOTICE` (subscription nil).
    case refused(relay: String, subscription: String?, message: String)
}

/// The machine's courier side (issue 24): the ``CourierGateway`` fed from the mesh (verified and lost peers, deposits,
/// the engine's answers to deliveries) and from the courier relays; its deliveries become directed 0x04 sends of the
/// engine, everything else leaves as ``Action/courier(_:)`` for the executor. Nothing here reads or logs the mail.
///
/// Handovers take their slots from the one airtime schedule (``AirtimeMachine/courierSlots(now:)``): after the
/// chat downlinks ready to go, within courier's share of the mesh budget (``AirtimeSettings/courierPerMinute``).
extension BridgeMachine {
    mutating func courier(_ input: CourierGateway.Input, now: Double) -> [Action] {
        guard var gateway = courierGateway else { return [] }
        let actions = gateway.handle(input, nowMs: Self.ms(now), slots: airtime.courierSlots(now: now))
        courierGateway = gateway
        var handovers = 0
        let mapped = actions.map { action -> Action in
            if case .deliver(let peer, let envelope, let ref) = action {
                handovers += 1
                return .mesh(.sendCourier(to: peer, envelope: envelope, ref: ref.token))
            }
            return .courier(action)
        }
        airtime.chargeCourier(handovers, now: now, waiting: gateway.waitsForSlots)
        return mapped
    }

    mutating func courierRelay(_ input: CourierRelayInput, now: Double) -> [Action] {
        switch input {
        case .drop(let event, let subscription): return courier(.drop(event, subscription: subscription), now: now)
        case .endOfStored(let subscription): return courier(.endOfStored(subscription: subscription), now: now)
        case .connectedRelays(let count): return courier(.relaysConnected(count), now: now)
        case .answered(let id, let accepted): return courier(.published(id, accepted: accepted), now: now)
        case .refused(let relay, let subscription, let message):
            let before = courierGateway?.tagsPerFilter
            let actions = courier(.refused(subscription: subscription, message: message), now: now)
            guard let after = courierGateway?.tagsPerFilter, let before, after < before else { return actions }
            // The relay's words are logged by the pool; here what the bridge did about them.
            return [.log(LogLine(.warning, "courier filters made smaller", [
                ("relay.url", .string(relay)), ("tags_per_filter", .integer(Int64(after))), ("was", .integer(Int64(before))),
            ]))] + actions
        }
    }

    /// The engine's reports the gateway needs; nil for the others.
    static func courierInput(_ action: MeshAction) -> CourierGateway.Input? {
        switch action {
        case .peerVerified(let peer): .peerVerified(peer.id, noiseKey: peer.noisePublicKey, direct: peer.isDirect)
        case .peerLost(let id, _): .peerLost(id)
        case .peersResync(let table): .peersResync(table.map { .init(id: $0.id, noiseKey: $0.noisePublicKey, direct: $0.isDirect) })
        case .courierDeposit(let from, let envelope): .deposit(from: from, envelope: envelope)
        case .courierSent(let token, let delivered): CourierGateway.DeliveryRef(token: token).map { .delivered($0, ok: delivered) }
        default: nil
        }
    }

    /// The gateway's deadline in the machine's seconds, or nil (off, or nothing due); while ready mail waits for the
    /// downlink schedule, also when a slot frees up.
    func courierDeadline(now: Double) -> Double? {
        guard let gateway = courierGateway else { return nil }
        let own = gateway.nextDeadline().map { Double($0) / 1000 }
        guard gateway.waitsForSlots else { return own }
        return min(own ?? .infinity, airtime.nextCourierSlot(now: now))
    }
}
