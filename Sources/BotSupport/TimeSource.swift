import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The time an owner of deadlines runs on (the bridge's coordinator, the mesh node): wall time in ms since
/// the Unix epoch and a way to wait for it. Injected, so tests drive them with ``ManualTime`` instead of real
/// time and advance it without sleeping.
public protocol TimeSource: Sendable {
    /// ms since the Unix epoch.
    func nowMs() -> UInt64
    /// Returns once `now() >= deadline`, or earlier (callers check the time again), or when the calling task
    /// is cancelled.
    func sleep(untilMs deadline: UInt64) async
}

/// Real time: `wallClock` for the time, `Task.sleep` for waiting. One wait is at most ``Limits/maxSleepMs``, so
/// a wall clock stepped (NTP, a Pi that booted without network time) delays a deadline by at most that.
public struct SystemTime: TimeSource {
    public enum Limits {
        public static let maxSleepMs: UInt64 = 5_000
    }

    private let wallClock: @Sendable () -> UInt64

    public init(wallClock: @escaping @Sendable () -> UInt64 = SystemTime.wallClockMs) {
        self.wallClock = wallClock
    }

    public func nowMs() -> UInt64 { wallClock() }

    /// The system's wall clock (CLOCK_REALTIME), ms since the Unix epoch.
    @Sendable public static func wallClockMs() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) * 1_000 + UInt64(spec.tv_nsec) / 1_000_000
    }

    public func sleep(untilMs deadline: UInt64) async {
        let now = wallClock()
        guard deadline > now else { return }
        try? await Task.sleep(for: .milliseconds(min(deadline - now, Limits.maxSleepMs)))
    }
}

/// Time that moves only when told (tests): ``advance(to:)`` wakes every sleeper whose deadline passed.
public final class ManualTime: TimeSource, Sendable {
    private struct Sleeper {
        let id: UInt64
        let deadline: UInt64
        let continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now: UInt64
        var sleepers: [Sleeper] = []
        var nextID: UInt64 = 0
        /// ``waitForSleeper(until:)`` callers, by the deadline they wait to see.
        var watchers: [(deadline: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state: Mutex<State>

    public init(startingAt now: UInt64) {
        state = Mutex(State(now: now))
    }

    public func nowMs() -> UInt64 { state.withLock { $0.now } }

    /// Tasks waiting in ``sleep(until:)`` now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline anyone waits for.
    public var nextDeadline: UInt64? { state.withLock { $0.sleepers.map(\.deadline).min() } }

    /// Sets the time (never backwards) and wakes the sleepers it reaches.
    public func advance(to time: UInt64) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = max(state.now, time)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    public func advance(by ms: UInt64) { advance(to: nowMs() + ms) }

    /// Returns once some task sleeps until exactly `deadline` (at once if one does already): a test's way to
    /// know the code under test has reached its wait, without polling.
    public func waitForSleeper(until deadline: UInt64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let present = state.withLock { state -> Bool in
                if state.sleepers.contains(where: { $0.deadline == deadline }) { return true }
                state.watchers.append((deadline, continuation))
                return false
            }
            if present { continuation.resume() }
        }
    }

    public func sleep(untilMs deadline: UInt64) async {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let (resumeNow, watchers) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                    if deadline <= state.now || Task.isCancelled { return (true, []) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    let watching = state.watchers.filter { $0.deadline == deadline }.map(\.continuation)
                    state.watchers.removeAll { $0.deadline == deadline }
                    return (false, watching)
                }
                for watcher in watchers { watcher.resume() }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let cancelled = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            cancelled?.continuation.resume()
        }
    }
}

extension TimeSource {
    /// Waits until `deadline` (ms) or a signal on `wake`, whichever comes first, or the task's cancellation:
    /// the one wait of an owner whose next deadline can move earlier while it sleeps.
    public func wait(untilMs deadline: UInt64, or wake: WakeSignal) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.sleep(untilMs: deadline) }
            group.addTask { await wake.wait() }
            await group.next()
            group.cancelAll()
        }
    }
}
