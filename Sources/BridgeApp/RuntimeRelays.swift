import BotSupport
import Bridge
import BridgeCore
import Geohash
import Nostr
import NostrRelay
import RelayDirectory
import WebSocketRuntime

/// The relay side for a configuration: the relay list (the operator's relays, and the directory's nearest when
/// `relay_directory` is on), the pool, and its subscriptions. One builder of the composition root.
enum RuntimeRelays {
    static func pool(_ config: BridgeConfiguration, fleet: FleetSettings?, host: BridgeHost, logger: Logger) throws(CommandExit) -> RelayPool {
        let urls = try relayURLs(config)
        if let caFile = config.relayCAFile {
            // Read once here so a missing or unreadable file is a configuration error naming the field, not a
            // certificate failure on every connection.
            do { _ = try FileIO.read(caFile, maxBytes: 4 << 20) } catch { throw .usage("relay_ca_file: \(error)") }
        }
        let pool: RelayPool
        do {
            pool = try RelayPool(
                relayURLs: urls,
                // The bridge carries nothing outside ±900 s (EventRules): such events are dropped at intake, before
                // a Schnorr check, and counted by relay and reason (`stale` / `future`).
                configuration: .init(
                    authKey: nil, freshnessWindow: EventRules.Limits.maxEventAgeSeconds, jitterUnit: { Double.random(in: 0..<1) }),
                webSocket: .init(caFile: config.relayCAFile, userAgent: "bitchat-bridge/\(BridgeVersion.string)"),
                logger: logger.child("relays"), unixNow: { [time = host.time] in Int64(time.nowMs() / 1000) })
        } catch {
            throw .failure("relays: \(error)")
        }
        subscribe(pool, config, fleet: fleet, now: Int64(host.time.nowMs() / 1000))
        return pool
    }

    private static func subscribe(_ pool: RelayPool, _ config: BridgeConfiguration, fleet: FleetSettings?, now: Int64) {
        if config.gateway {
            for (id, filter) in channelSubscriptions(config, now: now) { pool.subscribe(id: id, filters: [filter], lookback: 3600) }
            // Kind-1 notes and kind 5 of the served channels, 15 min back: whether a board post's author bridged it
            // already (BOARD.md §11), and other bridges' copies carrying their island's board packets (the
            // `bitchat-board` tag). Nothing is minted from a note.
            pool.subscribe(id: "board-\(config.geohash.string)", filters: [boardNotesFilter(config, now: now)], lookback: 900)
        }
        if let cell = config.rendezvousCell, config.rendezvous {
            pool.subscribe(id: "bridge-rendezvous", filters: [.rendezvous(cells: cell.ring.map(\.string), now: now)], lookback: 900)
        }
        if let fleet { pool.subscribe(id: "bridge-fleet", filters: [fleet.filter], lookback: nil, trusted: true) }
        // The site's records (issue 35): every record, however old, and verified whatever the flood (see trusted).
        if let filter = fleet?.siteFilter { pool.subscribe(id: "bridge-site", filters: [filter], lookback: nil, trusted: true) }
    }

    /// The channel subscriptions (NOSTR-GEO §5.4's filter, one hour back): `geo-<geohash>` for the geohash itself,
    /// as phones subscribe it; `geo-parents-<geohash>` for its served parents and `geo-blocks-<geohash>` for its
    /// served block children, each one filter over those geohashes. Three subscriptions rather than 36, because
    /// relays cap subscriptions per connection (commonly 10–20); the split keeps a busy region level from spending
    /// the smaller levels' share of the backfill limit.
    static func channelSubscriptions(_ config: BridgeConfiguration, now: Int64) -> [(id: String, filter: NostrFilter)] {
        let own = config.geohash
        var out: [(String, NostrFilter)] = [("geo-\(own.string)", .geohashChannel(own.string, now: now))]
        let others = config.servedChannels.dropFirst()
        let parents = others.filter { $0.precision < own.precision }.map(\.string)
        let children = others.filter { $0.precision > own.precision }.map(\.string)
        for (name, cells) in [("parents", parents), ("blocks", children)] where !cells.isEmpty {
            var filter = NostrFilter.geohashChannel(own.string, now: now)
            filter.tags = ["g": cells]
            out.append(("geo-\(name)-\(own.string)", filter))
        }
        return out
    }

    /// The served channels' kind-1 notes and kind 5 within §11's 15-min window (the author's copy of a board post;
    /// another island's board packets and tombstones).
    static func boardNotesFilter(_ config: BridgeConfiguration, now: Int64) -> NostrFilter {
        NostrFilter(
            kinds: [BoardNostrCopy.textNoteKind, BoardNostrCopy.deletionKind], tags: ["g": config.servedChannels.map(\.string)],
            since: now - RecentBoardNotes.Limits.windowSeconds, limit: 200)
    }

    /// Operator relays plus, with the directory on, the 5 nearest to the channel and to each cell of the rendezvous
    /// ring (phones publish to their own cell's relays and subscribe on the ring), deduplicated.
    static func relayURLs(_ config: BridgeConfiguration) throws(CommandExit) -> [String] {
        var urls = config.relays
        if config.relayDirectory {
            let (directory, _) = try DataFiles.loadRelayDirectory(option: config.relayFile, setting: "relay_file (BRIDGE_RELAY_FILE)")
            let places = RelayDirectory.bridgePlaces(
                channel: config.geohash, gateway: config.gateway, rendezvousCell: config.rendezvous ? config.rendezvousCell : nil)
            // Both apps' nearest relays for each place (iOS ∪ Android, NOSTR-GEO §3.5).
            urls += directory.bridgeSelection(places: places).urls.filter { !urls.contains($0) }
        }
        return urls
    }

}

extension RuntimeRelays {
    /// The courier relays' pool (issue 24): `courier_relays` plus the operator's relays, apart from the geohash relays;
    /// the gateway subscribes its watch chunks itself. No freshness window: a drop may be a day old.
    static func courierPool(_ config: BridgeConfiguration, host: BridgeHost, logger: Logger) throws(CommandExit) -> RelayPool {
        do {
            return try RelayPool(
                relayURLs: config.courierRelays, configuration: .init(authKey: nil, jitterUnit: { Double.random(in: 0..<1) }),
                webSocket: .init(caFile: config.relayCAFile, userAgent: "bitchat-bridge/\(BridgeVersion.string)"),
                logger: logger.child("courier"), unixNow: { [time = host.time] in Int64(time.nowMs() / 1000) }, subject: "courier")
        } catch {
            throw .failure("courier_relays: \(error)")
        }
    }
}

/// The courier pool as the coordinator's courier side: publishes and the gateway's subscriptions.
struct CourierPoolClient: CourierRelayClient {
    let pool: RelayPool

    func publish(_ event: NostrEvent) { pool.publish(event) }
    /// The gateway changes a subscription only when it must (a debounced watch change, a backfill round, smaller
    /// chunks), so a change the pool's duplicate window would swallow (the phones' 1 s rule against refresh bursts; a
    /// relay answers a backfill round faster) goes as `CLOSE` and a fresh `REQ` instead of being lost.
    func subscribe(id: String, filter: NostrFilter) {
        guard pool.subscribe(id: id, filters: [filter], lookback: nil) == .ignoredDuplicate else { return }
        pool.unsubscribe(id: id)
        _ = pool.subscribe(id: id, filters: [filter], lookback: nil)
    }
    func unsubscribe(id: String) { pool.unsubscribe(id: id) }
}

/// A pool's reports as the coordinator's inputs, read straight from the pool's one bounded stream (no second stream, no
/// hand-over task between them); `input` picks and translates, nil skips a report.
struct PoolInputs<Element: Sendable>: AsyncSequence, Sendable {
    typealias Failure = Never
    let pool: RelayPool
    let input: @Sendable (RelayPoolEvent, RelayPool) -> Element?

    struct AsyncIterator: AsyncIteratorProtocol {
        var reports: AsyncStream<RelayPoolEvent>.Iterator
        let pool: RelayPool
        let input: @Sendable (RelayPoolEvent, RelayPool) -> Element?

        mutating func next() async -> Element? {
            while let report = await reports.next() {
                if let element = input(report, pool) { return element }
            }
            return nil
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(reports: pool.events.makeAsyncIterator(), pool: pool, input: input) }
}

extension PoolInputs where Element == BridgeRelayInput {
    /// The channel pool: verified events, the connected count, acknowledged uplinks.
    static func relays(_ pool: RelayPool) -> PoolInputs {
        PoolInputs(pool: pool) { report, pool in
            switch report {
            case .event(let event, _, _): .event(event)
            case .connected, .disconnected: .connectedRelays(pool.connectedCount)
            case .ok(_, let id, true, _): (try? EventID(hex: id)).map { .accepted($0) }
            case .ok(_, let id, false, let message): (try? EventID(hex: id)).map { .refused($0, message: message) }
            default: nil
            }
        }
    }
}

extension PoolInputs where Element == CourierRelayInput {
    /// The courier pool: drops, the connected count, every `OK` (a publish counts only after `OK true`), `CLOSED` and
    /// `NOTICE` (a refused filter makes the chunks smaller).
    static func courier(_ pool: RelayPool) -> PoolInputs {
        PoolInputs(pool: pool) { report, pool in
            switch report {
            case .event(let event, _, let subscription): .drop(event, subscription: subscription)
            case .endOfStoredEvents(let subscription, _): .endOfStored(subscription: subscription)
            case .connected, .disconnected: .connectedRelays(pool.connectedCount)
            case .ok(_, let id, let accepted, _): (try? EventID(hex: id)).map { .answered($0, accepted: accepted) }
            case .closed(let relay, let subscription, let message): .refused(relay: relay, subscription: subscription, message: message)
            case .notice(let relay, let message): .refused(relay: relay, subscription: nil, message: message)
            default: nil
            }
        }
    }
}
