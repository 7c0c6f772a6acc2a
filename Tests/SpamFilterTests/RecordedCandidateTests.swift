import Testing
import SpamFilter

@Suite("Recorded stream lines (spam check --jsonl)")
struct RecordedCandidateTests {
    @Test func decodesEveryField() throws {
        let line = #"{"id":"e1","sender":"ab","created_at":1750000000.5,"received_at":1750000002,"text":"hi","direction":"mesh-to-nostr","channel":"x"}"#
        let recorded = try RecordedCandidate(line: line)
        #expect(recorded.candidate == SpamCandidate(senderKey: "ab", messageID: "e1", timestamp: 1_750_000_000.5, content: .text("hi"), direction: .meshToNostr))
        #expect(recorded.receivedAt == 1_750_000_002)
        let defaults = try RecordedCandidate(line: #"{"id":"e2","sender":"ab","created_at":5}"#)
        #expect(defaults.receivedAt == 5 && defaults.candidate.content == .attachment && defaults.candidate.direction == .nostrToMesh)
        let media = try RecordedCandidate(line: #"{"id":"e3","sender":"ab","created_at":5,"text":"[image] a.jpg","attachment":true}"#)
        #expect(media.candidate.content == .attachment)
    }

    @Test(arguments: [
        (#"{"sender":"a","created_at":1}"#, RecordedCandidate.DecodeError.missing(field: "id")),
        (#"{"id":"","sender":"a","created_at":1}"#, .invalid(field: "id", reason: "is empty")),
        (#"{"id":"x","created_at":1}"#, .missing(field: "sender")),
        (#"{"id":"x","sender":"a"}"#, .missing(field: "created_at")),
        (#"{"id":"x","sender":"a","created_at":"1"}"#, .wrongType(field: "created_at", expected: "a number")),
        (#"{"id":"x","sender":"a","created_at":1,"text":5}"#, .wrongType(field: "text", expected: "a string")),
        (#"{"id":"x","sender":"a","created_at":1,"attachment":"yes"}"#, .wrongType(field: "attachment", expected: "true or false")),
        (#"{"id":"x","sender":"a","created_at":1,"direction":"up"}"#, .invalid(field: "direction", reason: "must be nostr-to-mesh or mesh-to-nostr")),
        (#"[1]"#, .notAnObject),
    ])
    func rejectsWithANamedReason(line: String, error: RecordedCandidate.DecodeError) {
        #expect(throws: error) { try RecordedCandidate(line: line) }
    }

    @Test func neverTrapsOnRandomBytes() {
        var rng = SeededRandom(seed: 99)
        let alphabet = Array(#"{}[]":,0123456789.eE-+ abcdefghijklmnopqrstuvwxyz\"#.unicodeScalars)
        for _ in 0..<2000 {
            var s = String.UnicodeScalarView()
            for _ in 0..<Int(rng.next() % 60) { s.append(alphabet[Int(rng.next() % UInt64(alphabet.count))]) }
            _ = try? RecordedCandidate(line: String(s))
        }
    }
}

/// The bridge owns the filter as a plain stored property of one actor.
actor FilterOwner {
    private var policy = AdmissionPolicy(config: SpamFilterConfig(), exemptSenders: ["me"])
    func judge(_ candidate: SpamCandidate, now: Double) -> SpamVerdict { policy.judge(candidate, now: now) }
    func wasHidden(_ id: String) -> Bool { policy.wasHidden(id) }
}

@Suite("Spam filter owned by an actor")
struct ActorOwnershipTests {
    @Test func judgesThroughAnActor() async {
        let owner = FilterOwner()
        var hidden = 0
        for i in 0..<8 {
            let c = SpamCandidate(senderKey: "a", messageID: "\(i)", timestamp: 100, content: .attachment, direction: .meshToNostr)
            if await owner.judge(c, now: 100).isHidden { hidden += 1 }
        }
        #expect(hidden == 2)
        #expect(await owner.wasHidden("7"))
    }
}
