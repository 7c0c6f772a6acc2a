#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// Severity, lowest first.
public enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case trace, debug, info, notice, warning, error

    public var name: String {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .notice: "notice"
        case .warning: "warning"
        case .error: "error"
        }
    }

    public init?(name: String) {
        guard let level = LogLevel.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = level
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Where finished log records go.
public protocol LogSink: Sendable {
    func emit(_ record: LogRecord)
}

/// One structured log line: a message for people, metadata (dotted lowercase keys) for machines.
public struct LogRecord: Sendable {
    public let unixTime: Double
    public let level: LogLevel
    public let label: String
    public let message: String
    public let metadata: [(String, JSONValue)]

    /// The JSON line written to stderr: `{"ts":…,"level":…,"logger":…,"msg":…,<metadata>}`.
    public var jsonLine: String {
        var members: [(String, JSONValue)] = [
            ("ts", .double((unixTime * 1000).rounded() / 1000)),
            ("level", .string(level.name)),
            ("logger", .string(label)),
            ("msg", .string(message)),
        ]
        members.append(contentsOf: metadata)
        return JSONWriter.compact(.object(members))
    }
}

/// A cheap value type (swift-log shape): messages and metadata are autoclosures, so a suppressed
/// line costs nothing. Secrets must never be passed here; key types print only public prefixes.
public struct Logger: Sendable {
    public let label: String
    public var level: LogLevel
    private let sink: any LogSink

    public init(label: String, level: LogLevel = .info, sink: any LogSink = StandardErrorSink()) {
        self.label = label
        self.level = level
        self.sink = sink
    }

    /// The same sink and level under another label.
    public func child(_ label: String) -> Logger {
        Logger(label: label, level: level, sink: sink)
    }

    public func log(
        _ level: LogLevel,
        _ message: @autoclosure () -> String,
        _ metadata: @autoclosure () -> [(String, JSONValue)] = []
    ) {
        guard level >= self.level else { return }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        sink.emit(
            LogRecord(
                unixTime: Double(now.tv_sec) + Double(now.tv_nsec) / 1e9,
                level: level,
                label: label,
                message: message(),
                metadata: metadata()
            )
        )
    }

    public func debug(_ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [(String, JSONValue)] = []) {
        log(.debug, message(), metadata())
    }

    public func info(_ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [(String, JSONValue)] = []) {
        log(.info, message(), metadata())
    }

    public func notice(_ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [(String, JSONValue)] = []) {
        log(.notice, message(), metadata())
    }

    public func warning(
        _ message: @autoclosure () -> String,
        _ metadata: @autoclosure () -> [(String, JSONValue)] = []
    ) {
        log(.warning, message(), metadata())
    }

    public func error(_ message: @autoclosure () -> String, _ metadata: @autoclosure () -> [(String, JSONValue)] = []) {
        log(.error, message(), metadata())
    }
}

/// Writes each record as one JSON line on stderr (one `write` call per line, so lines never interleave).
public struct StandardErrorSink: LogSink {
    public init() {}

    public func emit(_ record: LogRecord) {
        let line = Array((record.jsonLine + "\n").utf8)
        line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
    }
}

/// Keeps records in memory (tests, and the demo's live view).
public final class InMemoryLogSink: LogSink {
    private let records = Mutex<[LogRecord]>([])

    public init() {}

    public func emit(_ record: LogRecord) {
        records.withLock { $0.append(record) }
    }

    public var all: [LogRecord] { records.withLock { $0 } }
}
