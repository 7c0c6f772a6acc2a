import BotSupport
import Testing
import SpamFilter
import SpamFilterReference

/// The indexed, bounded filter against the exhaustive reference on random streams: identical verdicts,
/// except after a verdict whose cross-user scan stopped at its documented cap (§2; only with caps below
/// the stored texts, as `withTinyScanCapsOnlyCappedVerdictsMayDiffer` sets them).
@Suite("Spam filter equals the exhaustive reference")
struct EquivalenceTests {
    struct Stream {
        var config: SpamFilterConfig
        var messages: [(candidate: SpamCandidate, now: Double)]
    }

    static func makeStream(seed: UInt64, tinyCaps: Bool = false) -> Stream {
        var rng = SeededRandom(seed: seed)
        var config = SpamFilterConfig()
        if rng.next() % 4 == 0 {
            config.storedTexts = Int(3 + rng.next() % 6)
            config.messageBucket.capacity = Double(2 + rng.next() % 3)
            config.crossUserMinLength = Int(4 + rng.next() % 12)
            config.repeatedCharactersMinLength = Int(8 + rng.next() % 24)
            config.characterBucket.capacity = Double(40 + rng.next() % 100)
        }
        if rng.next() % 5 == 0 { config.nearCopyThreshold = [0.5, 0.6, 0.7, 0.9][Int(rng.next() % 4)] }
        if tinyCaps {
            config.crossUserScanMaxComparisons = 1 + Int(rng.next() % 2)
            config.crossUserScanMaxAlignments = 1
            config.crossUserMinLength = 4
            config.crossUserOtherSenders = 2
        }
        let alphabet = UInt64(2 + rng.next() % 25)
        let senders = Int(2 + rng.next() % 5)
        var now = 1_750_000_000.0
        var texts: [String] = []
        var messages: [(SpamCandidate, Double)] = []
        let count = Int(8 + rng.next() % 9)
        func randomText() -> String {
            let length = Int(rng.next() % 48)
            var s = ""
            for _ in 0..<length {
                s.unicodeScalars.append(rng.next() % 7 == 0 ? " " : Unicode.Scalar(UInt8(0x61 + rng.next() % alphabet)))
            }
            switch rng.next() % 12 {
            case 0: s += " site.com"
            case 1: s = String(repeating: "ab", count: Int(10 + rng.next() % 20))
            case 2: s = s.uppercased()
            case 3: s += " " + s
            default: break
            }
            return s
        }
        for index in 0..<count {
            now += rng.next() % 6 == 0 ? Double(rng.next() % 700) : Double(rng.next() % 20)
            let sender = "s\(rng.next() % UInt64(senders))"
            let stamp: Double
            switch rng.next() % 6 {
            case 0: stamp = now - Double(rng.next() % 5000)  // backfill, sometimes beyond the clamp
            case 1: stamp = now + Double(rng.next() % 100)  // from the future
            default: stamp = now - Double(rng.next() % 30)
            }
            if index > 0, rng.next() % 10 == 0, let previous = messages.last {  // a re-delivery
                messages.append((previous.0, now))
                continue
            }
            let content: SpamContent
            if rng.next() % 15 == 0 {
                content = .attachment
            } else if !texts.isEmpty, rng.next() % 2 == 0 {
                var copy = Array(texts[Int(rng.next() % UInt64(texts.count))].unicodeScalars)
                for _ in 0..<(rng.next() % 4) {
                    let position = copy.isEmpty ? 0 : Int(rng.next() % UInt64(copy.count))
                    let letter = Unicode.Scalar(UInt8(0x61 + rng.next() % alphabet))
                    switch rng.next() % 3 {
                    case 0 where !copy.isEmpty: copy.remove(at: position)
                    case 1: copy.insert(letter, at: position)
                    default: if !copy.isEmpty { copy[position] = letter }
                    }
                }
                content = .text(String(String.UnicodeScalarView(copy)))
            } else {
                content = .text(randomText())
            }
            if case .text(let t) = content { texts.append(t) }
            let direction: SpamDirection = rng.next() % 2 == 0 ? .nostrToMesh : .meshToNostr
            messages.append((SpamCandidate(senderKey: sender, messageID: "\(seed)-\(index)", timestamp: stamp, content: content, direction: direction), now))
        }
        return Stream(config: config, messages: messages)
    }

    /// Runs one stream through both; returns (compared, hidden, capped) counts.
    static func compare(_ stream: Stream) -> (compared: Int, hidden: Int, capped: Bool, mismatch: String?) {
        var policy = AdmissionPolicy(config: stream.config)
        var reference = ReferenceSpamFilter(config: stream.config)
        var compared = 0
        var hidden = 0
        for (candidate, now) in stream.messages {
            let verdict = policy.judge(candidate, now: now)
            let expected = reference.judge(candidate, now: now)
            if verdict.figures.crossUser?.capped == true { return (compared, hidden, true, nil) }
            if verdict.isHidden != expected.hidden || verdict.rule != expected.rule {
                return (compared, hidden, false, "\(candidate.messageID): filter \(verdict.rule as Any) reference \(expected.rule as Any)")
            }
            compared += 1
            if verdict.isHidden { hidden += 1 }
        }
        return (compared, hidden, false, nil)
    }

    @Test(arguments: 0..<8)
    func tenThousandRandomStreamsGiveTheSameVerdicts(shard: Int) {
        var streams = 0
        var messages = 0
        var hiddenByRule = 0
        var capped = 0
        for seed in stride(from: UInt64(shard), to: 10_400, by: 8) {
            let result = Self.compare(Self.makeStream(seed: seed))
            #expect(result.mismatch == nil, "seed \(seed): \(result.mismatch ?? "")")
            if result.capped { capped += 1 }
            streams += 1
            messages += result.compared
            hiddenByRule += result.hidden
        }
        #expect(streams == 1300)
        // The default caps equal the default stored texts: the scan is exhaustive, nothing is capped.
        #expect(capped == 0, "\(capped) capped streams")
        // The streams are not trivially all-accepted: a real share of verdicts hide.
        #expect(hiddenByRule * 20 > messages, "\(hiddenByRule) of \(messages) hidden")
    }

    @Test func withTinyScanCapsOnlyCappedVerdictsMayDiffer() {
        var capped = 0
        for seed in UInt64(50_000)..<51_000 {
            let result = Self.compare(Self.makeStream(seed: seed, tinyCaps: true))
            #expect(result.mismatch == nil, "seed \(seed): \(result.mismatch ?? "")")
            if result.capped { capped += 1 }
        }
        #expect(capped > 50, "the caps were exercised in \(capped) streams")
    }

    /// Every rule fires somewhere in the random streams, so the equivalence covers all six.
    @Test func randomStreamsExerciseEveryRule() {
        var seen: Set<SpamRule> = []
        for seed in UInt64(0)..<3000 {
            let stream = Self.makeStream(seed: seed)
            var policy = AdmissionPolicy(config: stream.config)
            for (candidate, now) in stream.messages {
                if let rule = policy.judge(candidate, now: now).rule { seen.insert(rule) }
            }
        }
        #expect(seen == Set(SpamRule.allCases))
    }
}
