import Foundation
import Nostr
import Synchronization
import Testing
import WebSocketRuntime

@testable import NostrRelay

/// `setRelays` (SIGHUP relay-list reload) against the fake transport.
@Suite("Relay pool core: relay list reload")
struct RelayListReloadTests {
    let t0 = ContinuousClock.now
    let unix: Int64 = 1_700_000_000
    let filter = NostrFilter(kinds: [20000], tags: ["g": ["u4pruy"]], limit: 200)

    @Test("added relay connects at once and gets the live subscription; removed relay is closed and forgotten; kept relay untouched")
    func addAndRemove() throws {
        let transport = FakeTransport()
        var core = try RelayPoolCore(relayURLs: ["ws://127.0.0.1:1"], configuration: .init(jitterUnit: { 0 }), transport: transport)
        _ = core.start(now: t0)
        let a = try #require(transport.lastOpened)
        _ = core.handle(.opened(a), now: t0, unixNow: unix)
        core.subscribe(id: "geo", filters: [filter], lookback: nil, now: t0, unixNow: unix)

        let (added, events) = try core.setRelays(["ws://127.0.0.1:1", "ws://127.0.0.1:2/", "ws://127.0.0.1:2"], now: t0)
        #expect(added == .init(added: ["ws://127.0.0.1:2"], removed: []))
        #expect(events.isEmpty)
        #expect(core.relayURLs == ["ws://127.0.0.1:1", "ws://127.0.0.1:2"])
        let b = try #require(transport.lastOpened)
        #expect(b != a)
        _ = core.handle(.opened(b), now: t0, unixNow: unix)
        #expect(transport.sent(to: b) == [##"["REQ","geo",{"#g":["u4pruy"],"kinds":[20000],"limit":200}]"##])

        let (removed, closing) = try core.setRelays(["ws://127.0.0.1:2"], now: t0)
        #expect(removed == .init(added: [], removed: ["ws://127.0.0.1:1"]))
        #expect(closing == [.disconnected(relay: "ws://127.0.0.1:1", reason: "removed from the relay list")])
        #expect(transport.state.withLock { $0.closed } == [a])
        #expect(core.relayURLs == ["ws://127.0.0.1:2"] && core.connectedCount == 1)
        // The late close of the removed socket is ignored; the kept relay's connection is the same.
        #expect(core.handle(.ended(a, .closedLocally), now: t0, unixNow: unix).isEmpty)
        #expect(core.state("ws://127.0.0.1:2")?.name == "open")
        // Same list again: no change.
        #expect(try core.setRelays(["ws://127.0.0.1:2"], now: t0).change.isEmpty)
    }

    @Test("a bad URL throws and changes nothing; before start, added relays wait for start")
    func badListAndNotRunning() throws {
        let transport = FakeTransport()
        var core = try RelayPoolCore(relayURLs: ["ws://127.0.0.1:1"], configuration: .init(jitterUnit: { 0 }), transport: transport)
        #expect(throws: WebSocketError.self) { try core.setRelays(["ws://127.0.0.1:2", "http://nope"], now: t0) }
        #expect(core.relayURLs == ["ws://127.0.0.1:1"])
        _ = try core.setRelays(["ws://127.0.0.1:1", "ws://127.0.0.1:2"], now: t0)
        #expect(transport.lastOpened == nil)
        _ = core.start(now: t0)
        #expect(transport.state.withLock { $0.opened.count } == 2)
    }
}

@Suite("Relay connection state names (for /metrics)")
struct RelayStateNameTests {
    @Test("every machine state maps to one of the metric's state names")
    func names() {
        let t = ContinuousClock.now
        let states: [(RelayConnectionMachine.State, String)] = [
            (.idle, "connecting"), (.connecting(deadline: t), "connecting"), (.connected(since: t), "open"),
            (.backingOff(until: t), "backoff"), (.permanentlyFailed(retryAt: t), "failed"), (.stopped, "closed"),
        ]
        for (state, name) in states { #expect(state.name == name) }
    }
}
