import BotSupport
import Synchronization
import Testing

/// ``AwaitedTasks``: blocking waits happen on a thread of their own (``OwnerThread``), as in the listener and
/// the control socket, never on the cooperative pool the awaited work needs.
@Suite("Awaited tasks: owned, cancelled past the wait, none left after stop")
struct AwaitedTasksTests {
    /// Runs a blocking `body` on a detached thread and awaits its answer.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            if !OwnerThread.detach({ continuation.resume(returning: body()) }) { continuation.resume(returning: body()) }
        }
    }

    @Test func theAnswerComesBackAndTheTaskIsGone() async {
        let tasks = AwaitedTasks()
        // The limit only matters if the answer never comes; the work needs a cooperative thread, which other
        // suites' blocking waits held for over 60 s in a full parallel run on a loaded 2-core machine.
        let answer = await Self.onThread { tasks.run(timeout: .seconds(600)) { 6 * 7 } }
        #expect(answer == 42)
        #expect(tasks.runningCount == 0)
    }

    @Test func workPastItsWaitIsCancelledAndStopAwaitsIt() async {
        let tasks = AwaitedTasks()
        let sawCancellation = Mutex(false)
        let answer = await Self.onThread {
            tasks.run(timeout: .zero) {
                await untilCancelled()
                sawCancellation.withLock { $0 = Task.isCancelled }
                return 1
            }
        }
        #expect(answer == nil, "the caller stopped waiting")
        await tasks.stop()
        #expect(sawCancellation.withLock { $0 }, "the abandoned work was cancelled")
        #expect(tasks.runningCount == 0, "nothing outlives the stop")
    }

    @Test func stopCancelsWorkAThreadStillWaitsForAndStartsNoMore() async {
        let tasks = AwaitedTasks()
        let started = AsyncStream.makeStream(of: Void.self)
        let waiting = Task {
            await Self.onThread {
                tasks.run(timeout: .seconds(600)) {
                    started.continuation.yield()
                    await untilCancelled()
                    return Task.isCancelled ? "cancelled" : "ended"
                }
            }
        }
        for await _ in started.stream { break }
        await tasks.stop()
        #expect(tasks.runningCount == 0)
        #expect(await waiting.value == "cancelled", "the waiting thread got the cancelled work's answer")
        let ran = Mutex(false)
        let late: Int? = await Self.onThread { tasks.run(timeout: .seconds(60)) { ran.withLock { $0 = true }; return 1 } }
        #expect(late == nil && !ran.withLock { $0 }, "after stop nothing starts")
    }
}
