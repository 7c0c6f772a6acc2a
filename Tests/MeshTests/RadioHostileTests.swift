import BitchatWire
import BotCrypto
import BotSupport
import BridgeTestSupport
import Foundation
@testable import Mesh
@testable import MeshRuntime
import Testing
@testable import VirtualRadio
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP connection to a radio hub that writes frames as a hostile phone would: as fast as the
/// hub takes them (TCP backpressure), with no engine behind it.
final class RawRadioSender: @unchecked Sendable {
    private let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = Socket.address(host: "127.0.0.1", port: UInt16(port))
        let result = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            Glibc.close(fd)
            throw RadioError.system(call: "connect", errno: errno)
        }
    }

    deinit { Glibc.close(fd) }

    func send(_ frames: [[UInt8]]) {
        var bytes: [UInt8] = []
        for frame in frames { bytes += RadioFraming.encode(frame) ?? [] }
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            offset += n
        }
    }
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes (process-level tests only).
func eventually(_ timeout: Duration, _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return await condition()
}

/// A `/proc/PID/status` figure in kB (`VmRSS`, `VmHWM`).
func procStatus(_ pid: Int32, _ field: String) -> Int? {
    // /proc files report size 0, so read them to the end rather than by their size.
    guard let bytes = try? FileIO.read("/proc/\(pid)/status") else { return nil }
    let text = String(decoding: bytes, as: UTF8.self)
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        return Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
    }
    return nil
}

@Suite("Virtual radio under hostile conditions (real hub and mesh processes)", .serialized)
struct RadioHostileTests {
    static func hub(port: Int, mtu: Int = 512, name: String = "hub") async throws -> ChildProcess {
        let hub = try ChildProcess(TestEnvironment.bridgeExecutable, ["radio-hub", "--listen", "127.0.0.1:\(port)", "--mtu", "\(mtu)"], name: name)
        _ = try await hub.waitForLine("\(name) listening") { $0.contains("\"listening\"") }
        return hub
    }

    /// Island A (phones) and island B (the hostile one), each a hub, and a `mesh listen` on both: whatever
    /// the listener hears from A, B's traffic cost it only its share.
    struct Islands {
        let portA = LoopbackPort.free()
        let portB = LoopbackPort.free()
        let hubA: ChildProcess
        let hubB: ChildProcess
        let listener: ChildProcess

        init(mtuB: Int = 512, listenerOptions: [String] = []) async throws {
            hubA = try await RadioHostileTests.hub(port: portA, name: "hubA")
            hubB = try await RadioHostileTests.hub(port: portB, mtu: mtuB, name: "hubB")
            listener = try ChildProcess(TestEnvironment.bridgeExecutable, [
                "mesh", "listen", "--mesh", "tcp://127.0.0.1:\(portA)", "--mesh", "tcp://127.0.0.1:\(portB)?mtu=\(mtuB)",
                "--ephemeral", "--nickname", "bridge",
            ] + listenerOptions, name: "listener")
            _ = try await listener.waitForLine("listener ready") { $0.contains("\"ready\"") }
        }

        func stop() {
            listener.stop()
            hubA.stop()
            hubB.stop()
        }
    }

    @Test func reconnectBackoffIsExponentialJitteredAndCapped() {
        var backoff = ReconnectBackoff(baseMs: RadioClientTransport.Limits.reconnectBaseMs, maxMs: RadioClientTransport.Limits.reconnectMaxMs)
        var random = SeededRandom(seed: 1)
        var delays: [UInt64] = []
        for _ in 0..<10 { delays.append(backoff.nextDelay(random: &random)) }
        for (attempt, delay) in delays.enumerated() {
            let ceiling = min(RadioClientTransport.Limits.reconnectMaxMs, RadioClientTransport.Limits.reconnectBaseMs << UInt64(attempt))
            #expect((ceiling / 2...ceiling).contains(delay), "attempt \(attempt): \(delay) ms within [\(ceiling / 2), \(ceiling)]")
        }
        #expect(delays.suffix(4).allSatisfy { $0 >= RadioClientTransport.Limits.reconnectMaxMs / 2 }, "capped at 5 s")
        backoff.reset()
        #expect(backoff.nextDelay(random: &random) <= RadioClientTransport.Limits.reconnectBaseMs)
    }

    /// Issue 14: "the bridge stops, without logging why, when its radio-hub connection ends". A real hub is
    /// killed and started again on its port: the transport logs the loss, reports down within 5 s, keeps
    /// its event sequence open, reconnects and reports up; frames flow again; a `mesh listen` process
    /// survives the same way.
    @Test(.timeLimit(.minutes(3)))
    func aKilledHubIsReconnectedWhileTheStatusReportsItDown() async throws {
        let port = LoopbackPort.free()
        var hub = try await Self.hub(port: port)
        defer { hub.stop() }
        let mesh = "tcp://127.0.0.1:\(port)"
        let listener = try ChildProcess(TestEnvironment.bridgeExecutable, ["mesh", "listen", "--mesh", mesh, "--ephemeral", "--nickname", "listener"], name: "listener")
        defer { listener.stop() }
        _ = try await listener.waitForLine("listener ready") { $0.contains("\"ready\"") }
        let log = InMemoryLogSink()
        let transport = try RadioClientTransport.connect([.init(host: "127.0.0.1", port: UInt16(port))], logger: Logger(label: "radio", sink: log))
        let node = MeshNode(engine: MeshPeerEngine(identity: makeIdentity("node")), transport: transport,
                            wallClock: { UInt64(Date().timeIntervalSince1970 * 1000) }, seed: 4)
        let running = Task { await node.run() }
        #expect(transport.status.isUp && transport.status.detail == "1 of 1 hub connection up")

        hub.stop(signal: SIGKILL)
        let killed = ContinuousClock.now
        #expect(await eventually(.seconds(5)) { !transport.status.isUp }, "down within 5 s")
        let detected = ContinuousClock.now - killed
        #expect(transport.status.detail.contains("reconnecting"), "\(transport.status.detail)")
        #expect(await eventually(.seconds(5)) { await node.linkCount == 0 }, "the engine saw the link go down")
        try await Task.sleep(for: .milliseconds(700))
        #expect(!transport.status.isUp, "still down while the hub is away (a few refused attempts)")

        hub = try await Self.hub(port: port)
        let restarted = ContinuousClock.now
        #expect(await eventually(.seconds(15)) { transport.status.isUp && transport.status.linksUp == 1 }, "\(transport.status.detail)")
        let recovered = ContinuousClock.now - restarted
        #expect(transport.status.counters.reconnects == 1)
        #expect(await eventually(.seconds(5)) { await node.linkCount == 1 }, "the same link came up again")
        #expect(log.all.contains { $0.message == "radio hub connection lost; reconnecting" })
        #expect(log.all.contains { $0.message == "radio hub connection restored" })
        _ = try await listener.waitForLine(stderr: true, timeout: .seconds(20), "listener reconnected") { $0.contains("radio hub connection restored") }
        #expect(listener.isRunning)

        // Frames flow again, both ways: a phone's message reaches the in-process node and the listener.
        let heard = Task {
            for await action in node.actions {
                if case .publicMessage(let message) = action, message.text == "after the restart" { return true }
            }
            return false
        }
        let say = try ChildProcess(TestEnvironment.bridgeExecutable, ["mesh", "say", "--mesh", mesh, "--ephemeral", "after the restart"], name: "say")
        #expect(try await say.waitForExit() == 0)
        _ = try await listener.waitForLine("listener heard the phone") { $0.contains("after the restart") }
        transport.close()
        await running.value
        #expect(await heard.value, "the node heard the message after the restart")
        #expect(transport.status.detail == "closed")
        print("hub killed: status down after \(detected), up \(recovered) after the hub restarted")
    }

    /// Issue 14 on real processes: a `mesh listen` joins island A (three phones with a history) and island B
    /// (a flooder's 20,000 fresh identities). Afterwards all 12 messages of the established phones verify
    /// (0 of 12 before: the flood had evicted them), and no phone was reported lost.
    @Test(.timeLimit(.minutes(5)))
    func afterA20000IdentityFloodEstablishedPhonesMessagesStillCross() async throws {
        let islands = try await Islands()
        defer { islands.stop() }
        let (portA, portB, listener) = (islands.portA, islands.portB, islands.listener)

        // Phones announce on link-up only (no cadence during the test), as a phone between two announces.
        var configuration = MeshPeerEngine.Configuration()
        configuration.announceIntervalMs = 600_000
        let clock: @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970 * 1000) }
        var phones: [(node: MeshNode, transport: RadioClientTransport, task: Task<Void, Never>)] = []
        for i in 0..<3 {
            let transport = try RadioClientTransport.connect([.init(host: "127.0.0.1", port: UInt16(portA))])
            let node = MeshNode(engine: MeshPeerEngine(identity: makeIdentity("phone\(i)"), configuration: configuration),
                                transport: transport, wallClock: clock, seed: UInt64(10 + i))
            phones.append((node, transport, Task { await node.run() }))
        }
        defer { for phone in phones { phone.transport.close() } }
        for i in 0..<3 {
            _ = try await listener.waitForLine("listener knows phone\(i)") { $0.contains("\"peer\"") && $0.contains("\"nickname\":\"phone\(i)\"") }
        }
        // One message each: a history with the listener.
        for (i, phone) in phones.enumerated() { await phone.node.submit(.sendPublicMessage("hello \(i)")) }
        _ = try await listener.waitForLines(count: 3, "the phones' first messages") { $0.contains("\"message\"") && $0.contains("hello ") }

        // The flood, in batches paced by what the listener has verified (its queue drops what it cannot take).
        let sender = try RawRadioSender(port: portB)
        var random = SeededRandom(seed: 99)
        let batch = 500
        var sent = 0
        let started = ContinuousClock.now
        // Meanwhile each phone says something every 10 s, as a chatting phone between its announces: its
        // messages keep it alive in the listener's table (announces would re-add it: they prove nothing).
        var keepalives = 0
        var nextKeepalive = ContinuousClock.now + .seconds(10)
        while sent < 20_000 {
            if ContinuousClock.now >= nextKeepalive {
                for (i, phone) in phones.enumerated() { await phone.node.submit(.sendPublicMessage("still here \(i).\(keepalives)")) }
                keepalives += 1
                nextKeepalive = ContinuousClock.now + .seconds(10)
            }
            let now = clock()
            let frames = try (sent..<(sent + batch)).map { try PeerTableTests.floodAnnounce($0, at: now, random: &random) }
            sender.send(frames)
            sent += batch
            _ = await eventually(.seconds(20)) { listener.stdoutLines.count >= sent * 9 / 10 }
        }
        let floodTime = ContinuousClock.now - started
        let lines = listener.stdoutLines
        let floodPeers = lines.filter { $0.contains("\"peer\"") && $0.contains("\"nickname\":\"flood") }.count
        let evicted = lines.filter { $0.contains("\"peerLost\"") && $0.contains("\"evicted\"") }.count
        #expect(floodPeers > 2 * PeerTable.Limits.maxPeers, "the flood went well past both pools (\(floodPeers) identities verified)")
        #expect(evicted > floodPeers - PeerTable.Limits.maxPeers - 100, "every eviction reported (\(evicted))")

        for (i, phone) in phones.enumerated() {
            for j in 0..<4 { await phone.node.submit(.sendPublicMessage("after the flood \(i).\(j)")) }
        }
        _ = try? await listener.waitForLines(count: 12, timeout: .seconds(30), "12 messages after the flood") {
            $0.contains("\"message\"") && $0.contains("after the flood")
        }
        let crossed = listener.stdoutLines.filter { $0.contains("\"message\"") && $0.contains("after the flood") }.count
        #expect(crossed == 12, "\(crossed) of 12 messages of established phones verified after the flood")
        let kept = listener.stdoutLines.filter { $0.contains("\"message\"") && $0.contains("still here") }.count
        #expect(kept == 3 * keepalives, "\(kept) of \(3 * keepalives) messages during the flood verified")
        let phoneIDs = await withTaskGroup(of: String.self) { group in
            for phone in phones { group.addTask { await phone.node.identity.peerID.hex } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(!listener.stdoutLines.contains { line in line.contains("\"peerLost\"") && phoneIDs.contains { line.contains($0) } })
        print("announce flood on the radio: 20,000 sent in \(floodTime), \(floodPeers) verified by the listener, \(evicted) evictions reported; "
            + "established phones' messages during it: \(kept) of \(3 * keepalives), after it: \(crossed) of 12")
    }

    /// Issue 14's fragment bomb on real processes: 128 incomplete ≈ 1 MiB trains from strangers on island B
    /// while mesh-only phones on island A deposit fragmented events with the listener (a bridge): every
    /// deposit arrives, and the listener's peak RSS stays within 64 MiB of its idle RSS (the old
    /// reassembler went from 33 to 173 MB). Island B has a 64 KiB MTU so the 128 MiB arrive in seconds;
    /// small chunks are charged their bookkeeping in the budget (`Reassembler`'s unit tests).
    @Test(.timeLimit(.minutes(5)))
    func aFragmentBombKeepsRSSBoundedWhileFragmentedDepositsArrive() async throws {
        let islands = try await Islands(mtuB: 65_535, listenerOptions: ["--bridge-cell", "u4pruy"])
        defer { islands.stop() }
        let (portA, portB, listener, hubB) = (islands.portA, islands.portB, islands.listener, islands.hubB)
        // Idle: ready, one deposit through (the paths warmed up).
        let text = String(repeating: "a fragmented deposit from a phone without internet. ", count: 30)
        let warm = try ChildProcess(TestEnvironment.bridgeExecutable, [
            "mesh", "deposit", "--mesh", "tcp://127.0.0.1:\(portA)", "--ephemeral", "--cell", "u4pruy", "warm-up " + text,
        ], name: "warm")
        #expect(try await warm.waitForExit() == 0)
        _ = try await listener.waitForLine("the warm-up deposit") { $0.contains("\"carrier\"") && $0.contains("warm-up") }
        let idle = try #require(procStatus(listener.pid, "VmRSS"))

        let bomb = Task.detached {
            let sender = try RawRadioSender(port: portB)
            var random = SeededRandom(seed: 13)
            let chunk = (0..<60_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            for _ in 0..<128 {
                let sender_ = MeshPeerID(rawValue: random.next())
                let id = random.next()
                let now = UInt64(Date().timeIntervalSince1970 * 1000)
                // 17 × 60 000 bytes ≈ 1 MiB; the last fragment never comes.
                let frames = try (0..<16).map { index in
                    try MeshPacket(type: .fragment, ttl: 1, timestamp: now, sender: sender_,
                                   payload: FragmentPayload(fragmentID: id, index: UInt16(index), total: 17, originalType: .message, chunk: chunk).encode())
                        .encode(compression: .none)
                }
                sender.send(frames)
                // Paced near what the listener takes, so the bomb reaches its reassembler instead of the
                // hub's backlog bound (counted below from both sides).
                try await Task.sleep(for: .milliseconds(40))
            }
        }
        var deposited = 0
        for i in 0..<6 {
            let phone = try ChildProcess(TestEnvironment.bridgeExecutable, [
                "mesh", "deposit", "--mesh", "tcp://127.0.0.1:\(portA)", "--ephemeral", "--cell", "u4pruy", "deposit \(i) " + text,
            ], name: "deposit\(i)")
            if try await phone.waitForExit() == 0 { deposited += 1 }
        }
        try await bomb.value
        _ = try? await listener.waitForLines(count: 6, timeout: .seconds(30), "6 deposits") { $0.contains("\"carrier\"") && $0.contains("deposit ") }
        let carriers = (0..<6).filter { i in listener.stdoutLines.contains { $0.contains("\"carrier\"") && $0.contains("deposit \(i) a fragmented") } }.count
        let peak = try #require(procStatus(listener.pid, "VmHWM"))
        let after = try #require(procStatus(listener.pid, "VmRSS"))
        #expect(deposited == 6)
        #expect(carriers == 6, "\(carriers) of 6 fragmented deposits arrived during the bomb")
        #expect(peak - idle <= 64 * 1024, "peak RSS \(peak) kB is \(peak - idle) kB above idle \(idle) kB")
        // The bomb did reach the reassembler, past the strangers' budget.
        listener.stop()
        let stopped = try await listener.waitForLine("listener stopped") { $0.contains("\"stopped\"") }
        let counters = try #require(try JSONParser().parse(stopped)["counters"])
        let evicted = counters["fragment.evicted_bytes"]?.integerValue ?? 0
        let queueFull = counters["transport.inbound.queue_full"]?.integerValue ?? 0
        #expect(evicted > 0, "\(stopped)")
        hubB.stop()
        let hubStats = try await hubB.waitForLine("hub B stopped") { $0.contains("\"stopped\"") }
        let delivered = try JSONParser().parse(hubStats)["deliveries"]?.integerValue ?? 0
        print("fragment bomb on the radio: RSS idle \(idle / 1024) MiB, peak \(peak / 1024) MiB (+\((peak - idle) / 1024) MiB), "
            + "after \(after / 1024) MiB; deposits \(carriers) of 6; bomb frames delivered by the hub \(delivered) of 2048, "
            + "dropped at the listener's queue \(queueFull), reassembler byte-budget evictions \(evicted)")
    }
}
