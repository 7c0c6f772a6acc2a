import Bridge
import Testing

@Suite("Downlink pacing and uplink queue")
struct SchedulerTests {
    @Test("items are held 0.2–1.5 s, then sent oldest first")
    func hold() {
        var scheduler = DownlinkScheduler<Int, String>(perMinute: 30, maxPending: 30)
        scheduler.enqueue(id: 1, item: "a", now: 0, unitRandom: 0)  // ready at 0.2
        scheduler.enqueue(id: 2, item: "b", now: 0, unitRandom: 1)  // ready at 1.5
        #expect(scheduler.due(now: 0.19) { _, _ in true }.isEmpty)
        #expect(scheduler.due(now: 0.2) { _, _ in true }.map(\.item) == ["a"])
        #expect(scheduler.nextWake(now: 0.2) == 1.5)
        #expect(scheduler.due(now: 1.49) { _, _ in true }.isEmpty)
        #expect(scheduler.due(now: 1.5) { _, _ in true }.map(\.item) == ["b"])
        #expect(scheduler.nextWake(now: 2) == nil)
    }

    @Test("budget: 30 per minute go out, the 31st waits for the window; re-check discards")
    func budget() {
        var scheduler = DownlinkScheduler<Int, Int>(perMinute: 30, maxPending: 30)
        for i in 0..<30 { scheduler.enqueue(id: i, item: i, now: 0, unitRandom: 0) }
        #expect(scheduler.due(now: 1) { _, _ in true }.count == 30)
        scheduler.enqueue(id: 30, item: 30, now: 1, unitRandom: 0)
        scheduler.enqueue(id: 31, item: 31, now: 1, unitRandom: 0)
        #expect(scheduler.due(now: 2) { _, _ in true }.isEmpty)
        #expect(scheduler.nextWake(now: 2) == 3)
        // At t = 61 the first 30 left the window; item 31 is no longer wanted.
        let sent = scheduler.due(now: 61) { id, _ in id != 31 }
        #expect(sent.map(\.item) == [30])
        #expect(scheduler.discardedOnRecheck == 1 && scheduler.pendingCount == 0)
    }

    @Test("queue bound: the 31st pending item drops the oldest, counted; duplicates ignored")
    func bound() {
        var scheduler = DownlinkScheduler<Int, Int>(perMinute: 30, maxPending: 30)
        for i in 0..<30 { #expect(scheduler.enqueue(id: i, item: i, now: 0, unitRandom: 0.5) == nil) }
        #expect(scheduler.enqueue(id: 5, item: 5, now: 0, unitRandom: 0.5) == nil)
        #expect(scheduler.enqueue(id: 30, item: 30, now: 0, unitRandom: 0.5) == 0)
        #expect(scheduler.droppedForQueueBound == 1 && scheduler.pendingCount == 30)
        #expect(!scheduler.isPending(0) && scheduler.isPending(30))
    }

    @Test("uplink queue: 5 per depositor, 20 in total, oldest dropped first")
    func uplink() {
        var queue = UplinkQueue<String, Int>(maxTotal: 20, maxPerDepositor: 5)
        for i in 0..<5 { #expect(queue.enqueue(i, from: "a").isEmpty) }
        #expect(queue.enqueue(5, from: "a") == [0])
        for i in 0..<15 { #expect(queue.enqueue(100 + i, from: "d\(i % 5)").isEmpty) }
        #expect(queue.count == 20)
        #expect(queue.enqueue(200, from: "new") == [1])
        #expect(queue.dropped == 2)
        let drained = queue.drain()
        #expect(drained.count == 20 && drained.first == 2 && drained.last == 200)
        #expect(queue.count == 0)
    }
}
