import Testing
import BotSupport
import SpamFilter

@Suite("Spam filter behaviour: cache, attachments, backfill, modes, eviction, config")
struct PolicyBehaviourTests {
    let now = 1_750_000_000.0

    @Test func aMessageIsJudgedOnceAndReDeliveriesSpendNothing() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        let candidate = SpamCandidate(senderKey: "a", messageID: "e1", timestamp: now, content: .text("hello there"), direction: .nostrToMesh)
        #expect(policy.judge(candidate, now: now).fromCache == false)
        for _ in 0..<20 {
            let again = policy.judge(candidate, now: now)
            #expect(again.fromCache && again.outcome == .accepted)
        }
        // 1 of 6 message tokens spent, so 5 more distinct messages pass.
        var factory = CandidateFactory()
        var rng = SeededRandom(seed: 5)
        for _ in 0..<5 {
            #expect(policy.judge(factory.text(randomProse(length: 20, using: &rng), from: "a", at: now), now: now).outcome == .accepted)
        }
        let hidden = factory.text(randomProse(length: 20, using: &rng), from: "a", at: now)
        #expect(policy.judge(hidden, now: now).isHidden)
        #expect(policy.wasHidden(hidden.messageID))
        #expect(!policy.wasHidden("e1"))
        #expect(!policy.wasHidden("never-seen"))
        #expect(policy.currentStats.judged == 7)
    }

    @Test func attachmentsSpendOnlyAMessageToken() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        for _ in 0..<6 {
            let verdict = policy.judge(factory.attachment(from: "mesh1", at: now), now: now)
            #expect(verdict.outcome == .accepted)
            #expect(verdict.figures.characterBucket == nil)
        }
        // An attachment flood still hits the message rate.
        #expect(policy.judge(factory.attachment(from: "mesh1", at: now), now: now).rule == .messageRate)
        // Filenames are not judged: 10 attachments over 100 s from one sender pass, though identical rows
        // as text would be repeats.
        var other = AdmissionPolicy(config: SpamFilterConfig())
        for i in 0..<10 { #expect(other.judge(factory.attachment(from: "mesh2", at: now + Double(i) * 10), now: now + Double(i) * 10).outcome == .accepted) }
        // The same "[image] x.jpg" line from a Nostr sender stays text (third copy is a repeat).
        var third: SpamVerdict?
        for i in 0..<3 { third = other.judge(factory.text("[image] photo_1234.jpg", from: "npub", at: now + Double(i)), now: now + 2) }
        #expect(third?.rule == .repeatedMessage)
    }

    @Test func backfillOverTheLastHourIsAcceptedButTheSameStampedNowIsLimitedToTheBurst() {
        var rng = SeededRandom(seed: 11)
        let texts = (0..<50).map { _ in randomProse(length: 40, using: &rng) }
        var spread = AdmissionPolicy(config: SpamFilterConfig())
        var stampedNow = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        var spreadAccepted = 0
        var nowAccepted = 0
        // Arriving at once (same "now"), newest first as relays often send them.
        for (index, text) in texts.enumerated() {
            let stamp = now - Double(index) * 72
            if spread.judge(factory.text(text, from: "alice", at: stamp), now: now).outcome == .accepted { spreadAccepted += 1 }
            if stampedNow.judge(factory.text(text, from: "alice", at: now), now: now).outcome == .accepted { nowAccepted += 1 }
        }
        #expect(spreadAccepted == 50)
        #expect(nowAccepted == 6)
    }

    @Test func timestampsAreClampedToTheLastHour() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        var rng = SeededRandom(seed: 12)
        // Stamped a day ago and far in the future: all clamp to the window's edges, so the burst applies.
        var accepted = 0
        for i in 0..<14 {
            let stamp = i % 2 == 0 ? now - 86_400 : now + 86_400
            let verdict = policy.judge(factory.text(randomProse(length: 30, using: &rng), from: "a", at: stamp), now: now)
            #expect(verdict.figures.clampedTimestamp == (i % 2 == 0 ? now - 3600 : now))
            if verdict.outcome == .accepted { accepted += 1 }
        }
        #expect(accepted == 6 + 6)  // 7 at each of two instants an hour apart: a full burst at each.
    }

    @Test func ownEchoesAreNeverJudged() {
        var policy = AdmissionPolicy(config: SpamFilterConfig(), exemptSenders: ["bridge"])
        var factory = CandidateFactory()
        for _ in 0..<50 {
            #expect(policy.judge(factory.text("bridge status: relays 3/3", from: "bridge", at: now), now: now).outcome == .exempt)
        }
        #expect(policy.currentStats.judged == 0)
        #expect(policy.currentStats.storedTexts == 0)
    }

    @Test func shadowModeLogsButHidesNothing() {
        var config = SpamFilterConfig()
        config.shadowMode = true
        var policy = AdmissionPolicy(config: config)
        var factory = CandidateFactory()
        var rng = SeededRandom(seed: 13)
        var outcomes: [SpamVerdict.Outcome] = []
        for _ in 0..<7 { outcomes.append(policy.judge(factory.text(randomProse(length: 30, using: &rng), from: "a", at: now), now: now).outcome) }
        #expect(outcomes.last == .wouldHide)
        #expect(outcomes.filter { $0 == .accepted }.count == 6)
        #expect(!policy.wasHidden("m7"))
        #expect(policy.cachedVerdict("m7")?.isLogged == true)
    }

    @Test func togglingRefillsEveryBudgetAndOffJudgesNothing() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        var rng = SeededRandom(seed: 14)
        for _ in 0..<7 { _ = policy.judge(factory.text(randomProse(length: 30, using: &rng), from: "a", at: now), now: now) }
        #expect(policy.judge(factory.text(randomProse(length: 30, using: &rng), from: "a", at: now), now: now).rule == .messageRate)
        policy.setEnabled(false)
        for _ in 0..<20 {
            #expect(policy.judge(factory.text("same same same", from: "a", at: now), now: now).outcome == .disabled)
        }
        policy.setEnabled(true)
        #expect(policy.judge(factory.text(randomProse(length: 30, using: &rng), from: "a", at: now), now: now).outcome == .accepted)
    }

    @Test func wipeForgetsTextsSendersAndVerdicts() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var factory = CandidateFactory()
        let line = "happy new year everyone"
        for sender in ["a", "b", "c"] { _ = policy.judge(factory.text(line, from: sender, at: now), now: now) }
        let fourth = factory.text(line, from: "d", at: now)
        #expect(policy.judge(fourth, now: now).isHidden)
        policy.wipe()
        #expect(policy.currentStats.storedTexts == 0 && policy.currentStats.trackedSenders == 0)
        #expect(!policy.wasHidden(fourth.messageID))
        #expect(policy.judge(fourth, now: now).outcome == .accepted)
    }

    @Test func sendersAreEvictedLeastRecentlyActiveFirstDownToThreeQuarters() {
        var config = SpamFilterConfig()
        config.maxTrackedSenders = 8
        var policy = AdmissionPolicy(config: config)
        var factory = CandidateFactory()
        var rng = SeededRandom(seed: 15)
        // "s0" spends its whole burst, then stays active.
        for _ in 0..<6 { _ = policy.judge(factory.attachment(from: "s0", at: now), now: now) }
        for i in 1...8 {  // 8 tracked: at the cap, nothing evicted
            _ = policy.judge(factory.attachment(from: "s\(i)", at: now), now: now)
            _ = policy.judge(factory.text(randomProse(length: 10, using: &rng), from: "s0", at: now), now: now)
        }
        // The 9th sender overflowed the cap of 8: the 3 least recently active (s1, s2, s3) went, 6 remain.
        #expect(policy.currentStats.trackedSenders == 6)
        // s0 was active most recently, so it kept its (empty) budget.
        #expect(policy.judge(factory.attachment(from: "s0", at: now), now: now).rule == .messageRate)
        #expect(policy.currentStats.senderEvictions == 3)
    }

    @Test func configLoadsFromJSONAndNamesTheBadField() throws {
        let json = try JSONParser().parse(
            #"{"enabled": true, "shadow_mode": true, "message_bucket": {"capacity": 10, "refill_seconds": 5}, "stored_texts": 300}"#)
        let config = try SpamFilterConfig(json: json)
        #expect(config.shadowMode && config.messageBucket.capacity == 10 && config.messageBucket.refillSeconds == 5)
        #expect(config.messageBucket.refillTokens == 1 && config.storedTexts == 300)
        #expect(try SpamFilterConfig(json: config.jsonValue) == config)
        for (text, error) in [
            (#"{"stored_text": 3}"#, SpamConfigError.unknownField(field: "spam.stored_text")),
            (#"{"message_bucket": {"capacity": "6"}}"#, .wrongType(field: "spam.message_bucket.capacity", expected: "a number")),
            (#"{"near_copy_threshold": 1.5}"#, .outOfRange(field: "spam.near_copy_threshold", reason: "must be between 0.5 and 1.0")),
            (#"{"stored_texts": 0}"#, .outOfRange(field: "spam.stored_texts", reason: "must be between 1 and 10000")),
            (#"{"stored_texts": 10001}"#, .outOfRange(field: "spam.stored_texts", reason: "must be between 1 and 10000")),
            (#"[]"#, .notAnObject(field: "spam")),
        ] {
            #expect(throws: error) { try SpamFilterConfig(json: try JSONParser().parse(text)) }
        }
        #expect(throws: Never.self) { try SpamFilterConfig(json: try JSONParser().parse(#"{"stored_texts": 10000}"#)) }
    }

    @Test func verdictCacheIsBoundedAtItsLimit() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        let limit = AdmissionPolicy.Limits.verdictCacheSize
        for i in 0..<(limit + 1) {
            let c = SpamCandidate(senderKey: "s\(i % 5000)", messageID: "id\(i)", timestamp: now + Double(i), content: .attachment, direction: .meshToNostr)
            _ = policy.judge(c, now: now + Double(i))
        }
        #expect(policy.currentStats.cachedVerdicts == limit)
        #expect(policy.cachedVerdict("id0") == nil)  // n+1-th evicted the oldest
        #expect(policy.cachedVerdict("id1") != nil)
    }
}
