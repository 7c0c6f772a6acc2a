import Dispatch

#if canImport(Glibc)
import Glibc
#endif

/// The process signals the bridge reacts to.
public enum ProcessSignal: Int32, Sendable, CaseIterable {
    case interrupt = 2  // SIGINT
    case hangup = 1  // SIGHUP
    case terminate = 15  // SIGTERM

    public var name: String {
        switch self {
        case .interrupt: "SIGINT"
        case .hangup: "SIGHUP"
        case .terminate: "SIGTERM"
        }
    }

    /// SIGINT and SIGTERM: the signals that ask a long-running command to stop gracefully.
    public static let termination: [ProcessSignal] = [.interrupt, .terminate]
}

/// Process signals without work in a signal handler: Dispatch signal sources (as ServiceLifecycle does)
/// call back on a queue, so long-running commands stop gracefully instead of dying mid-write. The
/// signals' default actions are disabled while a handler exists.
public final class SignalHandler: Sendable {
    // Immutable after init; cancelling a source is thread-safe.
    nonisolated(unsafe) private let sources: [any DispatchSourceSignal]

    /// Calls `handler` on a background queue for every delivery of one of `signals`.
    public init(_ signals: [ProcessSignal], handler: @escaping @Sendable (ProcessSignal) -> Void) {
        let queue = DispatchQueue(label: "bitchat-bridge.signals")
        sources = signals.map { signal in
            Glibc.signal(signal.rawValue, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signal.rawValue, queue: queue)
            source.setEventHandler { handler(signal) }
            source.resume()
            return source
        }
    }

    /// Stops delivering (the signals stay ignored, so a late signal cannot kill a process that is tidying up).
    public func cancel() { sources.forEach { $0.cancel() } }

    deinit { cancel() }

    /// The same signals as an async stream, for loops that `for await` them.
    public static func stream(_ signals: [ProcessSignal]) -> AsyncStream<ProcessSignal> {
        AsyncStream(bufferingPolicy: .bufferingNewest(8)) { continuation in
            let handler = SignalHandler(signals) { continuation.yield($0) }
            continuation.onTermination = { _ in handler.cancel() }
        }
    }
}
