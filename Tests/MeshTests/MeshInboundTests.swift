import BotSupport
@testable import Mesh
@testable import MeshRuntime
import Testing

/// The transports' inbound path: a budget per link, round-robin delivery, drops counted by reason and link.
@Suite("Transport inbound queues (per-link budgets)")
struct MeshInboundTests {
    let flooded = MeshLinkID(1)
    let quiet = MeshLinkID(2)

    /// Issue 14: the transport's one 4,096-event buffer for all links let a flood on one segment starve the
    /// others, and dropped without a count. Now the flooded link loses its own excess, counted, and the
    /// quiet link's frames come next in turn.
    @Test func aFloodOnOneLinkCostsAnotherLinkNothingButItsTurn() async {
        let inbound = MeshInbound()
        inbound.linkUp(flooded, mtu: 512)
        inbound.linkUp(quiet, mtu: 512)
        for i in 0..<10_000 { inbound.frame(flooded, [1, UInt8(truncatingIfNeeded: i)]) }
        for i in 0..<5 { #expect(inbound.frame(quiet, [2, UInt8(i)])) }
        let counters = inbound.counters
        #expect(counters.links[flooded]?.framesIn == MeshInbound.Limits.framesPerLink)
        #expect(counters.links[flooded]?.inboundDrops[.queueFull] == 10_000 - MeshInbound.Limits.framesPerLink)
        #expect(counters.links[quiet]?.inboundDrops.total == 0 && counters.inboundDrops[.queueFull] == 10_000 - MeshInbound.Limits.framesPerLink)
        var iterator = inbound.makeAsyncIterator()
        var quietSeen: [UInt8] = []
        var taken = 0
        while quietSeen.count < 5, let event = await iterator.next() {
            taken += 1
            if case .frame(let link, let bytes) = event, link == quiet { quietSeen.append(bytes[1]) }
        }
        #expect(quietSeen == [0, 1, 2, 3, 4], "in order")
        #expect(taken <= 12, "the quiet link's 5 frames came within the first 12 events (link-ups, then turns), not after 512")
    }

    @Test func theBudgetBoundaryIsNFramesAndNBytes() {
        let inbound = MeshInbound()
        inbound.linkUp(flooded, mtu: 65_535)
        for _ in 0..<MeshInbound.Limits.framesPerLink { #expect(inbound.frame(flooded, [0])) }
        #expect(!inbound.frame(flooded, [0]), "frame n + 1 is dropped")
        let big = MeshInbound()
        big.linkUp(quiet, mtu: 65_535)
        let size = MeshInbound.Limits.bytesPerLink / 16
        for _ in 0..<16 { #expect(big.frame(quiet, [UInt8](repeating: 0, count: size))) }
        #expect(!big.frame(quiet, [0]), "one byte over the byte budget is dropped")
    }

    @Test func linkEventsAreKeptInOrderAndFramesOnUnknownLinksCounted() async {
        let inbound = MeshInbound()
        #expect(!inbound.frame(flooded, [9]))
        #expect(inbound.counters.inboundDrops[.unknownLink] == 1)
        inbound.linkUp(flooded, mtu: 185)
        inbound.frame(flooded, [1])
        inbound.linkDown(flooded)
        inbound.linkUp(flooded, mtu: 185)
        inbound.frame(flooded, [2])
        inbound.finish()
        var events: [MeshTransportEvent] = []
        for await event in inbound { events.append(event) }
        #expect(events == [.linkUp(flooded, mtu: 185), .frame(flooded, [1]), .linkDown(flooded), .linkUp(flooded, mtu: 185), .frame(flooded, [2])])
    }

    @Test(.timeLimit(.minutes(1)))
    func aWaitingConsumerIsWokenAndCancellationEndsTheSequence() async {
        let inbound = MeshInbound()
        let (progress, reached) = AsyncStream.makeStream(of: Int.self)
        let consumer = Task {
            var count = 0
            for await _ in inbound {
                count += 1
                reached.yield(count)
            }
            return count
        }
        inbound.linkUp(flooded, mtu: 512)
        inbound.frame(flooded, [1])
        // Once the consumer took both it waits for more; cancelling it then ends its loop.
        for await count in progress where count == 2 { break }
        consumer.cancel()
        #expect(await consumer.value == 2, "both events reached the waiting consumer; cancelling ended its loop")
    }
}
