import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// Issue 17 part 5 end to end: `bitchat-bridge notice` talks to the running bridge's control socket; the notice
/// reaches the mesh (a late phone's REQUEST_SYNC, `tools/peers/late_phone.py`, gets it as a 0x23 board packet,
/// BOARD.md §9) and Nostr (kind 1 with `t=urgent` and NIP-40 `expiration`, BOARD.md §11); withdrawing it puts a
/// kind 5 naming that note on the relay and empties `notice list`.
@Suite("Operator notices end to end (control socket, real bridge process)", TestEnvironment.needsVenv, .serialized)
struct NoticeEndToEndTests {
    /// Queries the relay (REQ, until EOSE) every 0.5 s for up to 20 s; prints the first event of `kind` whose
    /// JSON contains `needle`, exit 0; exit 1 if none came.
    static let query = """
        import asyncio, json, sys, time, websockets
        url, kind, needle = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        async def main():
            deadline = time.time() + 20
            while time.time() < deadline:
                async with websockets.connect(url) as ws:
                    await ws.send(json.dumps(["REQ", "q", {"kinds": [kind], "limit": 100}]))
                    while True:
                        msg = json.loads(await asyncio.wait_for(ws.recv(), 5))
                        if msg[0] == "EOSE": break
                        if msg[0] == "EVENT" and needle in json.dumps(msg[2]):
                            print(json.dumps(msg[2])); return 0
                await asyncio.sleep(0.5)
            return 1
        sys.exit(asyncio.run(main()))
        """

    /// Decodes the late phone's reply frames (its own decoder) and prints each 0x23 payload's hex.
    static let boardFrames = """
        import sys
        sys.path.insert(0, sys.argv[1])
        import late_phone
        for line in open(sys.argv[2]):
            p = late_phone.decode(bytes.fromhex(line.strip()))
            if p["type"] == 0x23: print(p["payload"].hex())
        """

    @Test("notice --urgent reaches a late phone and the relay (kind 1, t=urgent, expiration); withdraw → kind 5, list empty",
          .timeLimit(.minutes(2)))
    func postListWithdraw() async throws {
        let world = World()
        try await world.startRelay()
        let islandA = try await world.startIsland()
        let islandB = try await world.startIsland()
        let mesh = "tcp://127.0.0.1:\(islandA),tcp://127.0.0.1:\(islandB)"
        let bridge = try await world.startBridge("noticebridge", island: islandA, extra: ["BRIDGE_MESH": mesh])
        let dataDir = "\(world.directory)/noticebridge"
        var info = stat()
        #expect(lstat(dataDir + "/control.sock", &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK, "control.sock is a socket")
        #expect(info.st_mode & 0o777 == 0o600, "control.sock mode \(String(info.st_mode & 0o777, radix: 8))")
        let text = "water point moved to gate C"

        let post = try world.spawn(["notice", text, "--urgent", "--expires", "2h", "--data-dir", dataDir], name: "notice")
        #expect(try await post.waitForExit() == 0, "\(post.transcript)")
        let id = try #require(post.stdoutLines.first, "\(post.transcript)")
        #expect(id.count == 32, "\(post.transcript)")

        let list = try world.spawn(["notice", "list", "--json", "--data-dir", dataDir], name: "notice-list")
        #expect(try await list.waitForExit() == 0, "\(list.transcript)")
        let listed = list.stdoutLines.compactMap { try? JSONParser().parse($0) }
        #expect(listed.count == 1 && listed.first?["id"] == .string(id) && listed.first?["urgent"] == .bool(true), "\(list.transcript)")

        // The mesh: a late phone on island B asks for the board and gets the notice.
        let request = "\(world.directory)/request.json"
        let replies = "\(world.directory)/replies.txt"
        let phone = try world.spawnPython([
            Peers.fixtures + "/late_phone.py", "live-request", "--seed", "17", "--hub", String(islandB), "--types", "board",
            "--seconds", "6", "--out", request, "--replies", replies,
        ], name: "late-phone")
        #expect(try await phone.waitForExit(timeout: .seconds(60)) == 0, "\(phone.transcript)")
        let decoder = try world.spawnPython(["-c", Self.boardFrames, Peers.fixtures, replies], name: "board-frames")
        #expect(try await decoder.waitForExit() == 0, "\(decoder.transcript)")
        let textHex = Array(text.utf8).map { String(format: "%02x", $0) }.joined()
        #expect(decoder.stdoutLines.contains { $0.contains(id) && $0.contains(textHex) }, "\(decoder.transcript)")

        // Nostr: the kind-1 copy, urgent and expiring.
        let note = try world.spawnPython(["-c", Self.query, world.relayURL, "1", text], name: "query-note")
        #expect(try await note.waitForExit() == 0, "\(note.transcript)")
        let event = try JSONParser().parse(note.stdoutLines.joined())
        let tags = event["tags"]?.arrayValue?.compactMap { $0.arrayValue?.compactMap(\.stringValue) } ?? []
        #expect(tags.contains(["t", "urgent"]), "\(event)")
        #expect(tags.contains { $0.first == "expiration" }, "\(event)")
        let noteID = try #require(event["id"]?.stringValue)

        let withdraw = try world.spawn(["notice", "withdraw", id, "--data-dir", dataDir], name: "notice-withdraw")
        #expect(try await withdraw.waitForExit() == 0, "\(withdraw.transcript)")
        let deletion = try world.spawnPython(["-c", Self.query, world.relayURL, "5", noteID], name: "query-deletion")
        #expect(try await deletion.waitForExit() == 0, "\(deletion.transcript)")

        let after = try world.spawn(["notice", "list", "--json", "--data-dir", dataDir], name: "notice-list-after")
        #expect(try await after.waitForExit() == 0, "\(after.transcript)")
        #expect(after.stdoutLines.isEmpty, "\(after.transcript)")

        // No bridge: a clear error and exit 1; a usage error: 64.
        let none = try world.spawn(["notice", "list", "--data-dir", "\(world.directory)/nobridge"], name: "notice-none")
        #expect(try await none.waitForExit() == 1, "\(none.transcript)")
        #expect(none.stderrLines.contains { $0.contains("no bridge is running") }, "\(none.transcript)")
        let usage = try world.spawn(["notice", "--expires", "soon", "x", "--data-dir", dataDir], name: "notice-usage")
        #expect(try await usage.waitForExit() == 64, "\(usage.transcript)")

        // A requested stop removes the socket.
        bridge.stop(signal: SIGTERM)
        #expect(try await bridge.waitForExit() == 0, "\(bridge.transcript)")
        #expect(lstat(dataDir + "/control.sock", &info) != 0, "control.sock removed at stop")

        // Something else at the path: the bridge logs an error, runs on, and leaves the file alone.
        let blockedDir = "\(world.directory)/blocked"
        try FileManager.default.createDirectory(atPath: blockedDir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Data("not a socket".utf8).write(to: URL(fileURLWithPath: blockedDir + "/control.sock"))
        let blocked = try await world.startBridge("blocked", island: islandA, extra: ["BRIDGE_MESH": mesh])
        _ = try await blocked.waitForLine(stderr: true, timeout: .seconds(20), "the refusal logged") { $0.contains("control socket not started") }
        #expect(lstat(blockedDir + "/control.sock", &info) == 0 && info.st_mode & S_IFMT == S_IFREG, "the file is left alone")
        let refused = try world.spawn(["notice", "list", "--data-dir", blockedDir], name: "notice-blocked")
        #expect(try await refused.waitForExit() == 1, "\(refused.transcript)")
    }
}
