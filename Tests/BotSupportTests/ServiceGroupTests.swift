import BotSupport
import Synchronization
import Testing

/// ``ServiceGroup`` with fake services: each logs its start, its stop and the end of its run; a stop deadline
/// is waited out on an injected clock (a zero deadline passes at once, any other only when cancelled).
@Suite("Service group: ordered start, reverse stop, deadlines")
struct ServiceGroupTests {
    struct StartRefused: Error, CustomStringConvertible {
        var description: String { "refused" }
    }

    final class Fakes: Sendable {
        let log = Mutex<[String]>([])

        func note(_ line: String) { log.withLock { $0.append(line) } }
        func lines(_ prefix: String) -> [String] { log.withLock { $0 }.filter { $0.hasPrefix(prefix) } }

        /// A service that runs until its stop; `endsAtOnce`: its run returns by itself; `stopHangs`: its stop waits
        /// until cancelled (and its run ends only when cancelled); `startFails`: its start throws.
        func service(
            _ name: String, deadline: Duration = .seconds(86_400), endsAtOnce: Bool = false, stopHangs: Bool = false,
            startFails: Bool = false
        ) -> Service {
            let stopped = AsyncStream.makeStream(of: Void.self)
            return Service(name: name, deadline: deadline, start: {
                self.note("start \(name)")
                if startFails { throw StartRefused() }
            }, run: {
                if !endsAtOnce {
                    if stopHangs { await untilCancelled() } else { for await _ in stopped.stream {} }
                }
                self.note("ended \(name)")
            }, stop: {
                self.note("stop \(name)")
                if stopHangs { await untilCancelled() } else { stopped.continuation.finish() }
            })
        }
    }

    /// The injected clock: a zero deadline is over at once; any other ends only by cancellation.
    static let clock: @Sendable (Duration) async throws -> Void = { deadline in
        guard deadline != .zero else { return }
        await untilCancelled()
        throw CancellationError()
    }

    @Test func startsInOrderAndStopsInReverse() async {
        let fakes = Fakes()
        let group = ServiceGroup(["a", "b", "c"].map { fakes.service($0) }, sleep: Self.clock)
        group.requestStop("test")
        let report = await group.run()
        #expect(report.reason == .requested("test") && report.overran.isEmpty)
        #expect(fakes.lines("start") == ["start a", "start b", "start c"])
        #expect(fakes.lines("stop") == ["stop c", "stop b", "stop a"])
        #expect(Set(fakes.lines("ended")) == ["ended a", "ended b", "ended c"], "every run has returned")
    }

    @Test func aStopThatOverrunsItsDeadlineIsReportedAndTheRestStillStop() async {
        let fakes = Fakes()
        let group = ServiceGroup(
            [fakes.service("a"), fakes.service("b", deadline: .zero, stopHangs: true), fakes.service("c")], sleep: Self.clock)
        group.requestStop("test")
        let report = await group.run()
        #expect(report.overran == ["b"])
        #expect(fakes.lines("stop") == ["stop c", "stop b", "stop a"])
        #expect(Set(fakes.lines("ended")) == ["ended a", "ended b", "ended c"], "the overrunning run was cancelled and awaited")
    }

    @Test func aServiceThatEndsOnItsOwnStopsTheOthersInReverse() async {
        let fakes = Fakes()
        let group = ServiceGroup([fakes.service("a"), fakes.service("b", endsAtOnce: true), fakes.service("c")], sleep: Self.clock)
        let report = await group.run()
        #expect(report.reason == .serviceEnded("b") && report.overran.isEmpty)
        #expect(fakes.lines("stop") == ["stop c", "stop a"], "the ended service is not stopped again")
        #expect(Set(fakes.lines("ended")) == ["ended a", "ended b", "ended c"])
    }

    @Test func aStartFailureStopsTheStartedOnesInReverseAndStartsNoMore() async {
        let fakes = Fakes()
        let group = ServiceGroup(
            [fakes.service("a"), fakes.service("b"), fakes.service("c", startFails: true), fakes.service("d")], sleep: Self.clock)
        let report = await group.run()
        #expect(report.reason == .startFailed("c", "refused") && report.overran.isEmpty)
        #expect(fakes.lines("start") == ["start a", "start b", "start c"], "d never starts")
        #expect(fakes.lines("stop") == ["stop b", "stop a"], "c never ran, so it is not stopped")
        #expect(Set(fakes.lines("ended")) == ["ended a", "ended b"])
    }
}
