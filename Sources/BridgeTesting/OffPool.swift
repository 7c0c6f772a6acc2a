import BotSupport

/// Runs blocking work — a control-socket request waits for the bridge's answer, as the CLI does — on a thread of its
/// own, not on the cooperative pool: on 2 cores two such waits in parallel tests held every pool thread, and the
/// in-process bridge they waited for could not run until the request timed out (5 s).
public func offPool<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
    let result: Result<T, E> = await withCheckedContinuation { continuation in
        let work: @Sendable () -> Void = { continuation.resume(returning: Result { () throws(E) -> T in try body() }) }
        if !OwnerThread.detach(work) { work() }
    }
    return try result.get()
}
