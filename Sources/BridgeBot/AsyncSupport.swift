import BridgeApp
import BotSupport
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs async work from the synchronous command dispatcher: the body runs on the global executor while the
/// main thread waits.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws(CommandExit) -> T) throws(CommandExit) -> T {
    let result = Mutex<Result<T, CommandExit>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        do throws(CommandExit) {
            let value = try await body()
            result.withLock { $0 = .success(value) }
        } catch {
            result.withLock { $0 = .failure(error) }
        }
        done.signal()
    }
    done.wait()
    guard let outcome = result.withLock({ $0 }) else { throw .failure("internal: no result") }
    return try outcome.get()
}

/// Writes one compact JSON line to stdout immediately (stdout may be a pipe read by a test or a script).
func emitLine(_ value: JSONValue) {
    let line = Array((JSONWriter.compact(value) + "\n").utf8)
    line.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }
}
