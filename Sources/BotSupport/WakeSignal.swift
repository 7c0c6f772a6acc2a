import Synchronization

/// A wake-up for one sleeper at a time: ``wait()`` returns at the next ``signal()`` — or at once when a signal
/// came while nobody waited (one is kept) — or when the waiting task is cancelled.
///
/// Why not an `AsyncStream<Void>` awaited beside a timer in a task group: cancelling the child that iterates
/// the stream (when the timer wins) terminates the stream for good, so every later wait returned at once and
/// the bridge coordinator's tick loop spun at 100 % of a core from the first timer-ended sleep on. Here a
/// cancelled wait leaves the signal as it was.
public final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    public init() {}

    /// Wakes the waiter, or — nobody waiting — the next ``wait()``.
    public func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at the next signal (or a kept one), or when the task is cancelled. One waiter at a time.
    public func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.pending {
                        state.pending = false
                        return true
                    }
                    if Task.isCancelled { return true }
                    precondition(state.waiter == nil, "WakeSignal has one waiter at a time")
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    /// Waits for a signal or `duration`, whichever comes first.
    public func wait(atMost duration: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: duration) }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }
}
