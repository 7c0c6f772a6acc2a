import BotCrypto
import Foundation
import Nostr
import Synchronization
import Testing
import WebSocketRuntime

@testable import NostrRelay

/// Records what the pool asks of the socket layer.
final class FakeTransport: RelayTransport {
    struct State {
        var next = 100
        var opened: [(ConnectionID, WebSocketEndpoint)] = []
        var sent: [(ConnectionID, String)] = []
        var closed: [ConnectionID] = []
        var pinged: [ConnectionID] = []
        var reading: [(ConnectionID, paused: Bool)] = []
    }
    let state = Mutex(State())
    func open(_ endpoint: WebSocketEndpoint) -> ConnectionID {
        state.withLock {
            $0.next += 1
            let id = ConnectionID(raw: $0.next)
            $0.opened.append((id, endpoint))
            return id
        }
    }
    func send(_ connection: ConnectionID, text: String) { state.withLock { $0.sent.append((connection, text)) } }
    func ping(_ connection: ConnectionID) { state.withLock { $0.pinged.append(connection) } }
    func setReading(_ connection: ConnectionID, paused: Bool) { state.withLock { $0.reading.append((connection, paused)) } }
    func close(_ connection: ConnectionID) { state.withLock { $0.closed.append(connection) } }
    var lastOpened: ConnectionID? { state.withLock { $0.opened.last?.0 } }
    func sent(to id: ConnectionID) -> [String] { state.withLock { $0.sent.filter { $0.0 == id }.map(\.1) } }
}

@Suite("Relay pool core (fake transport)")
struct RelayPoolCoreTests {
    static let key = try! SchnorrSecretKey(bytes: [UInt8](repeating: 3, count: 32))
    let t0 = ContinuousClock.now

    static func event(_ i: Int, geohash: String = "u4pruy") -> NostrEvent {
        try! UnsignedEvent(pubkey: key.publicKey, createdAt: 1_700_000_000 + Int64(i), kind: 20000,
                           tags: [["g", geohash]], content: "m\(i)").signed(with: key, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
    }

    func makeCore(_ transport: FakeTransport, urls: [String] = ["ws://127.0.0.1:1"]) throws -> RelayPoolCore {
        try RelayPoolCore(relayURLs: urls, configuration: .init(jitterUnit: { 0 }), transport: transport)
    }

    @Test func queuesWhileDisconnectedBoundedAndFlushesOnConnect() throws {
        let transport = FakeTransport()
        var core = try makeCore(transport)
        _ = core.start(now: t0)
        let id = try #require(transport.lastOpened)
        for i in 0..<(RelayPoolCore.Limits.maxQueuedEvents + 1) { core.publish(Self.event(i)) }
        #expect(core.stats("ws://127.0.0.1:1")?.queueDropped == 1)
        _ = core.handle(.opened(id), now: t0, unixNow: 1_700_000_000)
        let sent = transport.sent(to: id)
        #expect(sent.count == RelayPoolCore.Limits.maxQueuedEvents)
        #expect(sent.first == ClientMessage.event(Self.event(1)).text)  // the oldest (0) was dropped
        #expect(sent.last == ClientMessage.event(Self.event(200)).text)
    }

    @Test func subscriptionsReplayWithFreshSinceAndCloseOnUnsubscribe() throws {
        let transport = FakeTransport()
        var core = try makeCore(transport)
        _ = core.start(now: t0)
        let first = try #require(transport.lastOpened)
        let filter = NostrFilter(kinds: [20000], tags: ["g": ["u4pruy"]], limit: 200)
        let subscribed = core.subscribe(id: "geo-u4pruy", filters: [filter], lookback: 3600, now: t0, unixNow: 1_700_000_000)
        #expect(subscribed == .sent(relays: 0))
        _ = core.handle(.opened(first), now: t0, unixNow: 1_700_000_000)
        #expect(transport.sent(to: first) == [##"["REQ","geo-u4pruy",{"#g":["u4pruy"],"kinds":[20000],"limit":200,"since":1699996400}]"##])
        let eose = core.handle(.text(first, Array(#"["EOSE","geo-u4pruy"]"#.utf8)), now: t0, unixNow: 1_700_000_000)
        #expect(eose == [.endOfStoredEvents(subscription: "geo-u4pruy", fallback: false)])
        // Lost; reconnect after backoff; replay with a fresh since.
        let lost = core.handle(.ended(first, .closed(code: 1001)), now: t0, unixNow: 1_700_000_100)
        #expect(lost.contains(.disconnected(relay: "ws://127.0.0.1:1", reason: "closed by peer (1001)")))
        _ = core.tick(now: t0 + .seconds(1), unixNow: 1_700_000_500)
        let second = try #require(transport.lastOpened)
        #expect(second != first)
        _ = core.handle(.opened(second), now: t0 + .seconds(1), unixNow: 1_700_000_500)
        #expect(transport.sent(to: second) == [##"["REQ","geo-u4pruy",{"#g":["u4pruy"],"kinds":[20000],"limit":200,"since":1699996900}]"##])
        core.unsubscribe(id: "geo-u4pruy")
        #expect(transport.sent(to: second).last == #"["CLOSE","geo-u4pruy"]"#)
    }

    @Test func crossRelayDedupAndForgedCopiesCannotSuppressTheGenuineEvent() throws {
        let transport = FakeTransport()
        var core = try makeCore(transport, urls: ["ws://127.0.0.1:1", "ws://127.0.0.1:2"])
        _ = core.start(now: t0)
        let ids = transport.state.withLock { $0.opened.map(\.0) }
        _ = core.subscribe(id: "s", filters: [NostrFilter(kinds: [20000], tags: ["g": ["u4pruy"]])], lookback: nil, now: t0, unixNow: 0)
        for id in ids { _ = core.handle(.opened(id), now: t0, unixNow: 0) }
        let genuine = Self.event(1)
        // A copy with the right id but a signature from another event arrives first.
        let forgedJSON = genuine.json.replacingSignature(with: Self.event(2).signature.hex)
        let forged = core.handle(.text(ids[0], Array(#"["EVENT","s",\#(forgedJSON)]"#.utf8)), now: t0, unixNow: 0)
        #expect(forged == [.rejected(relay: "ws://127.0.0.1:1", subscription: "s", reason: .badSignature, count: 1)])
        let frame = Array(#"["EVENT","s",\#(genuine.json)]"#.utf8)
        do { let r = core.handle(.text(ids[1], frame), now: t0, unixNow: 0); #expect(r == [.event(genuine, relay: "ws://127.0.0.1:2", subscription: "s")]) }
        do { let r = core.handle(.text(ids[0], frame), now: t0, unixNow: 0); #expect(r == []) }
        #expect(core.stats("ws://127.0.0.1:1")?.duplicates == 1)
        // A relay injecting another channel's event is caught by the client-side filter check.
        let foreign = Array(#"["EVENT","s",\#(Self.event(3, geohash: "9q8yy").json)]"#.utf8)
        do { let r = core.handle(.text(ids[0], foreign), now: t0, unixNow: 0); #expect(r == [.rejected(relay: "ws://127.0.0.1:1", subscription: "s", reason: .filterMismatch, count: 1)]) }
    }

    @Test func okClosedNoticeAndMalformedFramesAreCountedPerRelay() throws {
        let transport = FakeTransport()
        var core = try makeCore(transport)
        _ = core.start(now: t0)
        let id = try #require(transport.lastOpened)
        _ = core.handle(.opened(id), now: t0, unixNow: 0)
        for frame in [#"["OK","aa",false,"blocked: spam"]"#, #"["OK","bb",true,""]"#, #"["CLOSED","x","rate-limited: slow"]"#,
                      #"["NOTICE","hi"]"#, #"["EVENT","s",{"#, #"["AUTH","c"]"#] {
            _ = core.handle(.text(id, Array(frame.utf8)), now: t0, unixNow: 0)
        }
        _ = core.handle(.oversizedMessage(id, bytes: 1 << 20), now: t0, unixNow: 0)
        let stats = try #require(core.stats("ws://127.0.0.1:1"))
        #expect(stats.okRejected.counts == [.blocked: 1])
        #expect(stats.okAccepted == 1)
        #expect(stats.closed.counts == [.rateLimited: 1])
        #expect(stats.notices == 1)
        #expect(stats.authIgnored == 1)
        #expect(stats.drops.counts == [.invalidJSON: 1, .frameTooLarge: 1])
    }

    @Test func nip42AuthAnsweredWhenEnabledAndClosedSubscriptionReplayed() throws {
        let transport = FakeTransport()
        var core = try RelayPoolCore(relayURLs: ["ws://127.0.0.1:1"],
                                     configuration: .init(authKey: Self.key, jitterUnit: { 0 }), transport: transport)
        _ = core.start(now: t0)
        let id = try #require(transport.lastOpened)
        _ = core.subscribe(id: "s", filters: [NostrFilter(kinds: [20000])], lookback: nil, now: t0, unixNow: 5)
        _ = core.handle(.opened(id), now: t0, unixNow: 5)
        _ = core.handle(.text(id, Array(#"["CLOSED","s","auth-required: please"]"#.utf8)), now: t0, unixNow: 5)
        _ = core.handle(.text(id, Array(#"["AUTH","chal-1"]"#.utf8)), now: t0, unixNow: 5)
        let authText = try #require(transport.sent(to: id).last)
        #expect(authText.hasPrefix(#"["AUTH",{"#))
        guard case .array(let parts) = try JSONParserShim.parse(authText), parts.count == 2 else { Issue.record("bad AUTH"); return }
        let auth = try UnverifiedEvent(json: parts[1]).verified()
        #expect(auth.kind == 22242)
        #expect(auth.tags == [["relay", "ws://127.0.0.1:1"], ["challenge", "chal-1"]])
        _ = core.handle(.text(id, Array(#"["OK","\#(auth.id.hex)",true,""]"#.utf8)), now: t0, unixNow: 5)
        #expect(transport.sent(to: id).last == #"["REQ","s",{"kinds":[20000]}]"#)
    }

    @Test func nip42EventsRefusedBeforeAuthAreResentOnceAfterIt() throws {
        let transport = FakeTransport()
        var core = try RelayPoolCore(relayURLs: ["ws://127.0.0.1:1"],
                                     configuration: .init(authKey: Self.key, jitterUnit: { 0 }), transport: transport)
        _ = core.start(now: t0)
        let id = try #require(transport.lastOpened)
        let event = Self.event(7)
        core.publish(event)  // queued: not connected yet
        _ = core.subscribe(id: "s", filters: [NostrFilter(kinds: [20000])], lookback: nil, now: t0, unixNow: 5)
        _ = core.handle(.opened(id), now: t0, unixNow: 5)
        #expect(transport.sent(to: id) == [ClientMessage.event(event).text, #"["REQ","s",{"kinds":[20000]}]"#])
        // The relay answers in the order it received: CLOSED for the REQ, OK false for the EVENT, then the challenge.
        for frame in [#"["CLOSED","s","auth-required: you must auth"]"#,
                      #"["OK","\#(event.id.hex)",false,"auth-required: you must auth"]"#, #"["AUTH","chal-2"]"#] {
            _ = core.handle(.text(id, Array(frame.utf8)), now: t0, unixNow: 5)
        }
        let authText = try #require(transport.sent(to: id).last)
        guard case .array(let parts) = try JSONParserShim.parse(authText), parts.count == 2 else { Issue.record("bad AUTH"); return }
        let auth = try UnverifiedEvent(json: parts[1]).verified()
        _ = core.handle(.text(id, Array(#"["OK","\#(auth.id.hex)",true,""]"#.utf8)), now: t0, unixNow: 5)
        #expect(Array(transport.sent(to: id).suffix(2)) == [#"["REQ","s",{"kinds":[20000]}]"#, ClientMessage.event(event).text])
        #expect(core.stats("ws://127.0.0.1:1")?.authRetried == 2)
        // Refused again although authenticated: not re-sent a second time (no loop).
        let before = transport.sent(to: id).count
        _ = core.handle(.text(id, Array(#"["OK","\#(event.id.hex)",false,"auth-required: still"]"#.utf8)), now: t0, unixNow: 5)
        _ = core.handle(.text(id, Array(#"["CLOSED","s","auth-required: still"]"#.utf8)), now: t0, unixNow: 5)
        #expect(transport.sent(to: id).count == before)
        // Without an auth key the same frames are only counted.
        let plain = FakeTransport()
        var ignoring = try makeCore(plain)
        _ = ignoring.start(now: t0)
        let plainID = try #require(plain.lastOpened)
        _ = ignoring.handle(.opened(plainID), now: t0, unixNow: 5)
        _ = ignoring.handle(.text(plainID, Array(#"["AUTH","chal-3"]"#.utf8)), now: t0, unixNow: 5)
        _ = ignoring.handle(.text(plainID, Array(#"["CLOSED","s","auth-required: you must auth"]"#.utf8)), now: t0, unixNow: 5)
        #expect(plain.sent(to: plainID).isEmpty)
        #expect(ignoring.stats("ws://127.0.0.1:1")?.authIgnored == 1)
        #expect(ignoring.stats("ws://127.0.0.1:1")?.closed.counts == [.authRequired: 1])
    }

    /// The events remembered for a retry after AUTH are bounded by the publish queue's limit: of n + 1
    /// events sent before AUTH and refused, the newest n are re-sent and the oldest is not.
    @Test func eventsRememberedForAuthRetryAreBoundedAtTheQueueLimit() throws {
        let transport = FakeTransport()
        var core = try RelayPoolCore(relayURLs: ["ws://127.0.0.1:1"],
                                     configuration: .init(authKey: Self.key, jitterUnit: { 0 }), transport: transport)
        _ = core.start(now: t0)
        let id = try #require(transport.lastOpened)
        _ = core.handle(.opened(id), now: t0, unixNow: 5)
        let limit = RelayPoolCore.Limits.maxQueuedEvents
        let events = (0...limit).map { Self.event(1000 + $0) }
        for event in events { core.publish(event) }
        for event in events {
            _ = core.handle(.text(id, Array(#"["OK","\#(event.id.hex)",false,"auth-required: first"]"#.utf8)), now: t0, unixNow: 5)
        }
        _ = core.handle(.text(id, Array(#"["AUTH","c"]"#.utf8)), now: t0, unixNow: 5)
        guard case .array(let parts) = try JSONParserShim.parse(try #require(transport.sent(to: id).last)), parts.count == 2
        else { Issue.record("bad AUTH"); return }
        let auth = try UnverifiedEvent(json: parts[1]).verified()
        let before = transport.sent(to: id).count
        _ = core.handle(.text(id, Array(#"["OK","\#(auth.id.hex)",true,""]"#.utf8)), now: t0, unixNow: 5)
        let resent = Array(transport.sent(to: id).dropFirst(before))
        #expect(resent.count == limit)
        #expect(resent.first == ClientMessage.event(events[1]).text)
        #expect(resent.last == ClientMessage.event(events[limit]).text)
        #expect(core.stats("ws://127.0.0.1:1")?.authRetried == limit)
    }

    // MARK: Duplicate subscribe and the EOSE fallback (NOSTR-GEO §6), with a manual clock

    static let chatFilter = NostrFilter(kinds: [20000], tags: ["g": ["u4pruy"]], limit: 200)

    /// A pool with one connected relay and its connection id.
    func connectedCore(_ transport: FakeTransport, urls: [String] = ["ws://127.0.0.1:1"]) throws -> (RelayPoolCore, [ConnectionID]) {
        var core = try makeCore(transport, urls: urls)
        _ = core.start(now: t0)
        let ids = transport.state.withLock { $0.opened.map(\.0) }
        for id in ids { _ = core.handle(.opened(id), now: t0, unixNow: 1_700_000_000) }
        return (core, ids)
    }

    @Test func sameIDWithinOneSecondIsIgnoredAtTheBoundary() throws {
        let transport = FakeTransport()
        var (core, ids) = try connectedCore(transport)
        let other = NostrFilter(kinds: [20001])
        #expect(core.subscribe(id: "s", filters: [Self.chatFilter], lookback: 3600, now: t0, unixNow: 1_700_000_000) == .sent(relays: 1))
        // 1 s − 1 ns later: ignored, even with different filters.
        let justInside = t0 + RelayPoolCore.Limits.duplicateSubscribeWindow - .nanoseconds(1)
        #expect(core.subscribe(id: "s", filters: [other], lookback: nil, now: justInside, unixNow: 1_700_000_000) == .ignoredDuplicate)
        #expect(transport.sent(to: ids[0]).count == 1)
        // Exactly 1 s later: accepted, and changed filters replace the subscription.
        let atWindow = t0 + RelayPoolCore.Limits.duplicateSubscribeWindow
        #expect(core.subscribe(id: "s", filters: [other], lookback: nil, now: atWindow, unixNow: 1_700_000_001) == .sent(relays: 1))
        #expect(transport.sent(to: ids[0]).last == #"["REQ","s",{"kinds":[20001]}]"#)
        // A different id inside the window is a different subscription.
        #expect(core.subscribe(id: "t", filters: [other], lookback: nil, now: atWindow, unixNow: 1_700_000_001) == .sent(relays: 1))
        #expect(transport.sent(to: ids[0]).count == 3)
    }

    @Test func identicalActiveREQIsNotResentButGoesWhereTheRelayClosedIt() throws {
        let transport = FakeTransport()
        var (core, ids) = try connectedCore(transport, urls: ["ws://127.0.0.1:1", "ws://127.0.0.1:2"])
        #expect(core.subscribe(id: "s", filters: [Self.chatFilter], lookback: 3600, now: t0, unixNow: 1_700_000_000) == .sent(relays: 2))
        let later = t0 + .seconds(5)
        #expect(core.subscribe(id: "s", filters: [Self.chatFilter], lookback: 3600, now: later, unixNow: 1_700_000_005) == .alreadyActive(resentTo: 0))
        #expect(transport.sent(to: ids[0]).count == 1)
        #expect(transport.sent(to: ids[1]).count == 1)
        // Relay 2 closes it; the same call now re-sends there only, with a fresh since.
        _ = core.handle(.text(ids[1], Array(#"["CLOSED","s","error: shutting down"]"#.utf8)), now: later, unixNow: 1_700_000_005)
        let evenLater = later + .seconds(2)
        #expect(core.subscribe(id: "s", filters: [Self.chatFilter], lookback: 3600, now: evenLater, unixNow: 1_700_000_010) == .alreadyActive(resentTo: 1))
        #expect(transport.sent(to: ids[0]).count == 1)
        #expect(transport.sent(to: ids[1]).last == ##"["REQ","s",{"#g":["u4pruy"],"kinds":[20000],"limit":200,"since":1699996410}]"##)
    }

    @Test func eoseFallbackFiresAtTenSecondsAndCountsTheSilentRelay() throws {
        let transport = FakeTransport()
        var (core, ids) = try connectedCore(transport, urls: ["ws://127.0.0.1:1", "ws://127.0.0.1:2"])
        _ = core.subscribe(id: "s", filters: [Self.chatFilter], lookback: nil, now: t0, unixNow: 1_700_000_000)
        // Relay 1 answers; relay 2 stays silent.
        do { let r = core.handle(.text(ids[0], Array(#"["EOSE","s"]"#.utf8)), now: t0, unixNow: 0); #expect(r == []) }
        do { let r = core.tick(now: t0 + RelayPoolCore.Limits.eoseFallback - .nanoseconds(1), unixNow: 0); #expect(r == []) }
        do {
            let r = core.tick(now: t0 + RelayPoolCore.Limits.eoseFallback, unixNow: 0)
            #expect(r == [.endOfStoredEvents(subscription: "s", fallback: true)])
        }
        #expect(core.stats("ws://127.0.0.1:2")?.eoseTimeouts == 1)
        #expect(core.stats("ws://127.0.0.1:1")?.eoseTimeouts == 0)
        // Reported once: a late EOSE and later ticks add nothing.
        do { let r = core.handle(.text(ids[1], Array(#"["EOSE","s"]"#.utf8)), now: t0 + .seconds(11), unixNow: 0); #expect(r == []) }
        do { let r = core.tick(now: t0 + .seconds(30), unixNow: 0); #expect(r == []) }
    }

    @Test func eoseFromEveryRelayBeatsTheFallbackAndNoRelayMeansFallbackOnly() throws {
        let transport = FakeTransport()
        var (core, ids) = try connectedCore(transport)
        _ = core.subscribe(id: "s", filters: [Self.chatFilter], lookback: nil, now: t0, unixNow: 0)
        do { let r = core.handle(.text(ids[0], Array(#"["EOSE","s"]"#.utf8)), now: t0, unixNow: 0); #expect(r == [.endOfStoredEvents(subscription: "s", fallback: false)]) }
        do { let r = core.tick(now: t0 + .seconds(10), unixNow: 0); #expect(r == []) }
        // Subscribed while no relay is connected: a relay's disconnect must not end the load; the fallback does.
        let offline = FakeTransport()
        var idle = try makeCore(offline)
        _ = idle.start(now: t0)
        #expect(idle.subscribe(id: "s", filters: [Self.chatFilter], lookback: nil, now: t0, unixNow: 0) == .sent(relays: 0))
        let attempt = try #require(offline.lastOpened)
        do { let r = idle.handle(.ended(attempt, .connect("refused")), now: t0, unixNow: 0); #expect(r == [.connectFailed(relay: "ws://127.0.0.1:1", reason: "connect: refused")]) }
        #expect(idle.stats("ws://127.0.0.1:1")?.lastFailure == "connect: refused")
        do { let r = idle.tick(now: t0 + .seconds(10), unixNow: 0); #expect(r.contains(.endOfStoredEvents(subscription: "s", fallback: true))) }
    }
}

import BotSupport

enum JSONParserShim {
    static func parse(_ text: String) throws -> JSONValue { try JSONParser().parse(text) }
}

extension String {
    func replacingSignature(with sig: String) -> String {
        guard let range = self.range(of: #""sig":""#) else { return self }
        return String(self[..<range.upperBound]) + sig + "\"}"
    }
}
