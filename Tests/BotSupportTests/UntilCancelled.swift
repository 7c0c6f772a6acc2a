/// Returns only once the calling task is cancelled (the wait never elapses by itself): a service or a piece of
/// work that runs until it is told to stop, without a sleep.
func untilCancelled() async {
    let never = AsyncStream.makeStream(of: Void.self)
    await withTaskCancellationHandler {
        for await _ in never.stream {}
    } onCancel: {
        never.continuation.finish()
    }
}
