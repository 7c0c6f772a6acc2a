import BitchatWire
import BotCrypto
import BotStorage
import BotSupport
import BridgeTestSupport
import Foundation
import MeshSync
import MeshSyncStorage
import Testing

/// Differential test against an independent late-joining phone (`tools/peers/late_phone.py`, written from
/// BOARD.md §8–§9 and MESH-WIRE §2/§4 alone, with its own framing, deflate, signatures, board codec and GCS):
/// its phones post first, the bridge stores what verifies (durably), the late phone's REQUEST_SYNC — its
/// GCS built by Python — is decoded by our codec, our responder answers, and the phone takes the replies as
/// iOS would: each exactly once, byte-identical but TTL and RSR, verifying under its author's key.
@Suite("Differential: a late-joining phone (Python, BOARD.md §9)", TestEnvironment.needsVenv)
struct LatePhoneDifferentialTests {
    static let script = Peers.fixtures + "/late_phone.py"
    static let now: UInt64 = 1_750_000_000_000

    static func python(_ arguments: [String]) async throws -> (Int32, String) {
        let process = try ChildProcess(TestEnvironment.venvBinary("python"), [script] + arguments, name: "late-phone \(arguments[0])")
        let status = try await process.waitForExit(timeout: .seconds(60))
        return (status, process.transcript)
    }

    /// The bridge's stores filled from the phones' originals (their senders' announces first: a message is kept only
    /// with its sender's announce), each verified first as the engine would.
    static func bridge(from originals: [String], directory: String) throws -> SQLiteSyncStore {
        let store = try SQLiteSyncStore(database: SQLiteDatabase(path: directory + "/bridge.sqlite"), now: now)
        for line in try originals.flatMap({ try String(contentsOfFile: $0, encoding: .utf8).split(separator: "\n") }) {
            let json = try JSONParser().parse(String(line))
            let packet = try MeshPacket.decode(Hex.decode(json["frame"]?.stringValue ?? ""))
            let stored = try SyncPacket(packet)
            #expect(Hex.encode(stored.id) == json["id"]?.stringValue, "packet IDs agree")
            if packet.type == .boardPost {
                #expect(store.ingest(stored, now: now).isAccepted)
            } else {
                let key = try Ed25519PublicKey(rawRepresentation: Hex.decode(json["signingKey"]?.stringValue ?? ""))
                #expect(packet.verifySignature(key).isValid, "a Python-signed message verifies here")
                #expect(store.record(stored, now: now) == .stored)
            }
        }
        return store
    }

    static func run(types: String, holds: Int?, directory: String, store: SQLiteSyncStore, originals: String) async throws -> String {
        var holdsPath = "-"
        if let holds {
            holdsPath = directory + "/holds-\(types).jsonl"
            let lines = try String(contentsOfFile: originals, encoding: .utf8).split(separator: "\n")
                .filter { types == "board" ? $0.contains("\"board\"") : $0.contains("\"message\"") }.prefix(holds)
            try (lines.joined(separator: "\n") + "\n").write(toFile: holdsPath, atomically: true, encoding: .utf8)
        }
        let requestPath = directory + "/request-\(types).json"
        let (status, transcript) = try await python([
            "request", "--seed", "17", "--now", String(now + 5_000), "--types", types, "--to", "000000000000b0b0",
            "--holds", holdsPath, "--out", requestPath,
        ])
        #expect(status == 0, "\(transcript)")
        let request = try JSONParser().parse(String(contentsOfFile: requestPath, encoding: .utf8))
        let packet = try MeshPacket.decode(Hex.decode(request["frame"]?.stringValue ?? ""))
        // Python's GCS as our codec reads it.
        let payload = try RequestSyncPayload.decode(packet.payload)
        let values = (request["values"]?.arrayValue ?? []).compactMap { $0.integerValue.map(UInt64.init) }
        #expect(GCSFilter.decode(p: Int(payload.p), m: UInt64(payload.m), data: payload.data) == values)
        #expect(Int64(payload.m) == request["m"]?.integerValue)
        #expect(payload.sinceTimestamp.map { Int64($0) } == request["since"]?.integerValue)
        let key = try Ed25519PublicKey(rawRepresentation: Hex.decode(request["signingKey"]?.stringValue ?? ""))
        var responder = SyncResponder()
        let answer = responder.answer(
            SyncRequestInput(packet: packet, linkPeers: [packet.sender], pinnedKey: key), gossip: store, board: store, now: now + 5_000)
        #expect(answer.refusal == nil)
        #expect(answer.withheld == 0)
        let repliesPath = directory + "/replies-\(types).txt"
        try (answer.frames.map { Hex.encode($0) }.joined(separator: "\n") + "\n").write(toFile: repliesPath, atomically: true, encoding: .utf8)
        let (receiveStatus, verdict) = try await python([
            "receive", "--request", requestPath, "--originals", originals, "--replies", repliesPath,
        ])
        #expect(receiveStatus == 0, "\(verdict)")
        return verdict
    }

    @Test(.timeLimit(.minutes(2)))
    func lateJoinerGetsEverythingOnceAndPartialHoldersTheRest() async throws {
        let directory = TestEnvironment.temporaryDirectory("late-phone")
        let originals = directory + "/originals.jsonl"
        let (status, transcript) = try await Self.python([
            "generate", "--seed", "17", "--now", String(Self.now), "--messages", "400", "--posts", "20", "--out", originals,
        ])
        try #require(status == 0, "\(transcript)")
        let announces = directory + "/announces.jsonl"
        let (announced, announceTranscript) = try await Self.python(["announces", "--seed", "17", "--now", String(Self.now - 1_000), "--out", announces])
        try #require(announced == 0, "\(announceTranscript)")
        // Stored, then the bridge restarts (kill -9 equivalent: the file is all that is left) before answering.
        _ = try Self.bridge(from: [announces, originals], directory: directory)
        let store = try SQLiteSyncStore(database: SQLiteDatabase(path: directory + "/bridge.sqlite"), now: Self.now + 1_000)
        #expect(store.counters.restored == 425)
        let union = try await Self.run(types: "union", holds: nil, directory: directory, store: store, originals: originals)
        #expect(union.contains("\"received\": 425"), "\(union)")
        // 380 held of 400: the filter caps at 355 with `since`; only what is missing and uncovered comes.
        let messages = try await Self.run(types: "messages", holds: 380, directory: directory, store: store, originals: originals)
        #expect(messages.contains("\"ok\": true"), "\(messages)")
        let board = try await Self.run(types: "board", holds: 10, directory: directory, store: store, originals: originals)
        #expect(board.contains("\"ok\": true"), "\(board)")
    }
}
