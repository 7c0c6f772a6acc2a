import BotCrypto
import Testing

@testable import Nostr

@Suite("Verification: cheapest checks first, Schnorr behind a budget")
struct EventVerifierTests {
    static let key = try! NostrKeyDerivation.secretKey(seed: [UInt8](repeating: 9, count: 32), label: "9q8yy")

    /// A well-formed event whose id is right but whose signature belongs to another event.
    static func forged(_ i: Int, signature: SchnorrSignature) -> UnverifiedEvent {
        let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: 1_700_000_000 + Int64(i), kind: 20000,
                                     tags: [["g", "9q8yy"]], content: "spam \(i)")
        let json = #"{"id":"\#(unsigned.id.hex)","pubkey":"\#(key.publicKey.hex)","created_at":\#(unsigned.createdAt),"kind":20000,"tags":[["g","9q8yy"]],"content":"spam \#(i)","sig":"\#(signature.hex)"}"#
        return try! UnverifiedEvent(json: json)
    }

    @Test func hundredThousandBadSignaturesCostBoundedSchnorr() throws {
        let donor = try UnsignedEvent(pubkey: Self.key.publicKey, createdAt: 1, kind: 1, tags: [], content: "x")
            .signed(with: Self.key)
        var verifier = EventVerifier(configuration: .init(burst: 100, perSecond: 50))
        let start = ContinuousClock.now
        let total = 100_000
        // 100 000 forged events arriving over 10 simulated seconds.
        for i in 0..<total {
            let now = start + .microseconds(Int64(i) * 100)
            do { let r = outcome(&verifier, Self.forged(i, signature: donor.signature), now); #expect(r != nil) }
        }
        let c = verifier.counters
        // Burst 100 + 10 s × 50/s refill = at most ≈ 600 Schnorr checks for 100 000 events.
        #expect(c.schnorrChecks <= 100 + 10 * 50 + 1)
        #expect(c.schnorrChecks >= 500)
        #expect(c.badSignature == c.schnorrChecks)
        #expect(c.overBudget == total - c.schnorrChecks)
        #expect(c.verified == 0)
    }

    @Test func idMismatchCostsNoBudget() throws {
        var verifier = EventVerifier(configuration: .init(burst: 1, perSecond: 0))
        let event = try UnsignedEvent(pubkey: Self.key.publicKey, createdAt: 1, kind: 1, tags: [], content: "x")
            .signed(with: Self.key)
        let tampered = try UnverifiedEvent(json: event.json.replacing("\"x\"", with: "\"y\""))
        let now = ContinuousClock.now
        for _ in 0..<1000 { do { let r = outcome(&verifier, tampered, now); #expect(r == .idMismatch) } }
        #expect(verifier.counters.idMismatch == 1000)
        #expect(verifier.counters.schnorrChecks == 0)
        // The one budget token is still there for the genuine event.
        #expect(try verifier.verify(UnverifiedEvent(json: event.json), now: now) == event)
        do { let r = outcome(&verifier, try UnverifiedEvent(json: event.json), now); #expect(r == .overBudget) }
    }

    @Test func budgetRefillsWithInjectedTime() throws {
        var bucket = TokenBucket(capacity: 2, refillPerSecond: 1)
        let t0 = ContinuousClock.now
        do { let took = bucket.take(now: t0); #expect(took) }
        do { let took = bucket.take(now: t0); #expect(took) }
        do { let took = bucket.take(now: t0); #expect(!took) }
        do { let took = bucket.take(now: t0 + .milliseconds(999)); #expect(!took) }
        do { let took = bucket.take(now: t0 + .milliseconds(1000)); #expect(took) }
        do { let took = bucket.take(now: t0 + .seconds(100)); #expect(took) }
        do { let took = bucket.take(now: t0 + .seconds(100)); #expect(took) }
        do { let took = bucket.take(now: t0 + .seconds(100)); #expect(!took) }  // capped at capacity
    }

    @Test func missingSignatureAndInvalidKeyAreNamed() throws {
        var verifier = EventVerifier()
        let unsignedJSON = #"{"pubkey":"\#(Self.key.publicKey.hex)","created_at":1,"kind":1,"tags":[],"content":""}"#
        do { let r = outcome(&verifier, try UnverifiedEvent(json: unsignedJSON), .now); #expect(r == .missingField("id")) }
        // x = 0 is not on the curve; make the id right so the curve check is reached.
        let badKey = String(repeating: "00", count: 32)
        let canonical = CanonicalJSON.serialize(pubkeyHex: badKey, createdAt: 1, kind: 1, tags: [], content: "")
        let id = SHA256.hash(canonical).map { String(format2: $0) }.joined()
        let json = #"{"id":"\#(id)","pubkey":"\#(badKey)","created_at":1,"kind":1,"tags":[],"content":"","sig":"\#(String(repeating: "11", count: 64))"}"#
        do { let r = outcome(&verifier, try UnverifiedEvent(json: json), .now); #expect(r == .invalidPublicKey) }
    }
}

func outcome(_ verifier: inout EventVerifier, _ event: UnverifiedEvent, _ now: ContinuousClock.Instant) -> NostrError? {
    do {
        _ = try verifier.verify(event, now: now)
        return nil
    } catch {
        return error
    }
}

extension String {
    init(format2 byte: UInt8) {
        let digits = Array("0123456789abcdef")
        self = String([digits[Int(byte >> 4)], digits[Int(byte & 0xf)]])
    }
}
