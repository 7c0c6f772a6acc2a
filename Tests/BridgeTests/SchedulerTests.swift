import Bridge
import Testing
import BridgeCore

@Suite("Uplink queue")
struct SchedulerTests {
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
