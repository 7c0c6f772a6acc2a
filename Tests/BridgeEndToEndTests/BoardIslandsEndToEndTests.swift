import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// Issue 17 "Done when": a board post from island A reaches island B's phones through two bridges and the relay,
/// once; its tombstone removes it on B and deletes the Nostr copy. Bridge A copies the accepted post to Nostr
/// with the author's packet in a `bitchat-board` tag; bridge B reads the tag, verifies the inner signature and
/// broadcasts the original packet at TTL 7 (README, "Board across islands"). Phones are `tools/peers/late_phone.py`
/// (BOARD.md and MESH-WIRE alone): the author on A, a passive radio on B recording every 0x23 it hears, and a
/// late phone on B asking bridge B for the board by REQUEST_SYNC.
@Suite("Board across islands end to end (two bridges, real relay)", TestEnvironment.needsVenv, .serialized)
struct BoardIslandsEndToEndTests {
    /// Every event of `kind` on the relay whose JSON contains `needle`, one JSON line each (REQ until EOSE).
    static let events = """
        import asyncio, json, sys, websockets
        url, kind, needle = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        async def main():
            async with websockets.connect(url) as ws:
                await ws.send(json.dumps(["REQ", "q", {"kinds": [kind], "limit": 500}]))
                while True:
                    msg = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    if msg[0] == "EOSE": return
                    if msg[0] == "EVENT" and needle in json.dumps(msg[2]): print(json.dumps(msg[2]))
        asyncio.run(main())
        """

    /// The listener's lines (JSON objects), read again every 0.25 s until `done` holds or `seconds` pass.
    static func heard(_ path: String, within seconds: Double, until done: ([JSONValue]) -> Bool) async throws -> [JSONValue] {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        var lines: [JSONValue] = []
        repeat {
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            lines = text.split(separator: "\n").compactMap { try? JSONParser().parse(String($0)) }
            if done(lines) { return lines }
            try await Task.sleep(for: .milliseconds(250))
        } while ContinuousClock.now < deadline
        return lines
    }

    /// The 0x23 payloads (hex) bridge B serves a late phone on island B (REQUEST_SYNC for the board).
    static func served(_ world: World, island: Int, tag: String) async throws -> [String] {
        let replies = "\(world.directory)/replies-\(tag).txt"
        let (status, transcript) = try await SyncEndToEndTests.python(world, [
            "live-request", "--seed", "17", "--hub", String(island), "--types", "board", "--seconds", "5",
            "--out", "\(world.directory)/request-\(tag).json", "--replies", replies,
        ])
        #expect(status == 0, "\(transcript)")
        let decoder = try world.spawnPython(["-c", NoticeEndToEndTests.boardFrames, Peers.fixtures, replies], name: "board-frames-\(tag)")
        #expect(try await decoder.waitForExit() == 0, "\(decoder.transcript)")
        return decoder.stdoutLines
    }

    @Test("island A's post reaches island B's phone once (byte-identical payload, inner signature valid) via two bridges and the relay; its tombstone removes it on B and deletes the copy",
          .timeLimit(.minutes(4)))
    func postAndTombstoneCrossIslands() async throws {
        let world = World()
        try await world.startRelay()
        let islandA = try await world.startIsland()
        let islandB = try await world.startIsland()
        let httpB = LoopbackPort.free()
        _ = try await world.startBridge("boardA", island: islandA)
        _ = try await world.startBridge("boardB", island: islandB, extra: ["BRIDGE_HTTP_LISTEN": "127.0.0.1:\(httpB)"])
        let heardPath = "\(world.directory)/heard.jsonl"
        let listener = try world.spawnPython([
            SyncEndToEndTests.script, "listen", "--seed", "17", "--hub", String(islandB), "--seconds", "150", "--out", heardPath,
        ], name: "listener")
        _ = try await listener.waitForLine("listener ready") { $0.contains("\"ready\"") }

        // The author's phone on island A posts.
        let text = "water point moved to gate C"
        let postFile = "\(world.directory)/post.json"
        let (posted, postTranscript) = try await SyncEndToEndTests.python(world, [
            "live-post", "--seed", "17", "--hub", String(islandA), "--geohash", "u4pruy", "--text", text, "--out", postFile,
        ])
        try #require(posted == 0, "\(postTranscript)")
        let post = try JSONParser().parse(String(contentsOfFile: postFile, encoding: .utf8))
        let postPayload = try #require(post["payload"]?.stringValue)
        let postID = try #require(post["postID"]?.stringValue)

        // Island B's phone hears it from bridge B: the original payload, inner signature valid, TTL 7, not RSR.
        func live(_ lines: [JSONValue], _ payload: String) -> [JSONValue] {
            lines.filter { $0["payload"]?.stringValue == payload && $0["rsr"] == .bool(false) }
        }
        var lines = try await Self.heard(heardPath, within: 30) { !live($0, postPayload).isEmpty }
        let first = try #require(live(lines, postPayload).first, "island B's phone never heard the post: \(lines)")
        #expect(first["innerValid"] == .bool(true) && first["ttl"] == .integer(7), "\(first)")

        // The relay holds one kind-1 copy, carrying the packet.
        let notes = try world.spawnPython(["-c", Self.events, world.relayURL, "1", text], name: "query-notes")
        #expect(try await notes.waitForExit() == 0, "\(notes.transcript)")
        #expect(notes.stdoutLines.count == 1, "\(notes.transcript)")
        let note = try JSONParser().parse(try #require(notes.stdoutLines.first))
        let noteID = try #require(note["id"]?.stringValue)
        #expect(note["tags"]?.arrayValue?.last?.arrayValue?.first?.stringValue == "bitchat-board", "\(note)")

        // Bridge B serves it to a late phone (so its absence below means something).
        #expect(try await Self.served(world, island: islandB, tag: "before").contains(postPayload))

        // The author's tombstone on A: phone B hears it, bridge B stops serving the post, the copy gets a kind 5.
        let deleteFile = "\(world.directory)/delete.json"
        let (deleted, deleteTranscript) = try await SyncEndToEndTests.python(world, [
            "live-delete", "--seed", "17", "--hub", String(islandA), "--post", postFile, "--out", deleteFile,
        ])
        try #require(deleted == 0, "\(deleteTranscript)")
        let tombstonePayload = try #require(try JSONParser().parse(String(contentsOfFile: deleteFile, encoding: .utf8))["payload"]?.stringValue)
        lines = try await Self.heard(heardPath, within: 30) { !live($0, tombstonePayload).isEmpty }
        #expect(live(lines, tombstonePayload).count == 1, "the tombstone on island B: \(lines)")
        #expect(live(lines, tombstonePayload).first?["innerValid"] == .bool(true))
        let after = try await Self.served(world, island: islandB, tag: "after")
        #expect(!after.contains(postPayload), "bridge B still serves the deleted post: \(after)")
        #expect(after.contains(tombstonePayload), "bridge B serves the tombstone")
        let deletion = try world.spawnPython(["-c", NoticeEndToEndTests.query, world.relayURL, "5", noteID], name: "query-deletion")
        #expect(try await deletion.waitForExit() == 0, "no kind 5 for the copy \(noteID) of post \(postID): \(deletion.transcript)")

        // Bridge B counted both as carried in from Nostr and broadcast.
        let metrics = try await scrapeMetrics(port: httpB) { $0.contains("bridge_board_nostr_total{outcome=\"inbound_relayed\"} 2") }
        #expect(metrics.contains("bridge_board_nostr_total{outcome=\"inbound_relayed\"} 2"))

        // Exactly once: the post and the tombstone each arrived once outside sync replies (phones drop unsolicited RSR).
        lines = try await Self.heard(heardPath, within: 0) { _ in true }
        #expect(live(lines, postPayload).count == 1, "\(lines)")
        #expect(live(lines, tombstonePayload).count == 1, "\(lines)")
    }
}
