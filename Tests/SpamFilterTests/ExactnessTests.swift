import BotSupport
import Testing
import SpamFilter

/// The boundaries that floating-point buckets and a loose normaliser got wrong (issue 15, defect 4).
@Suite("Spam filter exactness: bucket boundaries, §3 controls, scan caps")
struct ExactnessTests {
    let base = 1_750_000_000.0

    /// One sender's distinct short lines (never near-copies, no links) at the given offsets from `base`,
    /// each judged at its own timestamp; returns the verdicts.
    func judgeLines(at offsets: [Double], suffix: String = "", config: SpamFilterConfig = SpamFilterConfig()) -> [SpamVerdict] {
        var policy = AdmissionPolicy(config: config)
        var factory = CandidateFactory()
        var rng = SeededRandom(seed: 15)
        return offsets.map { offset in
            let t = base + offset
            return policy.judge(factory.text(randomProse(length: 24, using: &rng) + suffix, from: "alice", at: t), now: t)
        }
    }

    /// Refills of 1 token / 10 s over whole seconds: 6 − 2 + 0.1 − 1 + 0.5 − 1 + 1.3 − 2 + 0.1 = 1 token at
    /// t = 20 for the 8th message (exactly; in `Double` the sum was 0.9999999999999996 and it was hidden).
    @Test func wholeSecondMessageRefillsLandExactly() {
        let verdicts = judgeLines(at: [0, 0, 1, 6, 19, 19, 20, 20, 20])
        #expect(verdicts.prefix(8).map(\.outcome) == Array(repeating: .accepted, count: 8))
        #expect(verdicts[7].figures.messageBucket?.level == 1)
        #expect(verdicts[7].figures.messageBucket?.cost == 1)
        // The bucket is then exactly empty: the 9th at the same second is hidden with level 0.
        #expect(verdicts[8].rule == .messageRate)
        #expect(verdicts[8].figures.messageBucket?.level == 0)
    }

    /// Links refill 2 / 60 s: 2 − 1 + 2/3 − 1 + 0.7 − 1 + 37/30 − 1 + 0.4 = 1 link token at t = 91.
    @Test func wholeSecondLinkRefillsLandExactly() {
        let verdicts = judgeLines(at: [1, 21, 42, 79, 91, 91], suffix: " see example.com")
        #expect(verdicts.prefix(5).map(\.outcome) == Array(repeating: .accepted, count: 5))
        #expect(verdicts[4].figures.linkBucket?.level == 1)
        #expect(verdicts[4].figures.linkBucket?.cost == 1)
        #expect(verdicts[5].rule == .linkRate)
        #expect(verdicts[5].figures.linkBucket?.level == 0)
    }

    /// Mesh timestamps are milliseconds (`Double(ms) / 1000` in the router): 6 − 1 + 0.05 − 1 + 0.1 − 1 + 0.1 − 1
    /// + 0.25 − 1 + 0.25 − 1 + 0.25 = 1 token for the 7th message at 10.000 s.
    @Test func millisecondRefillsLandExactly() {
        let offsets = [0, 500, 1500, 2500, 5000, 7500, 10_000].map { (base * 1000 + Double($0)) / 1000 - base }
        let verdicts = judgeLines(at: offsets)
        #expect(verdicts.map(\.outcome) == Array(repeating: .accepted, count: 7))
        #expect(verdicts[6].figures.messageBucket?.level == 1)
    }

    /// A level just below the cost is never shown as the cost: figures are rounded down, so "has" is
    /// below "needs" exactly when the bucket hid the message.
    @Test func figuresNeverRoundALevelUpToTheCost() {
        var config = SpamFilterConfig()
        config.messageBucket = .init(capacity: 1, refillTokens: 1, refillSeconds: 30)
        let verdicts = judgeLines(at: [0, 29.999], config: config)
        #expect(verdicts[1].rule == .messageRate)
        let json = verdicts[1].figures.jsonValue
        #expect(json["message_bucket"]?["level"]?.numberValue == 0.999)
        #expect(verdicts[1].figures.summary(for: .messageRate) == "needs 1, has 0.999 of 1")
    }

    // MARK: §3: every control character but newline and tab is dropped

    @Test(arguments: [
        ("fr\u{0D}ee to\u{0D}kens", "free tokens"), ("a\u{0B}b", "ab"), ("a\u{0C}b", "ab"), ("a\u{85}b", "ab"),
        ("a\u{0D}\u{0A}b", "a b"), ("a\u{0A}\u{0D}b", "a b"), ("a\u{09}\u{0D}b", "a b"), ("\u{0D}a\u{0D}", "a"),
        ("a\u{1C}\u{1F}b", "ab"), ("a\u{2028}b\u{2029}c\u{A0}d", "a b c d"), ("é\u{0D}e", "ee"), ("é\u{85}\u{0A}e", "e e"),
    ])
    func controlsOtherThanNewlineAndTabAreDropped(input: String, expected: String) {
        #expect(TextNormalizer.string(TextNormalizer.normalize(input)) == expected)
    }

    /// A copy with carriage returns between its letters is the same text (it escaped as a spaced-out one).
    @Test func aCopyWithCarriageReturnsIsARepeat() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        let line = "free tokens at the main stage"
        _ = policy.judge(factory.text(line, from: "a", at: base), now: base)
        _ = policy.judge(factory.text(line, from: "a", at: base + 20), now: base + 20)
        let disguised = line.split(separator: " ").map { $0.map(String.init).joined(separator: "\r") }.joined(separator: " ")
        let verdict = policy.judge(factory.text(disguised, from: "a", at: base + 40), now: base + 40)
        #expect(verdict.rule == .repeatedMessage, "\(verdict)")
    }

    // MARK: The cross-user scan cannot be used up by one extra identity

    /// The original and two copies, then 8 look-alikes from one identity (rotations of the line: their two
    /// fullest diagonals cover it, so the bound lets an alignment run, but a monotone alignment keeps only
    /// one half), then swarm copies from new identities: each must meet the 3 earlier senders.
    @Test func eightLookAlikesFromOneIdentityDoNotLetTheSwarmThrough() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        let line = Array("free crypto giveaway at the main stage, dm me now")
        for (index, sender) in ["a", "b", "c"].enumerated() {
            let t = base + Double(index)
            #expect(policy.judge(factory.text(String(line), from: sender, at: t), now: t).outcome == .accepted)
        }
        for k in 0..<8 {
            let cut = 14 + 3 * k
            let rotation = String(line[cut...] + line[..<cut])
            let t = base + 10
            #expect(Similarity.upperBound(scalars(rotation), scalars(String(line))) >= 0.8)
            #expect(Similarity.similarity(scalars(rotation), scalars(String(line))) < 0.8)
            _ = policy.judge(factory.text(rotation, from: "crafter", at: t), now: t)
        }
        for (index, sender) in ["d", "e", "f"].enumerated() {
            let t = base + 20 + Double(index)
            let verdict = policy.judge(factory.text(String(line), from: sender, at: t), now: t)
            #expect(verdict.rule == .crossUserCopy, "\(sender): \(verdict)")
            #expect(verdict.figures.crossUser?.capped == false)
        }
    }
}
