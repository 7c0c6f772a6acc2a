public import BotSupport
import Synchronization

/// The live view's feed: the last ``Limits/keep`` activities (verdicts and crossings, as JSON) with sequence
/// numbers, and the server-sent-event streams of the browsers watching. ``publish(_:)`` is called by the
/// coordinator for each activity (from its actor: it only formats and queues, never waits on a client).
public final class ConsoleFeed: Sendable {
    public enum Limits {
        /// Activities kept for a new or reconnecting view (a minute of a heavy flood; the modlog keeps the rest).
        public static let keep = 2_000
        /// Watching streams at once (the listener caps streams too).
        public static let maxSubscribers = 8
        /// The reconnect delay an event-source client is told (ms).
        public static let retryMilliseconds = 1_000
    }

    private struct State {
        var events: [(sequence: UInt64, json: JSONValue)] = []
        var nextSequence: UInt64 = 1
        var subscribers: [UInt64: HTTPStream] = [:]
        var nextSubscriber: UInt64 = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Adds one activity and sends it to every watching stream.
    public func publish(_ activity: JSONValue) {
        let (sequence, streams) = state.withLock { s -> (UInt64, [HTTPStream]) in
            let sequence = s.nextSequence
            s.nextSequence += 1
            s.events.append((sequence, activity))
            if s.events.count > Limits.keep { s.events.removeFirst(s.events.count - Limits.keep) }
            return (sequence, Array(s.subscribers.values))
        }
        let frame = Self.frame(sequence, activity)
        for stream in streams { stream.send(frame) }
    }

    /// A new stream: the kept activities after `after` (all kept ones when nil), then each new one as it comes.
    public func subscribe(after: UInt64?) -> HTTPStream {
        let stream = HTTPStream()
        let (id, backlog, evicted) = state.withLock { s -> (UInt64, [(UInt64, JSONValue)], HTTPStream?) in
            var evicted: HTTPStream?
            if s.subscribers.count >= Limits.maxSubscribers, let oldest = s.subscribers.keys.min() {
                evicted = s.subscribers.removeValue(forKey: oldest)
            }
            let id = s.nextSubscriber
            s.nextSubscriber += 1
            s.subscribers[id] = stream
            return (id, s.events.filter { $0.sequence > (after ?? 0) }.map { ($0.sequence, $0.json) }, evicted)
        }
        evicted?.finish()
        stream.onCancel { [weak self] in self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) } }
        var first = Array("retry: \(Limits.retryMilliseconds)\n\n".utf8)
        for (sequence, json) in backlog { first += Self.frame(sequence, json) }
        stream.send(first)
        return stream
    }

    /// The kept activities, newest last, at most `limit`.
    public func recent(limit: Int) -> [(sequence: UInt64, json: JSONValue)] {
        state.withLock { Array($0.events.suffix(max(0, limit))) }
    }

    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    /// One server-sent event: `id`, `event: activity`, one `data` line of compact JSON (it holds no newline).
    static func frame(_ sequence: UInt64, _ json: JSONValue) -> [UInt8] {
        Array("id: \(sequence)\nevent: activity\ndata: \(JSONWriter.compact(json))\n\n".utf8)
    }
}
