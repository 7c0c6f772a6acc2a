import BotSupport
import Testing
@testable import SpamFilter

/// The per-message bookkeeping's shortcuts against their plain definitions: packed table keys, the verdict
/// ring, memoised autocorrelation allowances, the bigram counter.
@Suite("Spam filter bookkeeping")
struct BookkeepingTests {
    let now = 1_750_000_000.0

    static func hex(_ rng: inout SeededRandom, count: Int = 64) -> String {
        String((0..<count).map { _ in Array("0123456789abcdef")[Int(rng.next() % 16)] })
    }

    /// Two table keys are equal exactly when their strings are: packed 64-digit ids, the same ids with one
    /// character changed to every other ASCII byte (upper-case digits, neighbours of the digit ranges),
    /// shorter and longer ones, and non-ASCII text; equal keys also hash equally.
    @Test func tableKeysAreEqualExactlyWhenTheirStringsAre() {
        var rng = SeededRandom(seed: 11)
        var strings: [String] = ["", "a", "mesh-1", String(repeating: "0", count: 64), String(repeating: "f", count: 64)]
        for _ in 0..<40 {
            let id = Self.hex(&rng)
            strings.append(id)
            strings.append(id.uppercased())
            strings.append(String(id.dropLast()))
            strings.append(id + "0")
            let position = Int(rng.next() % 64)
            for byte in UInt8(0x20)..<UInt8(0x7F) {
                var bytes = Array(id.utf8)
                bytes[position] = byte
                strings.append(String(decoding: bytes, as: UTF8.self))
            }
            var accented = Array(id)
            accented[position] = "é"
            strings.append(String(accented))
        }
        // Every digit in every position decodes to its own value: flipping one digit changes the key.
        let base = Self.hex(&rng)
        for position in 0..<64 {
            for digit in "0123456789abcdef" {
                var chars = Array(base)
                chars[position] = digit
                strings.append(String(chars))
            }
        }
        let unique = Array(Set(strings))
        let keys = unique.map(TableKey.init)
        var packed = 0
        for (i, key) in keys.enumerated() {
            if case .hex = key { packed += 1 }
            #expect(key == TableKey(unique[i]))
            #expect(key.hashValue == TableKey(unique[i]).hashValue)
        }
        #expect(packed > 64 * 16 / 2)
        #expect(Set(keys).count == unique.count, "distinct strings, distinct keys")
        for (i, string) in unique.enumerated() {
            let isHex = string.utf8.count == 64 && string.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
            if case .hex = keys[i] { #expect(isHex, "\(string)") } else { #expect(!isHex, "\(string)") }
        }
    }

    /// The ring keeps exactly the last `verdictCacheSize` judged ids (64-digit event ids, so packed keys),
    /// returns the stored verdict with `fromCache` set, and forgets everything on wipe.
    @Test func verdictRingKeepsTheLastIds() {
        var policy = AdmissionPolicy(config: SpamFilterConfig())
        var rng = SeededRandom(seed: 12)
        let limit = AdmissionPolicy.Limits.verdictCacheSize
        var ids: [String] = []
        var verdicts: [SpamVerdict] = []
        for i in 0..<(limit + 100) {
            let id = Self.hex(&rng)
            ids.append(id)
            let c = SpamCandidate(
                senderKey: "s\(i % 3000)", messageID: id, timestamp: now + Double(i), content: .text("message number \(i)"),
                direction: .nostrToMesh)
            verdicts.append(policy.judge(c, now: now + Double(i)))
        }
        #expect(policy.currentStats.cachedVerdicts == limit)
        for (i, id) in ids.enumerated() {
            let cached = policy.cachedVerdict(id)
            if i < 100 {
                #expect(cached == nil)
            } else {
                #expect(cached == verdicts[i])
            }
        }
        let again = SpamCandidate(
            senderKey: "s1", messageID: ids[limit + 99], timestamp: now, content: .text("anything else"), direction: .nostrToMesh)
        var expected = verdicts[limit + 99]
        expected.fromCache = true
        #expect(policy.judge(again, now: now + Double(limit + 100)) == expected)
        policy.wipe()
        #expect(policy.currentStats.cachedVerdicts == 0)
        #expect(policy.cachedVerdict(ids[limit + 99]) == nil)
    }

    /// Exempt senders given as 64-digit keys are recognised through their packed form, also after the set changes.
    @Test func exemptSendersAreMatchedThroughTheirKeys() {
        var rng = SeededRandom(seed: 13)
        let own = Self.hex(&rng)
        let other = Self.hex(&rng)
        var policy = AdmissionPolicy(config: SpamFilterConfig(), exemptSenders: [own])
        func judge(_ sender: String) -> SpamVerdict.Outcome {
            policy.judge(
                SpamCandidate(senderKey: sender, messageID: Self.hex(&rng), timestamp: now, content: .text("hi"), direction: .nostrToMesh),
                now: now
            ).outcome
        }
        #expect(judge(own) == .exempt)
        #expect(judge(own.uppercased()) == .accepted)
        #expect(judge(other) == .accepted)
        policy.exemptSenders.insert(other)
        #expect(judge(other) == .exempt)
        policy.exemptSenders = []
        #expect(judge(own) == .accepted)
    }

    /// Senders kept densely (an evicted one replaced by the last) behave as a plain table of buckets with
    /// least-recently-active eviction down to 3/4 of the cap: every message's bucket level and outcome,
    /// the eviction count and the tracked count agree with that model, for hex and other sender keys.
    @Test func denseSendersMatchAPlainModel() {
        var config = SpamFilterConfig()
        config.maxTrackedSenders = 8
        var policy = AdmissionPolicy(config: config)
        var rng = SeededRandom(seed: 16)
        let keys = (0..<20).map { i in i % 2 == 0 ? Self.hex(&rng) : "peer-\(i)" }
        var model: [String: (bucket: TokenBucketSchedule, lastActive: Int)] = [:]
        var activity = 0
        var evictions = 0
        for i in 0..<4_000 {
            let sender = keys[Int(rng.next() % UInt64(rng.next() % 2 == 0 ? 20 : 6))]
            let time = now + Double(i) * 0.7
            activity += 1
            if model[sender] != nil {
                model[sender]!.lastActive = activity
            } else {
                model[sender] = (TokenBucketSchedule(config.messageBucket), activity)
                if model.count > config.maxTrackedSenders {
                    let ordered = model.filter { $0.key != sender }.sorted { $0.value.lastActive < $1.value.lastActive }
                    for (key, _) in ordered.prefix(model.count - config.maxTrackedSenders * 3 / 4) {
                        model[key] = nil
                        evictions += 1
                    }
                }
            }
            let expected = model[sender]!.bucket.spend(1, at: BucketScale.milliseconds(time))
            let verdict = policy.judge(
                SpamCandidate(senderKey: sender, messageID: "m\(i)", timestamp: time, content: .attachment, direction: .meshToNostr),
                now: time)
            #expect(verdict.figures.messageBucket?.levelUnits == expected.level, "message \(i)")
            #expect((verdict.outcome == .accepted) == expected.accepted, "message \(i)")
        }
        #expect(evictions > 100)
        #expect(policy.currentStats.senderEvictions == evictions)
        #expect(policy.currentStats.trackedSenders == model.count)
    }

    /// The memoised allowance equals the largest mismatch count the definition's division accepts (the
    /// table-driven search is checked against the definition in `AutocorrelationTests`).
    @Test func autocorrelationAllowancesFollowTheDefinition() {
        let thresholds = [0.0, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.999, 1.0, 1.1]
        for threshold in thresholds {
            for total in 0..<300 {
                var expected = -1
                for a in stride(from: total, through: 0, by: -1) where total > 0 && Double(total - a) / Double(total) >= threshold {
                    expected = a
                    break
                }
                #expect(Autocorrelation.allowedMismatches(total: total, threshold: threshold) == expected, "\(total) at \(threshold)")
            }
        }
    }

    /// Distinct bigrams with their counts, in order of first occurrence, as a plain dictionary count gives them.
    @Test func bigramsAreCountedInOrderOfFirstOccurrence() {
        var rng = SeededRandom(seed: 15)
        for round in 0..<1_000 {
            let n = Int(rng.next() % (round % 10 == 0 ? 3000 : 80))
            let alphabet = 1 + rng.next() % (round % 3 == 0 ? 3 : 40)
            let s = (0..<n).map { _ in UInt32(0x61 + rng.next() % alphabet) }
            var order: [UInt64] = []
            var counts: [UInt64: Int32] = [:]
            for i in 0..<max(n - 1, 0) {
                let gram = UInt64(s[i]) << 32 | UInt64(s[i + 1])
                if counts[gram] == nil { order.append(gram) }
                counts[gram, default: 0] += 1
            }
            let got = TextStore.bigrams(of: s)
            #expect(got.map(\.gram) == order)
            #expect(got.map(\.count) == order.map { counts[$0]! })
        }
    }
}
