import BotCrypto
import Foundation
import Nostr
import Testing
import WebSocketRuntime

@testable import NostrRelay

/// Trusted subscriptions page through a relay's capped answers (issue 35: a site's thousands of records behind relays
/// that answer with 500 at most), and are refreshed for what a relay dropped live.
@Suite("Relay pool: paged backfill of trusted subscriptions (fake transport)")
struct RelayBackfillTests {
    static let operatorKey = try! SchnorrSecretKey(bytes: [UInt8](repeating: 9, count: 32))
    let t0 = ContinuousClock.now
    static let unix: Int64 = 1_800_000_000

    static func record(_ i: Int, at: Int64) -> NostrEvent {
        try! UnsignedEvent(pubkey: operatorKey.publicKey, createdAt: at, kind: 30078, tags: [["d", "r\(i)"], ["s", "site"]], content: "x")
            .signed(with: operatorKey, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
    }

    /// A pool with one relay, connected, subscribed to the site's records as a trusted subscription (the ±900 s window on).
    func connected() throws -> (RelayPoolCore, FakeTransport, ConnectionID) {
        let transport = FakeTransport()
        var core = try RelayPoolCore(
            relayURLs: ["ws://127.0.0.1:1"], configuration: .init(freshnessWindow: 900, jitterUnit: { 0 }), transport: transport)
        _ = core.start(now: t0)
        let connection = try #require(transport.lastOpened)
        let filter = NostrFilter(authors: [Self.operatorKey.publicKey.hex], kinds: [30078], tags: ["s": ["site"]])
        core.subscribe(id: "site", filters: [filter], lookback: nil, trusted: true, now: t0, unixNow: Self.unix)
        _ = core.handle(.opened(connection), now: t0, unixNow: Self.unix)
        return (core, transport, connection)
    }

    /// Hands `events` to the core as the relay's EVENT frames for subscription `id` (the live one, or `site:page`),
    /// verifies them as the workers would, then the EOSE.
    func page(_ core: inout RelayPoolCore, _ connection: ConnectionID, _ events: [NostrEvent], as id: String = "site:page") -> [RelayPoolEvent] {
        var out: [RelayPoolEvent] = []
        for event in events {
            out += core.handle(.text(connection, Array(#"["EVENT","\#(id)",\#(event.json)]"#.utf8)), now: t0, unixNow: Self.unix)
            while let job = core.takeJob(now: t0) { out += core.finish(job, RelayPoolCore.verify(job), now: t0) }
        }
        return out + core.handle(.text(connection, Array(#"["EOSE","\#(id)"]"#.utf8)), now: t0, unixNow: Self.unix)
    }

    @Test("pages by until under a page subscription of its own while a page reaches further back, then closes it; the subscription stays live all along; old records pass the freshness window")
    func pagesBackByUntil() throws {
        var (core, transport, connection) = try connected()
        // A relay that caps at 3: records a day old, stamped 2 a second.
        let old = Self.unix - 86_400
        let records = (0..<7).map { Self.record($0, at: old + Int64($0 / 2)) }  // seconds old+0 … old+3
        var delivered = page(&core, connection, Array(records[4...6].reversed()), as: "site")
        #expect(transport.sent(to: connection).last == ##"["REQ","site:page",{"#s":["site"],"authors":["\##(Self.operatorKey.publicKey.hex)"],"kinds":[30078],"until":\##(old + 2)}]"##)
        // until is inclusive: the second split across pages comes again (a duplicate), with what is older.
        delivered += page(&core, connection, [records[5], records[4], records[3]])
        #expect(transport.sent(to: connection).last?.contains(#""until":\#(old + 1)"#) == true)
        // A record stored meanwhile arrives on the live subscription (it was never replaced by a bounded page).
        let stored = Self.record(9, at: Self.unix)
        delivered += core.handle(.text(connection, Array(#"["EVENT","site",\#(stored.json)]"#.utf8)), now: t0, unixNow: Self.unix)
        while let job = core.takeJob(now: t0) { delivered += core.finish(job, RelayPoolCore.verify(job), now: t0) }
        delivered += page(&core, connection, [records[3], records[2], records[1]])
        delivered += page(&core, connection, [records[1], records[0]])
        #expect(transport.sent(to: connection).last == #"["CLOSE","site:page"]"#, "the pages closed once one reaches no further back")
        #expect(!transport.sent(to: connection).contains { $0.hasPrefix(#"["REQ","site","#) && $0.contains("until") }, "the live subscription is never bounded")
        let ids = delivered.compactMap { if case .event(let event, _, _) = $0 { event.id } else { nil } }
        #expect(Set(ids) == Set(records.map(\.id) + [stored.id]) && ids.count == 8, "every record once, a day old though it is, and the live one")
        #expect(delivered.allSatisfy { if case .event(_, _, let subscription) = $0 { subscription == "site" } else { true } }, "reported as the subscription's")
        #expect(core.stats("ws://127.0.0.1:1")?.backfillPages == 3)
        // An EOSE of the live subscription now starts nothing.
        let sent = transport.sent(to: connection).count
        _ = page(&core, connection, [], as: "site")
        #expect(transport.sent(to: connection).count == sent)
    }

    @Test("refreshed every minute for the last 15 minutes, paged the same way")
    func refreshes() throws {
        var (core, transport, connection) = try connected()
        _ = page(&core, connection, [], as: "site")
        let before = transport.sent(to: connection).count
        // The relay answers now and then (a connection silent for 45 s would be closed).
        _ = core.handle(.text(connection, Array(#"["NOTICE","hi"]"#.utf8)), now: t0 + .seconds(40), unixNow: Self.unix + 40)
        _ = core.tick(now: t0 + .seconds(59), unixNow: Self.unix + 59)
        #expect(transport.sent(to: connection).count == before)
        #expect(core.nextDeadline().map { $0 <= t0 + .seconds(60) } == true)
        _ = core.tick(now: t0 + .seconds(60), unixNow: Self.unix + 60)
        #expect(transport.sent(to: connection).last?.contains(#""since":\#(Self.unix + 60 - 900)"#) == true)
        _ = page(&core, connection, [Self.record(1, at: Self.unix + 30)])
        #expect(transport.sent(to: connection).last?.contains(#""since":\#(Self.unix + 60 - 900)"#) == true, "paged within the window")
        #expect(transport.sent(to: connection).last?.contains(#""until":\#(Self.unix + 30)"#) == true)
        _ = page(&core, connection, [Self.record(1, at: Self.unix + 30)])
        #expect(transport.sent(to: connection).last == #"["CLOSE","site:page"]"#)
    }

    @Test("a record the report stream dropped for a slow consumer comes again: forgotten by the dedup, the backfill runs again 2 s after it ended")
    func lostRecordsComeAgain() throws {
        var (core, transport, connection) = try connected()
        let records = [Self.record(1, at: Self.unix - 10), Self.record(0, at: Self.unix - 20)]  // newest first, as relays answer
        let first = page(&core, connection, records, as: "site")
        let lost = try #require(first.first { if case .event(let event, _, _) = $0 { event.id == records[0].id } else { false } })
        core.reportLost(lost, now: t0)
        _ = page(&core, connection, [records[1]])  // until = the older second: nothing new, the backfill ends
        #expect(transport.sent(to: connection).last == #"["CLOSE","site:page"]"#)
        let sent = transport.sent(to: connection).count
        _ = core.tick(now: t0 + .seconds(2), unixNow: Self.unix + 2)
        #expect(transport.sent(to: connection).count == sent + 1, "the backfill again, from the top")
        let again = page(&core, connection, records)
        let ids = again.compactMap { if case .event(let event, _, _) = $0 { event.id } else { nil } }
        #expect(ids == [records[0].id], "only the lost record is delivered again")
    }

    @Test("a record lost live (no backfill under way) brings a backfill 2 s later")
    func lostLive() throws {
        var (core, transport, connection) = try connected()
        _ = page(&core, connection, [], as: "site")
        let live = Self.record(3, at: Self.unix)
        var reports = core.handle(.text(connection, Array(#"["EVENT","site",\#(live.json)]"#.utf8)), now: t0, unixNow: Self.unix)
        while let job = core.takeJob(now: t0) { reports += core.finish(job, RelayPoolCore.verify(job), now: t0) }
        core.reportLost(try #require(reports.first { if case .event = $0 { true } else { false } }), now: t0)
        #expect(core.nextDeadline().map { $0 <= t0 + .seconds(2) } == true)
        let sent = transport.sent(to: connection).count
        _ = core.tick(now: t0 + .seconds(2), unixNow: Self.unix + 2)
        #expect(transport.sent(to: connection).count == sent + 1)
        let again = page(&core, connection, [live])
        #expect(again.contains { if case .event(let event, _, _) = $0 { event.id == live.id } else { false } })
    }

    @Test("a catch-up (100 or more records not seen before) is asked again 5 s after it ended, until a run brings fewer: a relay that acknowledged a bulk before storing it all has the rest by then")
    func catchUpChecked() throws {
        var (core, transport, connection) = try connected()
        let bulk = (0..<RelayPoolCore.Limits.catchUpFresh).map { Self.record($0, at: Self.unix - 10) }
        _ = page(&core, connection, bulk, as: "site")
        _ = page(&core, connection, [bulk[0]])  // until = that second: nothing older, the backfill ends
        let sent = transport.sent(to: connection).count
        _ = core.tick(now: t0 + .seconds(4), unixNow: Self.unix + 4)
        #expect(transport.sent(to: connection).count == sent)
        _ = core.tick(now: t0 + RelayPoolCore.Limits.catchUpCheck, unixNow: Self.unix + 5)
        #expect(transport.sent(to: connection).count == sent + 1 && transport.sent(to: connection).last?.hasPrefix(#"["REQ","site:page""#) == true,
                "the catch-up asked again")
        // The relay stored the rest meanwhile: it comes; then a run with nothing new ends the checks.
        let rest = Self.record(500, at: Self.unix - 5)
        let again = page(&core, connection, bulk.reversed() + [rest])
        #expect(again.compactMap { if case .event(let event, _, _) = $0 { event.id } else { nil } } == [rest.id])
        _ = page(&core, connection, [bulk[0]])
        let after = transport.sent(to: connection).count
        _ = core.tick(now: t0 + .seconds(30), unixNow: Self.unix + 30)
        #expect(transport.sent(to: connection).count == after, "one new record: no more checks")
    }
}
