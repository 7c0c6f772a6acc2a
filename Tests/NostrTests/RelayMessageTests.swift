import BotCrypto
import BotSupport
import Testing

@testable import Nostr

@Suite("Relay messages: strict parser, limits, client messages")
struct RelayMessageTests {
    static let key = try! NostrKeyDerivation.secretKey(seed: [UInt8](repeating: 7, count: 32), label: "u4pruy")

    static func event(tags: [[String]] = [["g", "u4pruy"]], content: String = "hi") -> NostrEvent {
        try! UnsignedEvent(pubkey: key.publicKey, createdAt: 1_700_000_000, kind: 20000, tags: tags, content: content)
            .signed(with: key)
    }

    static func frame(_ event: String) -> String { #"["EVENT","geo-u4pruy","# + event + "]" }

    @Test func parsesEveryVerb() throws {
        let e = Self.event()
        guard case .event(let sub, let parsed) = try RelayMessage.parse(Self.frame(e.json)) else {
            Issue.record("not an event"); return
        }
        #expect(sub == "geo-u4pruy")
        #expect(try parsed.verified() == e)
        #expect(try RelayMessage.parse(#"["OK","abc",false,"blocked: no"]"#) == .ok(eventID: "abc", accepted: false, message: "blocked: no"))
        #expect(try RelayMessage.parse(#"["OK","",true]"#) == .ok(eventID: "", accepted: true, message: ""))
        #expect(try RelayMessage.parse(#"["EOSE","s"]"#) == .endOfStoredEvents(subscription: "s"))
        #expect(try RelayMessage.parse(#"["CLOSED","s","auth-required: x"]"#) == .closed(subscription: "s", message: "auth-required: x"))
        #expect(try RelayMessage.parse(#"["NOTICE","slow down"]"#) == .notice("slow down"))
        #expect(try RelayMessage.parse(#"["AUTH","challenge-1"]"#) == .auth(challenge: "challenge-1"))
    }

    @Test(arguments: [
        (#"["EVENT","s",{"#, "invalid_json"),
        (#"{"a":1}"#, "not_a_message_array"),
        (#"[]"#, "not_a_message_array"),
        (#"[1,2]"#, "not_a_message_array"),
        (#"["HELLO"]"#, "unknown_verb"),
        (#"["EOSE"]"#, "wrong_arity"),
        (#"["OK","x","yes",""]"#, "wrong_type"),
        (#"["NOTICE",5]"#, "wrong_type"),
        (#"["EVENT","s",[]]"#, "wrong_type"),
        (#"["EVENT","s",{"pubkey":"AB","created_at":1,"kind":1,"tags":[],"content":""}]"#, "invalid_hex"),
        (#"["EVENT","s",{"created_at":1,"kind":1,"tags":[],"content":""}]"#, "missing_field"),
        ("", "invalid_json"),
        ("[\"NOTICE\",\"\u{1}\"]", "invalid_json"),
    ])
    func malformedFramesAreNamedDrops(_ frame: String, _ name: String) {
        #expect {
            try RelayMessage.parse(frame)
        } throws: { ($0 as? NostrError)?.name == name }
    }

    static let pk = String(repeating: "ab", count: 32)
    static func eventJSON(createdAt: String = "1", kind: String = "1", tags: String = "[]", content: String = "\"\"") -> String {
        #"{"pubkey":"\#(pk)","created_at":\#(createdAt),"kind":\#(kind),"tags":\#(tags),"content":\#(content)}"#
    }

    @Test(arguments: [
        (eventJSON(createdAt: "1.5"), NostrError.wrongType(field: "created_at")),
        (eventJSON(createdAt: "\"1\""), .wrongType(field: "created_at")),
        (eventJSON(createdAt: "-1"), .outOfRange(field: "created_at")),
        (eventJSON(kind: "65536"), .outOfRange(field: "kind")),
        (eventJSON(tags: "[[1]]"), .wrongType(field: "tag element")),
        (eventJSON(tags: "[\"g\"]"), .wrongType(field: "tag")),
        (eventJSON(tags: "{}"), .wrongType(field: "tags")),
        (eventJSON(content: "null"), .wrongType(field: "content")),
    ])
    func wrongTypes(_ json: String, _ error: NostrError) {
        #expect(throws: error) { try RelayMessage.parse(Self.frame(json)) }
    }

    static func tags(count: Int) -> String { "[" + Array(repeating: #"["t","x"]"#, count: count).joined(separator: ",") + "]" }

    @Test func tagCountBoundary() throws {
        _ = try RelayMessage.parse(Self.frame(Self.eventJSON(tags: Self.tags(count: UnverifiedEvent.Limits.maxTags))))
        #expect(throws: NostrError.tooManyTags(65)) {
            try RelayMessage.parse(Self.frame(Self.eventJSON(tags: Self.tags(count: 65))))
        }
    }

    @Test func tagElementCountBoundary() throws {
        func tag(_ n: Int) -> String { "[[" + Array(repeating: "\"x\"", count: n).joined(separator: ",") + "]]" }
        _ = try RelayMessage.parse(Self.frame(Self.eventJSON(tags: tag(16))))
        #expect(throws: NostrError.tooManyTagElements(17)) { try RelayMessage.parse(Self.frame(Self.eventJSON(tags: tag(17)))) }
    }

    @Test func tagElementLengthBoundary() throws {
        func tag(_ n: Int) -> String { "[[\"" + String(repeating: "é", count: n / 2) + String(repeating: "x", count: n % 2) + "\"]]" }
        _ = try RelayMessage.parse(Self.frame(Self.eventJSON(tags: tag(1024))))
        #expect(throws: NostrError.tagElementTooLong(bytes: 1025)) {
            try RelayMessage.parse(Self.frame(Self.eventJSON(tags: tag(1025))))
        }
    }

    @Test func frameSizeBoundary() throws {
        let overhead = Self.frame(Self.eventJSON(content: "\"\"")).utf8.count
        let fits = Self.frame(Self.eventJSON(content: "\"" + String(repeating: "a", count: RelayMessage.Limits.maxFrameBytes - overhead) + "\""))
        #expect(fits.utf8.count == RelayMessage.Limits.maxFrameBytes)
        _ = try RelayMessage.parse(fits)
        let over = Self.frame(Self.eventJSON(content: "\"" + String(repeating: "a", count: RelayMessage.Limits.maxFrameBytes - overhead + 1) + "\""))
        #expect(throws: NostrError.frameTooLarge(bytes: RelayMessage.Limits.maxFrameBytes + 1)) { try RelayMessage.parse(over) }
        let megabyte = [UInt8](repeating: UInt8(ascii: "["), count: 1 << 20)
        #expect(throws: NostrError.frameTooLarge(bytes: 1 << 20)) { try RelayMessage.parse(megabyte) }
    }

    @Test func deepNestingIsRejectedNotRecursed() {
        let deep = String(repeating: "[", count: 100_000)
        #expect { try RelayMessage.parse(deep) } throws: { ($0 as? NostrError)?.name == "invalid_json" }
    }

    /// Seeded random bytes and mutations of a valid frame: parse or throw, never trap.
    @Test func randomInputNeverTraps() {
        var rng = SeededRandom(seed: 42)
        let valid = Array(Self.frame(Self.event().json).utf8)
        var outcomes = [String: Int]()
        for i in 0..<20_000 {
            var bytes: [UInt8]
            if i % 2 == 0 {
                bytes = (0..<Int(rng.next() % 300)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            } else {
                bytes = valid
                for _ in 0..<(1 + Int(rng.next() % 4)) {
                    let at = Int(rng.next() % UInt64(bytes.count))
                    switch rng.next() % 3 {
                    case 0: bytes[at] = UInt8(truncatingIfNeeded: rng.next())
                    case 1: bytes.removeSubrange(at...)
                    default: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: at)
                    }
                    if bytes.isEmpty { break }
                }
            }
            do {
                _ = try RelayMessage.parse(bytes)
                outcomes["ok", default: 0] += 1
            } catch {
                outcomes[error.name, default: 0] += 1
            }
        }
        #expect(outcomes.values.reduce(0, +) == 20_000)
        #expect(outcomes["invalid_json", default: 0] > 0)
    }

    @Test func requestAndCloseWireForms() {
        let now: Int64 = 1_700_000_000
        #expect(ClientMessage.request(subscription: "geo-u4pruy", filters: [.geohashChannel("u4pruy", now: now)]).text
            == ##"["REQ","geo-u4pruy",{"#g":["u4pruy"],"kinds":[20000,20001],"limit":200,"since":1699996400}]"##)
        let cells = ["u4pruy", "u4pruz", "u4prvp", "u4prvn", "u4prvj", "u4pruv", "u4prut", "u4pruw", "u4prux"]
        #expect(ClientMessage.request(subscription: "bridge-rendezvous", filters: [.rendezvous(cells: cells, now: now)]).text
            == ##"["REQ","bridge-rendezvous",{"#r":["u4pruy","u4pruz","u4prvp","u4prvn","u4prvj","u4pruv","u4prut","u4pruw","u4prux"],"kinds":[20000,20001],"limit":200,"since":1699999100}]"##)
        let dm = NostrFilter(kinds: [1059], tags: ["p": ["c4607abb02b2f7fb2b775f7137fde98182397684ca00c993793f574178977c66"]],
                             since: now - 86400, limit: 100)
        #expect(ClientMessage.request(subscription: "geo-dm-u4pruy", filters: [dm]).text
            == ##"["REQ","geo-dm-u4pruy",{"#p":["c4607abb02b2f7fb2b775f7137fde98182397684ca00c993793f574178977c66"],"kinds":[1059],"limit":100,"since":1699913600}]"##)
        #expect(ClientMessage.close(subscription: "geo-u4pruy").text == #"["CLOSE","geo-u4pruy"]"#)
    }

    @Test func filterMatching() {
        let e = Self.event()
        #expect(NostrFilter.geohashChannel("u4pruy", now: 1_700_000_000).matches(e))
        #expect(!NostrFilter.geohashChannel("u4pruz", now: 1_700_000_000).matches(e))
        #expect(!NostrFilter.geohashChannel("u4pruy", now: 1_700_100_000).matches(e))
    }
}

