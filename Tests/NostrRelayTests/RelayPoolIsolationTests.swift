import BotCrypto
import BotSupport
import Foundation
import Nostr
import Synchronization
import Testing
import WebSocketRuntime

@testable import NostrRelay

/// The pool core's intake, verification workers' protocol, isolation and liveness (issue 14), against the
/// fake transport with a manual clock. Verification "on workers" is played by hand: ``RelayPoolCore/takeJob(now:)``,
/// ``RelayPoolCore/verify(_:)`` and ``RelayPoolCore/finish(_:_:now:)`` in whatever order a test needs.
@Suite("Relay pool core: ordering, isolation, liveness")
struct RelayPoolIsolationTests {
    let t0 = ContinuousClock.now
    static let unix: Int64 = 1_700_000_000
    static let filter = NostrFilter(kinds: [20000], tags: ["g": ["u4pruy"]])
    static let a = "ws://127.0.0.1:1"
    static let b = "ws://127.0.0.1:2"

    static func event(_ i: Int, createdAt: Int64 = unix) -> NostrEvent {
        try! UnsignedEvent(pubkey: RelayPoolCoreTests.key.publicKey, createdAt: createdAt, kind: 20000, tags: [["g", "u4pruy"]],
                           content: "m\(i)").signed(with: RelayPoolCoreTests.key, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
    }

    static func frame(_ event: NostrEvent, subscription: String = "s") -> [UInt8] {
        Array(#"["EVENT","\#(subscription)",\#(event.json)]"#.utf8)
    }

    /// The right id, the signature of another event: reaches Schnorr and fails it.
    static func forged(_ event: NostrEvent) -> [UInt8] {
        Array(#"["EVENT","s",\#(event.json.replacingSignature(with: Self.event(999).signature.hex))]"#.utf8)
    }

    /// A core with `urls` connected and subscribed to "s".
    func connected(
        _ transport: FakeTransport, urls: [String] = [a], configuration: RelayPoolCore.Configuration = .init(jitterUnit: { 0.5 })
    ) throws -> (RelayPoolCore, [ConnectionID]) {
        var core = try RelayPoolCore(relayURLs: urls, configuration: configuration, transport: transport)
        _ = core.start(now: t0)
        let ids = transport.state.withLock { $0.opened.map(\.0) }
        for id in ids { _ = core.handle(.opened(id), now: t0, unixNow: Self.unix) }
        _ = core.subscribe(id: "s", filters: [Self.filter], lookback: nil, now: t0, unixNow: Self.unix)
        return (core, ids)
    }

    func receive(_ core: inout RelayPoolCore, _ id: ConnectionID, _ frame: [UInt8]) -> [RelayPoolEvent] {
        core.receive(RelayPoolCore.parse(frame), on: id, now: t0, unixNow: Self.unix)
    }

    func run(_ core: inout RelayPoolCore, _ job: RelayPoolCore.VerificationJob) -> [RelayPoolEvent] {
        core.finish(job, RelayPoolCore.verify(job), now: t0)
    }

    @Test func workersFinishingOutOfOrderStillDeliverInArrivalOrder() throws {
        let transport = FakeTransport()
        var (core, ids) = try connected(transport)
        let (e1, e2) = (Self.event(1), Self.event(2))
        #expect(receive(&core, ids[0], Self.frame(e1)) == [])
        #expect(receive(&core, ids[0], Self.frame(e2)) == [])
        // The EOSE and the OK wait behind the two events.
        #expect(receive(&core, ids[0], Array(#"["EOSE","s"]"#.utf8)) == [])
        #expect(receive(&core, ids[0], Array(#"["OK","ab",true,""]"#.utf8)) == [])
        #expect(core.waitingJobs == 2)
        let firstTaken = core.takeJob(now: t0)
        let first = try #require(firstTaken)
        let secondTaken = core.takeJob(now: t0)
        let second = try #require(secondTaken)
        #expect(core.takeJob(now: t0) == nil)
        #expect(run(&core, second) == [], "the second event waits for the first")
        #expect(run(&core, first) == [
            .event(e1, relay: Self.a, subscription: "s"), .event(e2, relay: Self.a, subscription: "s"),
            .endOfStoredEvents(subscription: "s", fallback: false),
            .ok(relay: Self.a, eventID: "ab", accepted: true, message: ""),
        ])
        // With nothing in flight a message is handled at once.
        #expect(receive(&core, ids[0], Array(#"["NOTICE","hi"]"#.utf8)) == [.notice(relay: Self.a, message: "hi")])
    }

    /// First copy wins; ids are recorded only after verification, so a forged copy verified first cannot
    /// suppress the genuine one, and a genuine copy that loses the race counts as a duplicate.
    @Test func dedupAcrossRelaysWithCopiesInFlight() throws {
        let transport = FakeTransport()
        var (core, ids) = try connected(transport, urls: [Self.a, Self.b])
        let genuine = Self.event(1)
        _ = receive(&core, ids[0], Self.forged(genuine))
        _ = receive(&core, ids[1], Self.frame(genuine))
        _ = receive(&core, ids[0], Self.frame(genuine))
        let jobs = [core.takeJob(now: t0), core.takeJob(now: t0), core.takeJob(now: t0)].compactMap { $0 }
        #expect(jobs.count == 3, "the relays take turns: a, b, then a again")
        #expect(run(&core, jobs[0]) == [.rejected(relay: Self.a, subscription: "s", reason: .badSignature, count: 1)])
        #expect(run(&core, jobs[1]) == [.event(genuine, relay: Self.b, subscription: "s")])
        #expect(run(&core, jobs[2]) == [])
        #expect(core.stats(Self.a)?.duplicates == 1)
        // Later copies are dropped before verification.
        _ = receive(&core, ids[0], Self.frame(genuine))
        #expect(core.takeJob(now: t0) == nil)
        #expect(core.stats(Self.a)?.duplicates == 2)
        #expect(core.verifierCounters.schnorrChecks == 3)
    }

    /// Issue 14: one relay sending bad signatures spent the pool's one budget, and 7 of 15 legitimate
    /// events from the other relays were lost. Each relay now spends only its own budget.
    @Test func aBadSignatureFloodSpendsOnlyItsRelaysBudget() throws {
        let transport = FakeTransport()
        let configuration = RelayPoolCore.Configuration(verification: .init(burst: 5, perSecond: 0), misbehaviour: .unlimited, jitterUnit: { 0 })
        var (core, ids) = try connected(transport, urls: [Self.a, Self.b], configuration: configuration)
        for i in 0..<50 { _ = receive(&core, ids[0], Self.forged(Self.event(100 + i))) }
        let good = (0..<5).map { Self.event($0) }
        for event in good { _ = receive(&core, ids[1], Self.frame(event)) }
        var delivered: [NostrEvent] = []
        while let job = core.takeJob(now: t0) {
            for case .event(let event, Self.b, _) in run(&core, job) { delivered.append(event) }
        }
        #expect(delivered == good)
        let flooder = try #require(core.stats(Self.a))
        #expect(flooder.drops[.badSignature] == 5)
        #expect(flooder.drops[.overBudget] == 45)
        #expect(flooder.verification.schnorrChecks == 5)
        #expect(core.stats(Self.b)?.verification.verified == 5)
    }

    /// Issue 14: a 20,000-key valid flood spent each relay's budget and an established sender's lines were
    /// dropped `over_budget` with the flood. A priority author's events draw on its reserve once the budget
    /// is spent — and are verified all the same: a forged event claiming that author fails Schnorr. The
    /// reserve is per relay, so a hostile relay forging the regular's key spends only its own reserve
    /// (it could as well have withheld the regular's lines: a relay controls its own stream, no more).
    @Test func priorityAuthorsAreVerifiedFromTheirReserveDuringAFlood() throws {
        func trial(priority: Bool) throws -> (delivered: [NostrEvent], forgedDelivered: Int, stats: RelayStats?, forger: RelayStats?) {
            let transport = FakeTransport()
            let configuration = RelayPoolCore.Configuration(
                verification: .init(burst: 20, perSecond: 0), misbehaviour: .unlimited, jitterUnit: { 0 })
            var (core, ids) = try connected(transport, urls: [Self.a, Self.b], configuration: configuration)
            let regular = RelayPoolCoreTests.key
            if priority { core.setPriorityAuthors([regular.publicKey.hex]) }
            var mine: [NostrEvent] = []
            var delivered: [NostrEvent] = []
            var forgedDelivered = 0
            let forgedText = "forged"
            func drain() {
                while let job = core.takeJob(now: t0) {
                    for case .event(let event, _, _) in run(&core, job) {
                        if event.pubkey == regular.publicKey { delivered.append(event) }
                        if event.content.hasPrefix(forgedText) { forgedDelivered += 1 }
                    }
                }
            }
            for i in 0..<400 {
                let key = try SchnorrSecretKey(bytes: [UInt8](repeating: 7, count: 30) + [UInt8(i / 256), UInt8(i % 256)])
                let flood = try UnsignedEvent(pubkey: key.publicKey, createdAt: Self.unix, kind: 20000, tags: [["g", "u4pruy"]], content: "f\(i)")
                    .signed(with: key, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
                _ = receive(&core, ids[0], Self.frame(flood))
                if i % 50 == 25 {
                    let line = Self.event(i)
                    mine.append(line)
                    _ = receive(&core, ids[0], Self.frame(line))
                    // A hostile relay claims the regular's key: right id, wrong signature, twice per line.
                    for n in 0..<2 {
                        let claim = try UnsignedEvent(
                            pubkey: regular.publicKey, createdAt: Self.unix, kind: 20000, tags: [["g", "u4pruy"]],
                            content: forgedText + "\(i)-\(n)"
                        ).signed(with: regular, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
                        _ = receive(&core, ids[1], Self.forged(claim))
                    }
                }
                if i % 7 == 0 { drain() }
            }
            drain()
            return (delivered, forgedDelivered, core.stats(Self.a), core.stats(Self.b))
        }
        let without = try trial(priority: false)
        let with = try trial(priority: true)
        #expect(with.delivered.map(\.content) == (0..<8).map { "m\(50 * $0 + 25)" })
        #expect(without.delivered.count < 7, "\(without.delivered.count) of 8 without priority")
        #expect(with.forgedDelivered == 0 && without.forgedDelivered == 0)
        #expect((with.stats?.drops[.overBudget] ?? 0) > 300 && with.stats?.drops[.badSignature] == 0)
        // The forged claims reached Schnorr on the forger's relay (its own budget) and failed it:
        // strikes, not deliveries, and the regular's reserve on the other relay was untouched.
        #expect(with.forger?.drops[.badSignature] == 16)
        #expect(without.forger?.drops[.badSignature] == 16)
    }

    /// The worker takes the budget token with the job (one lock per job) and gives it back when the id
    /// check fails: tampered copies still cost no budget.
    @Test func tamperedEventsCostNoBudget() throws {
        let transport = FakeTransport()
        let configuration = RelayPoolCore.Configuration(verification: .init(burst: 2, perSecond: 0), misbehaviour: .unlimited, jitterUnit: { 0 })
        var (core, ids) = try connected(transport, configuration: configuration)
        let genuine = Self.event(1)
        let tampered = Array(#"["EVENT","s",\#(genuine.json.replacingOccurrences(of: "m1", with: "m2"))]"#.utf8)
        for _ in 0..<5 { _ = receive(&core, ids[0], tampered) }
        for event in [genuine, Self.event(2)] { _ = receive(&core, ids[0], Self.frame(event)) }
        var reports: [RelayPoolEvent] = []
        while let job = core.takeJob(now: t0) { reports += run(&core, job) }
        #expect(reports.filter { if case .event = $0 { true } else { false } }.count == 2)
        #expect(core.stats(Self.a)?.drops.counts == [.idMismatch: 5])
    }

    /// Once a relay's budget is spent, its events need only the id check: done at once on the intake
    /// thread, in order behind what is still in flight, with no worker hand-off.
    @Test func overBudgetEventsAreJudgedAtIntake() throws {
        let transport = FakeTransport()
        let configuration = RelayPoolCore.Configuration(verification: .init(burst: 1, perSecond: 0), misbehaviour: .unlimited, jitterUnit: { 0 })
        var (core, ids) = try connected(transport, configuration: configuration)
        _ = receive(&core, ids[0], Self.frame(Self.event(1)))
        let firstTaken = core.takeJob(now: t0)
        let first = try #require(firstTaken)
        #expect(first.admitted)
        // In flight: the over-budget verdicts wait behind it.
        #expect(receive(&core, ids[0], Self.frame(Self.event(2))) == [])
        #expect(core.waitingJobs == 0)
        #expect(run(&core, first) == [
            .event(Self.event(1), relay: Self.a, subscription: "s"),
            .rejected(relay: Self.a, subscription: "s", reason: .overBudget, count: 1),
        ])
        // Nothing in flight: reported at once; a tampered copy still counts as a strike.
        let tampered = Array(#"["EVENT","s",\#(Self.event(3).json.replacingOccurrences(of: "m3", with: "m4"))]"#.utf8)
        #expect(receive(&core, ids[0], tampered) == [.rejected(relay: Self.a, subscription: "s", reason: .idMismatch, count: 1)])
        #expect(core.verifierCounters.overBudget == 1)
        #expect(core.verifierCounters.idMismatch == 1)
        #expect(core.takeJob(now: t0) == nil)
    }

    /// A relay that keeps sending invalid frames is closed, reported and backed off like any failure.
    @Test func aMisbehavingRelayIsClosedReportedAndBackedOff() throws {
        let transport = FakeTransport()
        let configuration = RelayPoolCore.Configuration(misbehaviour: .init(allowance: 3, forgivenPerSecond: 0), jitterUnit: { 0.5 })
        var (core, ids) = try connected(transport, urls: [Self.a, Self.b], configuration: configuration)
        for _ in 0..<3 { #expect(!receive(&core, ids[0], Array("[]".utf8)).contains { if case .closedByPool = $0 { true } else { false } }) }
        let fourth = receive(&core, ids[0], Array("[]".utf8))
        #expect(fourth.contains { if case .closedByPool(Self.a, .misbehaving, _) = $0 { true } else { false } })
        #expect(fourth.contains { if case .disconnected(Self.a, let reason) = $0 { reason.hasPrefix("misbehaving: ") } else { false } })
        #expect(transport.state.withLock { $0.closed } == [ids[0]])
        let stats = try #require(core.stats(Self.a))
        #expect(stats.losses.counts == [.misbehaving: 1])
        #expect(stats.drops[.notAMessageArray] == 4)
        guard case .backingOff(let until) = core.state(Self.a) else { Issue.record("not backing off"); return }
        #expect(until == t0 + .seconds(1))
        // Frames still in the socket after the close are ignored; the other relay is untouched.
        #expect(receive(&core, ids[0], Array("[]".utf8)) == [])
        #expect(core.state(Self.b)?.name == "open")
        // Malformed frames count, over-budget and unwanted ones do not.
        #expect(!InboundDrop.overBudget.isStrike && !InboundDrop.unknownSubscription.isStrike && !InboundDrop.stale.isStrike)
        #expect(InboundDrop.badSignature.isStrike && InboundDrop.idMismatch.isStrike && InboundDrop.invalidJSON.isStrike)
    }

    @Test func dropsAreReportedFirstAndEveryThousandthButAllCounted() throws {
        let transport = FakeTransport()
        var (core, ids) = try connected(transport, configuration: .init(misbehaviour: .unlimited, jitterUnit: { 0 }))
        var reported: [Int] = []
        for _ in 0..<2_500 {
            for case .rejected(_, _, .notAMessageArray, let count) in receive(&core, ids[0], Array("[]".utf8)) { reported.append(count) }
        }
        #expect(reported == [1, 1000, 2000])
        #expect(core.stats(Self.a)?.drops.counts == [.notAMessageArray: 2_500])
        #expect(core.stats(Self.a)?.drops(.malformed) == 2_500)
    }

    /// Back-pressure first: at the high-water mark reading pauses (TCP slows the relay, nothing lost) and
    /// resumes once the workers caught up. Frames lws had read before the pause took effect fill the rest;
    /// beyond the hard bound new events are dropped and counted.
    @Test func aFullWindowPausesReadingThenDropsAndKeepsMessagesFlowing() throws {
        let transport = FakeTransport()
        var (core, ids) = try connected(transport)
        let limit = RelayPoolCore.Limits.maxPendingFrames
        for i in 0..<RelayPoolCore.Limits.pauseReadingAt { _ = receive(&core, ids[0], Self.frame(Self.event(i))) }
        #expect(transport.state.withLock { $0.reading.map(\.paused) } == [true])
        var jobs: [RelayPoolCore.VerificationJob] = []
        for _ in 0..<(RelayPoolCore.Limits.pauseReadingAt - RelayPoolCore.Limits.resumeReadingAt - 1) {
            let job = core.takeJob(now: t0)
            jobs.append(try #require(job))
        }
        for job in jobs { _ = run(&core, job) }
        #expect(transport.state.withLock { $0.reading.map(\.paused) } == [true], "above the low-water mark")
        let one = core.takeJob(now: t0)
        _ = run(&core, try #require(one))
        #expect(transport.state.withLock { $0.reading.map(\.paused) } == [true, false])
        #expect(core.stats(Self.a)?.readPauses == 1)
        // Refill to the hard bound without verifying anything.
        for i in 0..<(limit - RelayPoolCore.Limits.resumeReadingAt) { _ = receive(&core, ids[0], Self.frame(Self.event(10_000 + i))) }
        let over = receive(&core, ids[0], Self.frame(Self.event(limit)))
        #expect(over == [.rejected(relay: Self.a, subscription: "s", reason: .verificationQueueFull, count: 1)])
        // A message behind a full window is handled at once rather than lost.
        #expect(receive(&core, ids[0], Array(#"["EOSE","s"]"#.utf8)) == [.endOfStoredEvents(subscription: "s", fallback: false)])
        #expect(core.waitingJobs == limit)
        #expect(core.stats(Self.a)?.readPauses == 2)
    }

    @Test func aConnectionThatEndsDeliversWhatIsReadyAndDropsTheRest() throws {
        let transport = FakeTransport()
        var (core, ids) = try connected(transport)
        let (e1, e2, e3) = (Self.event(1), Self.event(2), Self.event(3))
        for event in [e1, e2, e3] { _ = receive(&core, ids[0], Self.frame(event)) }
        let j1Taken = core.takeJob(now: t0)
        let j1 = try #require(j1Taken)
        let j2Taken = core.takeJob(now: t0)
        let j2 = try #require(j2Taken)
        #expect(run(&core, j2) == [])
        // e1 is still "on a worker", e2 is verified, e3 was never taken.
        let ended = core.handle(.ended(ids[0], .closed(code: 1001)), now: t0, unixNow: Self.unix)
        #expect(ended.contains(.event(e2, relay: Self.a, subscription: "s")))
        #expect(core.stats(Self.a)?.drops[.connectionEnded] == 2)
        #expect(core.waitingJobs == 0)
        #expect(run(&core, j1) == [], "a job of an ended connection is ignored")
        #expect(core.takeJob(now: t0) == nil)
    }

    @Test func eventsOutsideTheFreshnessWindowAreDroppedBeforeVerification() throws {
        let transport = FakeTransport()
        var (core, ids) = try connected(transport, configuration: .init(freshnessWindow: 900, jitterUnit: { 0 }))
        _ = receive(&core, ids[0], Self.frame(Self.event(1, createdAt: Self.unix - 901)))
        _ = receive(&core, ids[0], Self.frame(Self.event(2, createdAt: Self.unix + 901)))
        _ = receive(&core, ids[0], Self.frame(Self.event(3, createdAt: Self.unix - 900)))
        #expect(core.waitingJobs == 1)
        #expect(core.stats(Self.a)?.drops.counts == [.stale: 1, .future: 1])
        // Every EVENT that parsed counts as received, dropped or not (`bitchat_bridge_events_received_total`);
        // an EVENT whose event does not parse is a malformed frame, and an EOSE is no event: neither counts.
        _ = receive(&core, ids[0], Array(#"["EVENT","s",{"id":1}]"#.utf8))
        _ = receive(&core, ids[0], Array(#"["EOSE","s"]"#.utf8))
        #expect(core.stats(Self.a)?.eventsReceived == 3)
        #expect(core.stats(Self.a)?.framesReceived == 5)
        // Off by default (`nostr listen` shows the hour of history phones load).
        var (open, openIDs) = try connected(FakeTransport())
        _ = receive(&open, openIDs[0], Self.frame(Self.event(1, createdAt: Self.unix - 3600)))
        #expect(open.waitingJobs == 1)
    }

    /// Issue 14: a relay that upgraded and then stayed silent counted as connected for 90 s. It counts as
    /// answering only once it sent something (or a PONG), and recently; silence closes it.
    @Test func answeringNeedsAnAnswerAndSilenceClosesTheConnection() throws {
        let transport = FakeTransport()
        var (core, ids) = try connected(transport, urls: [Self.a, Self.b])
        let liveness = RelayPoolCore.Liveness()
        #expect(transport.state.withLock { $0.pinged } == ids, "a probe as soon as each connection opens")
        #expect(core.connectedCount == 2)
        #expect(core.answeringCount(now: t0) == 0)
        _ = receive(&core, ids[1], Array(#"["EOSE","s"]"#.utf8))
        #expect(core.isAnswering(Self.b, now: t0) == true)
        #expect(core.isAnswering(Self.a, now: t0) == false)
        // Relay b goes quiet: pinged after the quiet period, still answering while its PONG comes back.
        let quiet = t0 + liveness.probeAfterQuiet
        _ = core.tick(now: quiet, unixNow: Self.unix)
        #expect(transport.state.withLock { $0.pinged.filter { $0 == ids[1] }.count } == 2)
        _ = core.handle(.pong(ids[1]), now: quiet, unixNow: Self.unix)
        // Relay a never answered: closed when the answer window passes, backed off.
        let silent = t0 + liveness.answerWindow
        let reports = core.tick(now: silent, unixNow: Self.unix)
        #expect(reports.contains { if case .closedByPool(Self.a, .unanswered, _) = $0 { true } else { false } })
        #expect(core.stats(Self.a)?.losses.counts == [.unanswered: 1])
        #expect(core.state(Self.a)?.name == "backoff")
        #expect(core.isAnswering(Self.b, now: silent) == true)
        #expect(core.answeringCount(now: silent) == 1)
        let snapshot = core.snapshot(now: silent)
        #expect(snapshot.answeringCount == 1)
        #expect(snapshot.connectedCount == 1)
        #expect(snapshot.relays.map(\.consecutiveFailures) == [1, 0])
        // Quiet but alive for an hour: pinged every quiet period, answering throughout.
        var now = quiet
        for _ in 0..<(3600 / 25) {
            now = now + liveness.probeAfterQuiet
            _ = core.tick(now: now, unixNow: Self.unix)
            _ = core.handle(.pong(ids[1]), now: now, unixNow: Self.unix)
            #expect(core.isAnswering(Self.b, now: now) == true)
        }
        #expect(core.stats(Self.b)?.losses.counts == [:])
    }

    @Test func noticesBeyondTheAllowanceAreCountedNotReported() throws {
        let transport = FakeTransport()
        var (core, ids) = try connected(transport)
        var reported = 0
        for _ in 0..<50 { reported += receive(&core, ids[0], Array(#"["NOTICE","spam"]"#.utf8)).count }
        #expect(reported == Int(RelayPoolCore.Limits.noticeBurst))
        #expect(core.stats(Self.a)?.notices == 50)
        #expect(core.stats(Self.a)?.noticesSuppressed == 50 - Int(RelayPoolCore.Limits.noticeBurst))
    }

    @Test func relayReasonsAreTheNIP01PrefixesAndNothingElse() {
        #expect(RelayReason(message: "blocked: spam") == .blocked)
        #expect(RelayReason(message: "rate-limited: slow down") == .rateLimited)
        #expect(RelayReason(message: "auth-required: please") == .authRequired)
        #expect(RelayReason(message: "") == .none)
        #expect(RelayReason(message: "whatever a relay says") == .other)
        #expect(RelayReason(message: "(none): sneaky") == .other)
        #expect(RelayReason(message: "other: sneaky") == .other)
        for error: NostrError in [.idMismatch, .badSignature, .invalidPublicKey, .overBudget, .notAMessageArray, .tooManyTags(65)] {
            #expect(InboundDrop(error).rawValue == error.name)
        }
    }
}
