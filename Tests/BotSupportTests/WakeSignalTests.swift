import BotSupport
import Synchronization
import Testing

/// ``WakeSignal``: the bridge coordinator's tick loop sleeps on it (no clock needed here: every wait below ends
/// by a signal or a cancellation).
@Suite("Wake signal")
struct WakeSignalTests {
    final class Flag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    /// Whether `done` was set within `turns` scheduler turns (a bounded look, never a sleep).
    static func finished(_ done: Flag, turns: Int = 200) async -> Bool {
        for _ in 0..<turns {
            if done.isSet { return true }
            await Task.yield()
        }
        return done.isSet
    }

    @Test("a signal before the wait is kept: the wait returns at once, and only one is kept")
    func keptSignal() async {
        let signal = WakeSignal()
        signal.signal()
        signal.signal()
        await signal.wait()
        let done = Flag()
        let waiter = Task { await signal.wait(); done.set() }
        #expect(await !Self.finished(done))
        signal.signal()
        await waiter.value
        #expect(done.isSet)
    }

    @Test("a cancelled wait returns, and leaves the signal usable: the next wait waits for a signal (the AsyncStream bug)")
    func cancelledWaitLeavesTheSignalUsable() async {
        let signal = WakeSignal()
        for _ in 0..<3 {
            let cancelled = Task { await signal.wait() }
            cancelled.cancel()
            await cancelled.value
        }
        let done = Flag()
        let waiter = Task { await signal.wait(); done.set() }
        #expect(await !Self.finished(done), "a wait after cancelled ones returned without a signal")
        signal.signal()
        await waiter.value
    }

    @Test("wait(atMost:) ends at a signal long before its limit, and a later one still waits")
    func boundedWait() async {
        let signal = WakeSignal()
        let done = Flag()
        let waiter = Task { await signal.wait(atMost: .seconds(3_600)); done.set() }
        #expect(await !Self.finished(done))
        signal.signal()
        await waiter.value
        let second = Flag()
        let again = Task { await signal.wait(atMost: .seconds(3_600)); second.set() }
        #expect(await !Self.finished(second))
        again.cancel()
        await again.value
    }
}
