import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// Issue 17 end to end: a late-joining phone (`tools/peers/late_phone.py`, built from BOARD.md §9 alone) asks
/// the running bridge (`bitchat-bridge run`, real relay, virtual radio) for what it missed, before and after
/// the bridge is killed with SIGKILL.
///
/// Topology: island A carries the phones that were there first; island B only the late phone, so that the
/// bridge's link to B is bound to it (BOARD.md §9.4 check 2 — on a shared hub every phone is one link).
@Suite("Gossip sync end to end (late-joining phone, real bridge process)", TestEnvironment.needsVenv, .serialized)
struct SyncEndToEndTests {
    static let script = Peers.fixtures + "/late_phone.py"

    static func python(_ world: World, _ arguments: [String], timeout: Duration = .seconds(60)) async throws -> (Int32, String) {
        let process = try ChildProcess(TestEnvironment.venvBinary("python"), [script] + arguments, name: "late-phone-\(arguments[0])")
        world.processes.append(process)
        let status = try await process.waitForExit(timeout: timeout)
        return (status, process.stdoutLines.joined(separator: "\n") + process.stderrLines.suffix(20).joined(separator: "\n"))
    }

    static func lateJoin(_ world: World, island: Int, originals: String, tag: String) async throws -> String {
        let request = "\(world.directory)/request-\(tag).json"
        let replies = "\(world.directory)/replies-\(tag).txt"
        let (status, transcript) = try await python(world, [
            "live-request", "--seed", "17", "--hub", String(island), "--types", "union", "--seconds", "6",
            "--out", request, "--replies", replies,
        ])
        #expect(status == 0, "\(transcript)")
        let (verdictStatus, verdict) = try await python(world, [
            "receive", "--request", request, "--originals", originals, "--replies", replies,
        ])
        #expect(verdictStatus == 0, "\(verdict)")
        return verdict
    }

    @Test("a late phone gets every message and board post once, byte-identical but TTL/RSR; again after kill -9",
          .timeLimit(.minutes(4)))
    func lateJoinerBeforeAndAfterKill() async throws {
        let world = World()
        try await world.startRelay()
        let islandA = try await world.startIsland()
        let islandB = try await world.startIsland()
        let mesh = "tcp://127.0.0.1:\(islandA),tcp://127.0.0.1:\(islandB)"
        let bridge = try await world.startBridge("syncbridge", island: islandA, extra: ["BRIDGE_MESH": mesh])
        let originals = "\(world.directory)/originals.jsonl"
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let (generated, transcript) = try await Self.python(world, [
            "generate", "--seed", "17", "--now", String(now), "--span", "60000", "--messages", "15", "--posts", "6",
            "--out", originals,
        ])
        try #require(generated == 0, "\(transcript)")
        let (sent, sendTranscript) = try await Self.python(world, ["live-send", "--seed", "17", "--hub", String(islandA), "--originals", originals])
        try #require(sent == 0, "\(sendTranscript)")
        let first = try await Self.lateJoin(world, island: islandB, originals: originals, tag: "first")
        #expect(first.contains("\"ok\": true") && first.contains("\"expected\": 21"), "\(first)")

        // kill -9 and restart on the same data directory: the durable stores answer the same.
        bridge.stop(signal: SIGKILL)
        _ = try await world.startBridge("syncbridge", island: islandA, extra: ["BRIDGE_MESH": mesh])
        let second = try await Self.lateJoin(world, island: islandB, originals: originals, tag: "second")
        #expect(second.contains("\"ok\": true") && second.contains("\"expected\": 21"), "\(second)")
    }
}
