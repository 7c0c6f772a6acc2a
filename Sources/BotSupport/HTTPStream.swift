import Synchronization

/// A response body written as it is produced (server-sent events): the producer ``send(_:)``s from any thread,
/// the HTTP listener writes what is queued on its own thread and ``cancel()``s when the client goes away.
///
/// Bounded: at most ``Limits/maxQueuedBytes`` wait; a client that reads slower than that is cut off (the
/// stream closes) rather than buffered without end — an event-source client reconnects and catches up.
public final class HTTPStream: Sendable {
    public enum Limits {
        /// Queued bytes per stream before a slow reader is cut off (a few hundred live-view events).
        public static let maxQueuedBytes = 256 << 10
    }

    private struct State {
        var queued: [UInt8] = []
        var finished = false
        var cancelled = false
        var wake: (@Sendable () -> Void)?
        var onCancel: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Queues bytes; false when the stream is closed (finished, cancelled, or cut off for falling behind).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        let (accepted, wake) = state.withLock { s -> (Bool, (@Sendable () -> Void)?) in
            guard !s.finished, !s.cancelled else { return (false, nil) }
            if s.queued.count + bytes.count > Limits.maxQueuedBytes {
                s.finished = true
                return (false, s.wake)
            }
            s.queued += bytes
            return (true, s.wake)
        }
        wake?()
        return accepted
    }

    /// Ends the stream after what is queued.
    public func finish() {
        let wake = state.withLock { s -> (@Sendable () -> Void)? in
            s.finished = true
            return s.wake
        }
        wake?()
    }

    /// The client went away (or the listener stops): nothing more is written; `onCancel` handlers run once.
    public func cancel() {
        let handlers = state.withLock { s -> [@Sendable () -> Void] in
            guard !s.cancelled else { return [] }
            s.cancelled = true
            s.queued = []
            defer { s.onCancel = [] }
            return s.onCancel
        }
        for handler in handlers { handler() }
    }

    /// Runs `handler` when the stream is cancelled (at once if it already is).
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.cancelled { return true }
            s.onCancel.append(handler)
            return false
        }
        if now { handler() }
    }

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// For the listener: called (from any thread) whenever there is something to write.
    public func setWake(_ wake: (@Sendable () -> Void)?) { state.withLock { $0.wake = wake } }

    /// For the listener: up to `max` queued bytes, and whether the stream has ended once they are written.
    public func take(max: Int) -> (bytes: [UInt8], ended: Bool) {
        state.withLock { s in
            let n = min(max, s.queued.count)
            let bytes = Array(s.queued.prefix(n))
            s.queued.removeFirst(n)
            return (bytes, (s.finished || s.cancelled) && s.queued.isEmpty)
        }
    }

    /// For the listener: whether a write is due (bytes queued, or the end to signal).
    public var hasWork: Bool { state.withLock { !$0.queued.isEmpty || $0.finished || $0.cancelled } }
}
