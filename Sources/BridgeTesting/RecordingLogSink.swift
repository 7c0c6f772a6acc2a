public import BotSupport

/// A log sink that records every line, for waits and assertions on a bridge's log.
public final class RecordingLogSink: LogSink, Sendable {
    public let lines = Recorder<LogRecord>()

    public init() {}

    public func emit(_ record: LogRecord) { lines.append(record) }
}
