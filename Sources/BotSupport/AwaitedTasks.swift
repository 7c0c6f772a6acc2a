import Dispatch
import Synchronization

/// The hand-over from a thread that must block (the HTTP listener's one thread, a control connection's thread)
/// into async code (the coordinator's actor). Each piece of work is a task owned here, never a bare `Task {}`:
/// the calling thread waits for it at most its timeout, a task it stopped waiting for is cancelled, and
/// ``stop()`` cancels and awaits every task still running, so no work outlives the service that owns them.
///
/// Call ``run(timeout:_:)`` only from a thread of its own: from a task it would hold a thread of the cooperative
/// pool while the work it waits for needs one.
public final class AwaitedTasks: Sendable {
    private struct State {
        var next = 0
        var running: [Int: Task<Void, Never>] = [:]
        var stopped = false
    }

    private let state = Mutex(State())

    /// One task's answer, handed from the task to the waiting thread.
    private final class Answer<T: Sendable>: Sendable {
        let value = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
    }

    public init() {}

    /// Runs `operation` in an owned task and blocks the calling thread until it returns, or until `timeout`
    /// passes: then the task is cancelled and nil returned (its late answer is dropped). Nil at once, without
    /// starting anything, after ``stop()``.
    public func run<T: Sendable>(timeout: Duration, _ operation: @escaping @Sendable () async -> T) -> T? {
        let answer = Answer<T>()
        let started = state.withLock { state -> Task<Void, Never>? in
            guard !state.stopped else { return nil }
            let id = state.next
            state.next += 1
            // Inserted under the same lock the task takes to remove itself, so it cannot leave before it came.
            let task = Task {
                let value = await operation()
                answer.value.withLock { $0 = value }
                answer.done.signal()
                self.state.withLock { _ = $0.running.removeValue(forKey: id) }
            }
            state.running[id] = task
            return task
        }
        guard let task = started else { return nil }
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = max(0, seconds) * 1_000_000_000 + max(0, attoseconds) / 1_000_000_000
        guard answer.done.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds))) == .success else {
            task.cancel()
            return nil
        }
        return answer.value.withLock { $0 }
    }

    /// Cancels every task still running and waits until each has ended; later ``run(timeout:_:)`` calls start
    /// nothing. Part of the owning service's stop (its deadline bounds a task that ignores cancellation).
    public func stop() async {
        let tasks = state.withLock { state in
            state.stopped = true
            return Array(state.running.values)
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }

    /// Tasks started and not yet ended.
    public var runningCount: Int { state.withLock { $0.running.count } }
}
