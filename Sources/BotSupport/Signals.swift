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
}

/// Delivers process signals as an async stream (Dispatch signal sources, as ServiceLifecycle does), so
/// long-running commands stop gracefully instead of dying mid-write.
public enum SignalWatcher {
    /// A stream of `signals`. Their default actions are disabled while the stream exists.
    public static func signals(_ signals: [ProcessSignal]) -> AsyncStream<ProcessSignal> {
        AsyncStream(bufferingPolicy: .bufferingNewest(8)) { continuation in
            let queue = DispatchQueue(label: "bitchat-bridge.signals")
            var sources: [any DispatchSourceSignal] = []
            for signal in signals {
                Glibc.signal(signal.rawValue, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signal.rawValue, queue: queue)
                source.setEventHandler { continuation.yield(signal) }
                source.resume()
                sources.append(source)
            }
            let box = SourcesBox(sources)
            continuation.onTermination = { _ in box.cancel() }
        }
    }

    /// Holds the sources alive until the stream ends.
    private final class SourcesBox: @unchecked Sendable {
        // Only touched at creation and in `cancel()`, which runs once on termination.
        private let sources: [any DispatchSourceSignal]

        init(_ sources: [any DispatchSourceSignal]) { self.sources = sources }

        func cancel() { sources.forEach { $0.cancel() } }
    }
}
