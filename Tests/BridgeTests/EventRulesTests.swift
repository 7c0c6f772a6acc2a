import BotCrypto
import Bridge
import Nostr
import Testing
import BridgeCore

@Suite("Event rules for carried and bridged events")
struct EventRulesTests {
    let key = try! SchnorrSecretKey(bytes: [UInt8](repeating: 9, count: 32))
    let now: Int64 = 1_750_000_000

    func event(kind: Int = 20000, tags: [[String]], content: String = "hello", at: Int64? = nil) throws -> NostrEvent {
        try UnsignedEvent(pubkey: key.publicKey, createdAt: at ?? now, kind: kind, tags: tags, content: content)
            .signed(with: key, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
    }

    @Test("freshness: exactly ±900 s accepted, 901 s rejected either way")
    func freshness() throws {
        for offset: Int64 in [-900, 0, 900] {
            try EventRules.checkFreshness(try event(tags: [], at: now + offset), now: now)
        }
        #expect(throws: EventRules.Rejection.stale) { try EventRules.checkFreshness(try event(tags: [], at: now - 901), now: now) }
        #expect(throws: EventRules.Rejection.future) { try EventRules.checkFreshness(try event(tags: [], at: now + 901), now: now) }
    }

    @Test("content: 16,000 bytes accepted, 16,001 rejected; blank rejected")
    func content() throws {
        try EventRules.checkContent(try event(tags: [], content: String(repeating: "é", count: 8000)))
        #expect(throws: EventRules.Rejection.contentTooLarge) {
            try EventRules.checkContent(try event(tags: [], content: String(repeating: "a", count: 16_001)))
        }
        #expect(throws: EventRules.Rejection.emptyContent) { try EventRules.checkContent(try event(tags: [], content: " \n\t")) }
    }

    @Test("rendezvous: the first r tag must be in the ring; presence needs no content")
    func rendezvous() throws {
        let ring: Set = ["u4pruy", "u4pruz"]
        let message = try event(tags: [["r", "u4pruz"], ["n", "x"]])
        #expect(try EventRules.classifyRendezvous(message, ring: ring, now: now) == ("u4pruz", .message))
        let presence = try event(kind: 20001, tags: [["r", "u4pruy"]], content: "")
        #expect(try EventRules.classifyRendezvous(presence, ring: ring, now: now).kind == .presence)
        #expect(throws: EventRules.Rejection.scopeMismatch) {
            try EventRules.classifyRendezvous(try event(tags: [["r", "9q8yy"], ["r", "u4pruy"]]), ring: ring, now: now)
        }
        #expect(throws: EventRules.Rejection.missingScopeTag) {
            try EventRules.classifyRendezvous(try event(tags: [["r"]]), ring: ring, now: now)
        }
        #expect(throws: EventRules.Rejection.wrongKind) {
            try EventRules.classifyRendezvous(try event(kind: 1, tags: [["r", "u4pruy"]]), ring: ring, now: now)
        }
    }

    @Test("carried rendezvous: some r tag equals the carrier cell")
    func carried() throws {
        let e = try event(tags: [["n", "x"], ["r", "9q8yy"], ["r", "u4pruy"]])
        #expect(try EventRules.classifyCarriedRendezvous(e, cell: "u4pruy", now: now) == .message)
        #expect(throws: EventRules.Rejection.scopeMismatch) { try EventRules.classifyCarriedRendezvous(e, cell: "u4pruz", now: now) }
    }

    @Test("channel: kind 20000 and the first g tag is the channel")
    func channel() throws {
        try EventRules.checkChannelMessage(try event(tags: [["g", "u4pruy"], ["n", "a"]]), channel: "u4pruy", now: now)
        #expect(throws: EventRules.Rejection.scopeMismatch) {
            try EventRules.checkChannelMessage(try event(tags: [["g", "u4pru"], ["g", "u4pruy"]]), channel: "u4pruy", now: now)
        }
        #expect(throws: EventRules.Rejection.wrongKind) {
            try EventRules.checkChannelMessage(try event(kind: 20001, tags: [["g", "u4pruy"]]), channel: "u4pruy", now: now)
        }
    }

    @Test("m hint: needs 4 elements, 16 hex digits and a u64; display name uses n or anon and last 4")
    func hintAndName() throws {
        let hinted = try event(tags: [["r", "u4pruy"], ["m", "ignored", "0011223344556677", "1750000000123"]])
        #expect(EventRules.radioHint(hinted)! == ("0011223344556677", 1_750_000_000_123))
        #expect(EventRules.radioHint(try event(tags: [["m", "x", "00112233", "1"]])) == nil)
        #expect(EventRules.radioHint(try event(tags: [["m", "x", "0011223344556677", "-1"]])) == nil)
        #expect(EventRules.radioHint(try event(tags: [["m", "x", "0011223344556677"]])) == nil)
        let named = try event(tags: [["n", " stage "]])
        #expect(EventRules.displayName(named) == "stage#" + String(key.publicKey.hex.suffix(4)))
        #expect(EventRules.displayName(try event(tags: [])).hasPrefix("anon#"))
    }
}
