import BotSupport
import Console
import Synchronization
import Testing

@Suite("Live view feed and HTTP streams (bounded, cancellable)")
struct ConsoleFeedTests {
    func text(_ stream: HTTPStream) -> String { String(decoding: stream.take(max: 1 << 20).bytes, as: UTF8.self) }

    @Test func aStreamQueuesTakesEndsAndCutsOffASlowReader() {
        let stream = HTTPStream()
        let woken = Atomic<Int>(0)
        stream.setWake { woken.add(1, ordering: .relaxed) }
        #expect(stream.send(Array("ab".utf8)) && stream.send(Array("cd".utf8)))
        #expect(woken.load(ordering: .relaxed) == 2)
        let first = stream.take(max: 3)
        #expect(first.bytes == Array("abc".utf8) && !first.ended)
        #expect(stream.take(max: 10).bytes == Array("d".utf8))
        // A reader that falls behind by more than the bound is cut off, not buffered without end.
        #expect(!stream.send([UInt8](repeating: 1, count: HTTPStream.Limits.maxQueuedBytes + 1)))
        #expect(stream.take(max: 10).ended)
        #expect(!stream.send([1]))
        let cancelled = Atomic<Int>(0)
        let other = HTTPStream()
        other.onCancel { cancelled.add(1, ordering: .relaxed) }
        other.cancel()
        other.cancel()
        other.onCancel { cancelled.add(1, ordering: .relaxed) }
        #expect(cancelled.load(ordering: .relaxed) == 2 && other.isCancelled && !other.send([1]))
    }

    @Test func subscribersGetTheBacklogAfterTheirSequenceThenLiveEvents() {
        let feed = ConsoleFeed()
        for i in 1...3 { feed.publish(.object([("n", .integer(Int64(i)))])) }
        let fresh = feed.subscribe(after: nil)
        let resumed = feed.subscribe(after: 2)
        let backlog = text(fresh)
        #expect(backlog.hasPrefix("retry: 1000\n\n"))
        #expect(backlog.contains("id: 1\nevent: activity\ndata: {\"n\":1}\n\n") && backlog.contains("id: 3\n"))
        let tail = text(resumed)
        #expect(!tail.contains("id: 2\n") && tail.contains("id: 3\nevent: activity\ndata: {\"n\":3}\n\n"))
        feed.publish(.object([("n", .integer(4))]))
        #expect(text(fresh) == "id: 4\nevent: activity\ndata: {\"n\":4}\n\n")
        #expect(text(resumed).contains("id: 4\n"))
        // A closed stream leaves the feed.
        fresh.cancel()
        #expect(feed.subscriberCount == 1)
        #expect(feed.recent(limit: 2).map(\.sequence) == [3, 4])
    }

    @Test func theFeedIsBoundedInEventsAndSubscribers() {
        let feed = ConsoleFeed()
        for i in 0..<(ConsoleFeed.Limits.keep + 5) { feed.publish(.integer(Int64(i))) }
        #expect(feed.recent(limit: .max).count == ConsoleFeed.Limits.keep)
        #expect(feed.recent(limit: 1).first?.sequence == UInt64(ConsoleFeed.Limits.keep + 5))
        let first = feed.subscribe(after: .max)
        var others: [HTTPStream] = []
        for _ in 0..<ConsoleFeed.Limits.maxSubscribers { others.append(feed.subscribe(after: .max)) }
        #expect(feed.subscriberCount == ConsoleFeed.Limits.maxSubscribers)
        _ = first.take(max: 100)
        #expect(first.take(max: 100).ended, "the oldest watcher is ended to make room")
    }
}
