import Testing
import SpamFilter

/// The behaviour table of SPAM-FILTER.md §4: every rule at its boundary n and n+1, and the seed's examples.
@Suite("Spam filter rules at their boundaries")
struct RuleTableTests {
    let now = 1_750_000_000.0

    // MARK: 1. Message rate

    @Test func messageRateAllowsTheBurstAndHidesTheNext() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        var rng = SeededRandom(seed: 1)
        for _ in 0..<6 {
            #expect(policy.judge(factory.text(randomProse(length: 30, using: &rng), from: "alice", at: now), now: now).outcome == .accepted)
        }
        let seventh = policy.judge(factory.text(randomProse(length: 30, using: &rng), from: "alice", at: now), now: now)
        #expect(seventh.outcome == .hidden)
        #expect(seventh.rule == .messageRate)
        #expect(seventh.figures.messageBucket?.level == 0)
        // 10 s later one token is back; another sender is unaffected.
        #expect(policy.judge(factory.text(randomProse(length: 30, using: &rng), from: "bob", at: now), now: now).outcome == .accepted)
        #expect(policy.judge(factory.text(randomProse(length: 30, using: &rng), from: "alice", at: now + 10), now: now + 10).outcome == .accepted)
        #expect(policy.judge(factory.text(randomProse(length: 30, using: &rng), from: "alice", at: now + 10), now: now + 10).rule == .messageRate)
    }

    // MARK: 2. Character rate

    @Test func aSingleMessageOfCapacityPassesAndOneMoreCharacterIsHidden() {
        var rng = SeededRandom(seed: 2)
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        let exact = randomProse(length: 1200, using: &rng)
        #expect(TextNormalizer.normalize(exact).count == 1200)
        let verdict = policy.judge(factory.text(exact, from: "alice", at: now), now: now)
        #expect(verdict.outcome == .accepted, "\(verdict)")
        // The seed's risk example: a single 1,201-character message is hidden.
        let over = randomProse(length: 1201, using: &rng)
        let hidden = policy.judge(factory.text(over, from: "bob", at: now), now: now)
        #expect(hidden.rule == .characterRate)
        #expect(hidden.figures.characterBucket?.cost == 1201)
    }

    @Test func characterBucketIsSharedAcrossMessagesAndSpentTokensStaySpent() {
        var rng = SeededRandom(seed: 3)
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        #expect(policy.judge(factory.text(randomProse(length: 700, using: &rng), from: "a", at: now), now: now).outcome == .accepted)
        #expect(policy.judge(factory.text(randomProse(length: 500, using: &rng), from: "a", at: now), now: now).outcome == .accepted)
        let next = policy.judge(factory.text("x", from: "a", at: now), now: now)
        #expect(next.rule == .characterRate)
        // The message token of the hidden message stays spent: 3 spent so far, 3 left.
        #expect(next.figures.messageBucket?.level == 4)
        // Refill is continuous: 1200/60 s = 20 per second.
        #expect(policy.judge(factory.text(randomProse(length: 20, using: &rng), from: "a", at: now + 1), now: now + 1).outcome == .accepted)
    }

    // MARK: 3. Link rate

    @Test func twoLinksPassTheThirdIsHidden() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        #expect(policy.judge(factory.text("see example.com for the lineup", from: "a", at: now), now: now).outcome == .accepted)
        #expect(policy.judge(factory.text("map at https://maps.example.org/x", from: "a", at: now), now: now).outcome == .accepted)
        let third = policy.judge(factory.text("and www.tickets.net please", from: "a", at: now), now: now)
        #expect(third.rule == .linkRate)
        #expect(third.figures.links == 1)
        #expect(policy.judge(factory.text("two at once a.com b.com", from: "b", at: now), now: now).outcome == .accepted)
        #expect(policy.judge(factory.text("three a.com b.com c.com", from: "c", at: now), now: now).rule == .linkRate)
    }

    // MARK: 4. Repeated message

    @Test func theThirdNearCopyFromOneSenderIsHidden() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        #expect(policy.judge(factory.text("anyone selling a spare ticket", from: "a", at: now), now: now).outcome == .accepted)
        #expect(policy.judge(factory.text("anyone selling a spare ticket?", from: "a", at: now + 60), now: now + 60).outcome == .accepted)
        let third = policy.judge(factory.text("anyone selling a spare ticket!!", from: "a", at: now + 120), now: now + 120)
        #expect(third.rule == .repeatedMessage)
        #expect(third.figures.repeated?.count == 2)
        #expect((third.figures.repeated?.bestSimilarity ?? 0) >= 0.8)
        #expect(third.figures.repeated?.matchedMessageID == "m2")
        // Once the window has passed, the same text is fine again.
        let later = now + 120 + 601
        #expect(policy.judge(factory.text("anyone selling a spare ticket", from: "a", at: later), now: later).outcome == .accepted)
    }

    @Test func repeatedMessageUsesTheSimilarityThresholdInclusively() {
        let base = String(String.UnicodeScalarView((0..<20).compactMap { Unicode.Scalar(0x4E00 + $0) }))
        func substituted(_ positions: [Int]) -> String {
            var s = Array(base.unicodeScalars)
            for p in positions { s[p] = Unicode.Scalar(0x3040 + p) ?? "x" }
            return String(String.UnicodeScalarView(s))
        }
        for (positions, hidden) in [([2, 7, 12, 17], true), ([2, 7, 12, 17, 19], false)] {
            var policy = AdmissionPolicy(config: SpamFilterConfig())
            var factory = CandidateFactory()
            _ = policy.judge(factory.text(substituted(positions), from: "a", at: now), now: now)
            _ = policy.judge(factory.text(substituted(positions), from: "a", at: now + 30), now: now + 30)
            let verdict = policy.judge(factory.text(base, from: "a", at: now + 60), now: now + 60)
            #expect((verdict.rule == .repeatedMessage) == hidden, "\(positions): \(verdict)")
        }
    }

    // MARK: 5. Cross-user copy

    @Test func theFourthPersonPostingTheSameSentenceIsHidden() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        let line = "happy new year everyone"
        for (index, sender) in ["a", "b", "c"].enumerated() {
            let t = now + Double(index) * 60
            #expect(policy.judge(factory.text(line, from: sender, at: t), now: t).outcome == .accepted)
        }
        let fourth = policy.judge(factory.text(line, from: "d", at: now + 300), now: now + 300)
        #expect(fourth.rule == .crossUserCopy)
        #expect(fourth.figures.crossUser?.count == 3)
        // Outside the 10-minute window, it is fine again.
        #expect(policy.judge(factory.text(line, from: "e", at: now + 1200), now: now + 1200).outcome == .accepted)
    }

    @Test(arguments: [(15, false), (16, true)])
    func crossUserRuleStartsAtSixteenCharacters(length: Int, applies: Bool) {
        let line = String("abcdefghijklmnopqrstuvwxyz".prefix(length))
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        for sender in ["a", "b", "c"] { _ = policy.judge(factory.text(line, from: sender, at: now), now: now) }
        let verdict = policy.judge(factory.text(line, from: "d", at: now), now: now)
        #expect((verdict.rule == .crossUserCopy) == applies)
    }

    @Test func hiddenCopiesStillCountAndAFiveIdentitySwarmIsCaught() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        let spam = "FREE crypto giveaway at the main stage, DM me"
        let disguises = [
            spam, "free crypto giveaway at the main stage, dm me!", "𝐅𝐑𝐄𝐄 crypto giveaway at the main stage, DM me",
            "F\u{200B}REE crypto giveaway at the main stage DM me", "ＦＲＥＥ crypto giveaway at the main stage, DM me",
        ]
        var outcomes: [SpamVerdict.Outcome] = []
        for (index, text) in disguises.enumerated() {
            let t = now + Double(index) * 5
            outcomes.append(policy.judge(factory.text(text, from: "bot\(index)", at: t), now: t).outcome)
        }
        #expect(outcomes == [.accepted, .accepted, .accepted, .hidden, .hidden])
        // A sixth identity still meets 3+ earlier senders (the hidden copies count too).
        #expect(policy.judge(factory.text(spam, from: "bot6", at: now + 40), now: now + 40).rule == .crossUserCopy)
    }

    // MARK: 6. Repeated characters

    @Test func repeatedCharactersStartAtThirtyTwo() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        #expect(policy.judge(factory.text(String(repeating: "A", count: 31), from: "a", at: now), now: now).outcome == .accepted)
        let verdict = policy.judge(factory.text(String(repeating: "A", count: 32), from: "b", at: now), now: now)
        #expect(verdict.rule == .repeatedCharacters)
        #expect(verdict.figures.autocorrelation?.value == 1.0)
        #expect(policy.judge(factory.text(String(repeating: "buy now ", count: 6), from: "c", at: now), now: now).rule == .repeatedCharacters)
    }

    @Test func autocorrelationThresholdIsInclusive() {
        var rng = SeededRandom(seed: 9)
        var text = Array(String(repeating: "buy now ", count: 8))
        for _ in 0..<6 { text[Int(rng.next() % UInt64(text.count))] = "q" }
        let normalised = TextNormalizer.normalize(String(text))
        let exact = Autocorrelation.maximum(normalised).value
        for (threshold, fires) in [(exact, true), (exact.nextUp, false)] {
            var config = SpamFilterConfig()
            config.autocorrelationThreshold = threshold
            var policy = AdmissionPolicy(config: config)
            var factory = CandidateFactory()
            let verdict = policy.judge(factory.text(String(text), from: "a", at: now), now: now)
            #expect((verdict.rule == .repeatedCharacters) == fires, "threshold \(threshold)")
        }
    }
}
