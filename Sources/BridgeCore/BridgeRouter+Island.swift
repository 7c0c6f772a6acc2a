public import BitchatWire
import BotCrypto
import BotSupport
import Geohash
import Mesh
public import Nostr
import SpamFilter

/// The router's downlink handover between the bridges of one island: each downlink scheduled by its chosen
/// carrier (``CarrierChoice``) and kept by the others for the handover window, taken over when its carrier leaves.
extension BridgeRouter {
    /// Hands a downlink to the scheduler — or, when another bridge on the island is its carrier
    /// (``CarrierChoice``), keeps it for the handover window; what the scheduler drops to make room is
    /// counted by the dropped item's queue.
    mutating func enqueueDownlink(
        _ pending: PendingDownlink, key: DownlinkKey, lane: DownlinkLane, airtime: Int, now: Double, unit: Double,
        protected: Bool, laneLimit: Int? = nil
    ) {
        if let carrier = island.carrier(of: key.event, lane: lane) {
            if delegated.count >= HandoverLimits.maxDelegated { delegated.removeFirst(delegated.count - HandoverLimits.maxDelegated + 1) }
            delegated.append(Delegated(
                pending: pending, key: key, lane: lane, airtime: airtime, unit: unit, protected: protected, laneLimit: laneLimit,
                carrier: carrier, until: now + settings.limits.handoverWindow))
            counters.downlinksDelegated += 1
            return
        }
        schedule(pending, key: key, lane: lane, airtime: airtime, now: now, unit: unit, protected: protected, laneLimit: laneLimit)
    }

    private mutating func schedule(
        _ pending: PendingDownlink, key: DownlinkKey, lane: DownlinkLane, airtime: Int, now: Double, unit: Double,
        protected: Bool, laneLimit: Int?
    ) {
        let dropped = downlinks.enqueue(
            id: key, lane: lane, sender: pending.signer, item: pending, airtime: airtime, now: now, unitRandom: unit,
            laneLimit: laneLimit, protected: protected)
        for drop in dropped { counters.downlinkQueueDrops.add(drop.lane.queue) }
    }

    /// The bridges on this island: `own` is this bridge's peer ID, `gateways` and `rendezvous` the other
    /// verified peers announcing the gateway or the bridge capability (the caller's peer table: announces
    /// heard, leaves and timeouts applied).
    ///
    /// Decided (issue 16): bridges on one island agree who carries what instead of yielding to copies they
    /// may not hear. For each downlink, ``CarrierChoice`` picks one bridge of the island from the event id
    /// and these peer IDs; only that bridge schedules it. The others keep it for
    /// ``BridgeLimits/handoverWindow`` seconds: if its carrier leaves the set in that time (a leave, or the
    /// peer table's timeout), the choice is made again among the remaining bridges and the new carrier —
    /// perhaps this one — schedules it (still subject to loop rule 1, so a copy already heard is not
    /// repeated). A copy that was not heard is not a reason to send another: under radio loss that is what
    /// put messages onto one island twice. The agreement holds once every bridge has heard the others'
    /// announces (each announces on start and every 15 s); all bridges on an island are assumed to serve
    /// the same channel levels (announces do not say which), and a bridge that dies silently loses the
    /// events it was chosen for until the peer table times it out.
    ///
    /// The island's budget is split the same way (issue 34): with n bridges heard on the island each paces 1/n of it
    /// (``PacedBudget``), so together they put no more on the air than one phone gateway would; a bridge that leaves
    /// gives its share back to the others at once (a silent one when the peer table times it out).
    public mutating func setIslandBridges(own: MeshPeerID, gateways: Set<MeshPeerID>, rendezvous: Set<MeshPeerID>, now: Double) {
        island = IslandBridges(own: own, gateways: gateways.subtracting([own]), rendezvous: rendezvous.subtracting([own]))
        downlinks.setShare(1 / Double(1 + island.gateways.union(island.rendezvous).count), now: now)
        var kept: [Delegated] = []
        for var item in delegated where item.until > now {
            let present = switch item.lane {
            case .gateway, .mirror: island.gateways.contains(item.carrier)
            case .bridge: island.rendezvous.contains(item.carrier)
            }
            guard !present else {
                kept.append(item)
                continue
            }
            if let next = island.carrier(of: item.key.event, lane: item.lane) {
                item.carrier = next
                kept.append(item)
            } else {
                counters.downlinksTakenOver += 1
                schedule(
                    item.pending, key: item.key, lane: item.lane, airtime: item.airtime, now: now, unit: item.unit,
                    protected: item.protected, laneLimit: item.laneLimit)
            }
        }
        delegated = kept
    }

    /// At a graceful stop: the events of the downlinks still held here that the island has or will have without
    /// this bridge — another bridge of the island takes them over when this bridge's leave arrives (it kept them
    /// for the handover window), or is their carrier already, or the island heard the message's radio copy. The
    /// machine remembers them as learned, so the relay's replay after a restart does not carry a second copy of
    /// what the island got while this bridge was away (right after a start a bridge has not heard its island's
    /// bridges yet, and carries as if alone). What only this bridge would carry is left out: the replay carries it.
    public var downlinksLeftToIsland: [EventID] {
        let waiting = downlinks.pendingItems.compactMap { item -> EventID? in
            let others = switch item.lane {
            case .gateway, .mirror: island.gateways
            case .bridge: island.rendezvous
            }
            let heard = item.item.radioStableID.map { loop.heardRadioCopy($0) } ?? false
            return others.isEmpty && !heard ? nil : item.id.event
        }
        return waiting + delegated.map(\.key.event)
    }

    /// Downlinks left to another bridge of the island and still inside the handover window.
    public var delegatedDownlinks: Int { delegated.count }
}
