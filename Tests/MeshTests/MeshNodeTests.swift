import BitchatWire
import BotSupport
@testable import Mesh
@testable import MeshRuntime
import Testing

/// Issues 15 and 22, one lifecycle: the node sleeps until its next deadline (no poll, no tick: here its announce,
/// every second without jitter), is woken early for paced transmits, keeps enqueued inputs in order, and flushes
/// paced transmits before a stop, with a deadline. Driven by ``ManualTime``; every wait is for an event (a frame
/// heard, a sleeper registered), none polls.
@Suite("Mesh node on an injected clock")
struct MeshNodeTests {
    /// A node on an in-process segment, and a raw member of the same segment that hears what it sends.
    struct Rig {
        let air = InProcessAir(mtu: 185)
        let clock = ManualTime(startingAt: start)
        let node: MeshNode
        let probe: InProcessAir.Transport
        var probeEvents: MeshInbound.AsyncIterator

        init(actionBuffer: Int = MeshNode.Limits.actionBuffer) {
            let transport = air.join()
            probe = air.join()
            probeEvents = probe.events.makeAsyncIterator()
            var configuration = MeshPeerEngine.Configuration()
            configuration.announceIntervalMs = MeshNodeTests.announceMs
            configuration.announceJitterMs = 0
            node = MeshNode(engine: MeshPeerEngine(identity: makeIdentity("node"), configuration: configuration), transport: transport,
                            clock: clock, seed: 1, actionBuffer: actionBuffer)
        }

        /// The next frame the probe heard, decoded.
        mutating func nextPacket() async throws -> MeshPacket {
            while let event = await probeEvents.next() {
                if case .frame(_, let frame) = event { return try MeshPacket.decode(frame) }
            }
            throw CancellationError()
        }

        /// Takes what the probe has heard so far (the node's announces at link-up and first tick).
        mutating func drain() async {
            while probe.events.queuedEvents > 0 { _ = await probeEvents.next() }
        }

        /// A node running on the rig, past its link-up announce and first tick (asleep until the next).
        static func running(actionBuffer: Int = MeshNode.Limits.actionBuffer) async throws -> (Rig, Task<Void, Never>) {
            var rig = Rig(actionBuffer: actionBuffer)
            let running = Task { [node = rig.node] in await node.run() }
            #expect(try await rig.nextPacket().type == .announce)
            await rig.clock.waitForSleeper(until: start + MeshNodeTests.announceMs)
            await rig.drain()
            return (rig, running)
        }

        /// Moves the clock to `deadline` once someone sleeps until it.
        func step(to deadline: UInt64) async {
            await clock.waitForSleeper(until: deadline)
            clock.advance(to: deadline)
        }
    }

    /// The engine's announce period here: its one deadline while nothing else is due.
    static let announceMs: UInt64 = 1_000

    /// 600 incompressible characters: fragments at a 185-byte MTU, paced 30 ms apart (iOS).
    static let long: String = {
        var random = SeededRandom(seed: 3)
        return String((0..<600).map { _ in Character(Unicode.Scalar(UInt8(33 + random.next() % 94))) })
    }()

    static func fragmentTotal(_ packet: MeshPacket) -> Int { Int(packet.payload[10]) << 8 | Int(packet.payload[11]) }

    @Test(.timeLimit(.minutes(2)))
    func theNodeSleepsUntilItsNextDeadlineAndIsWokenEarlyByNewWork() async throws {
        // Link-up: the engine announces at once; then, nothing due, the node sleeps until the next announce
        // (`running()` waits for exactly that sleeper: no poll, no tick).
        var (rig, running) = try await Rig.running()
        defer { running.cancel() }
        #expect(rig.clock.nextDeadline == start + Self.announceMs && rig.clock.sleeperCount == 1)
        // A long message: the first fragment leaves now, the next 30 ms later — the sleep is cut short for it.
        await rig.node.submit(.sendPublicMessage(Self.long))
        let first = try await rig.nextPacket()
        #expect(first.type == .fragment)
        await rig.clock.waitForSleeper(until: start + 30)
        #expect(rig.clock.sleeperCount == 1, "woken early and re-armed for the paced fragment, the announce's sleep gone")
        rig.clock.advance(to: start + 29)
        #expect(rig.probe.events.queuedEvents == 0, "nothing before its time")
        rig.clock.advance(to: start + 30)
        #expect(try await rig.nextPacket().payload[8..<10] == [0, 1])
        let total = Self.fragmentTotal(first)
        for index in 2..<total {
            await rig.step(to: start + UInt64(30 * index))
            #expect(try await rig.nextPacket().payload[9] == UInt8(index))
        }
        // Then back to the announce, and the next.
        await rig.step(to: start + Self.announceMs)
        await rig.clock.waitForSleeper(until: start + 2 * Self.announceMs)
        #expect(await rig.node.driverCounters.droppedTransmits == 0)
    }

    @Test(.timeLimit(.minutes(2)))
    func enqueuedInputsKeepTheirOrderAndFlushWaitsForPacedTransmits() async throws {
        var (rig, running) = try await Rig.running()
        defer { running.cancel() }
        for i in 0..<20 { #expect(rig.node.enqueue(.sendPublicMessage("m\(i)"))) }
        #expect(rig.node.enqueue(.sendPublicMessage(Self.long)))
        let flushing = Task { [node = rig.node] in await node.flush(timeoutMs: 10_000) }
        for i in 0..<20 { #expect(try await rig.nextPacket().payload == Array("m\(i)".utf8), "message \(i) in order") }
        let first = try await rig.nextPacket()
        let total = Self.fragmentTotal(first)
        for index in 1..<total {
            await rig.step(to: start + UInt64(30 * index))
            #expect(try await rig.nextPacket().type == .fragment)
        }
        #expect(await flushing.value == MeshNode.FlushReport(completed: true, abandonedTransmits: 0))
        #expect(rig.probe.events.queuedEvents == 0)
    }

    /// At the deadline, what still waits is dropped and counted (the stop must not hang on a paced train).
    @Test(.timeLimit(.minutes(2)))
    func flushAbandonsWhatIsStillWaitingAtItsDeadline() async throws {
        var rig = Rig()
        // The node is not running: flush drives the transmits itself.
        await rig.node.submit(.linkUp(InProcessAir.Transport.link, mtu: 185))
        #expect(try await rig.nextPacket().type == .announce)
        await rig.node.submit(.sendPublicMessage(Self.long))
        let first = try await rig.nextPacket()
        let flushing = Task { [node = rig.node] in await node.flush(timeoutMs: 100) }
        // Fragments due at 30, 60 and 90 ms leave; then the flush sleeps to its deadline, not to 120 ms.
        for due: UInt64 in [30, 60, 90] {
            await rig.step(to: start + due)
            #expect(try await rig.nextPacket().type == .fragment)
        }
        await rig.step(to: start + 100)
        let report = await flushing.value
        let total = Self.fragmentTotal(first)
        #expect(!report.completed && report.abandonedTransmits == total - 4)
        #expect(await rig.node.driverCounters.abandonedAtFlush == total - 4)
        #expect(rig.probe.events.queuedEvents == 0)
    }

    /// A consumer that falls behind loses actions (the buffer is bounded); when a lost one was a peer change,
    /// the node offers the whole table again (every second while there is no room), so the consumer's peer view (the bridge's
    /// `bitchat_bridge_mesh_peers`, its island's bridges) cannot stay wrong. Seen in CI: 247 actions dropped in a
    /// 20,000-identity flood left the gauge at 90 with 13 peers in the table.
    @Test(.timeLimit(.minutes(2)))
    func droppedPeerChangesAreRepairedByAResync() async throws {
        let (rig, running) = try await Rig.running(actionBuffer: 4)
        defer { running.cancel() }
        let phones = (0..<10).map { _ in Phone() }
        for (i, phone) in phones.enumerated() {
            await rig.node.submit(.frame(InProcessAir.Transport.link, try phone.announce(at: start, ttl: 1, nickname: "p\(i)")))
        }
        #expect(await rig.node.peers.count == 10)
        #expect(await rig.node.driverCounters.droppedActions == 6)
        var actions = rig.node.actions.makeAsyncIterator()
        for _ in 0..<4 {
            guard case .peerVerified = await actions.next() else { Issue.record("expected the buffered peer changes first"); return }
        }
        await rig.step(to: start + Self.announceMs)
        guard case .peersResync(let peers) = await actions.next() else { Issue.record("expected the table a second later"); return }
        #expect(Set(peers.map(\.id)) == Set(phones.map(\.id)))
        // Once through, no more: the next deadline sends nothing to repair.
        await rig.step(to: start + 2 * Self.announceMs)
        await rig.clock.waitForSleeper(until: start + 3 * Self.announceMs)
        #expect(await rig.node.driverCounters.peerResyncs == 1)
    }
}
