import BotSupport
import Testing
@testable import SpamFilter

@Suite("Repeated-characters measure (autocorrelation)")
struct AutocorrelationTests {
    /// The definition, shift by shift: the first `k` in `1 … n/2` with `same/(n − k) ≥ threshold`.
    static func model(_ s: [UInt32], threshold: Double) -> (value: Double, shift: Int)? {
        let n = s.count
        guard n >= 2 else { return nil }
        for k in 1...(n / 2) {
            var same = 0
            for i in 0..<(n - k) where s[i] == s[i + k] { same += 1 }
            let value = Double(same) / Double(n - k)
            if value >= threshold { return (value, k) }
        }
        return nil
    }

    /// `firstReaching` (early exit per shift, mismatch allowance carried from shift to shift, or looked up in
    /// the memoised table; with or without the distinct-bigram skip) returns exactly the model's first
    /// reaching shift and value, on random texts over 1–5 letters, crafted periodic texts with a few defects
    /// and chat-like texts, at thresholds from 0 through 1 and above.
    @Test func firstReachingEqualsTheDefinition() {
        var rng = SeededRandom(seed: 77)
        let thresholds = [0.0, 0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95, 0.999, 1.0, 1.1]
        for round in 0..<3_000 {
            let n = Int(rng.next() % (round % 4 == 0 ? 200 : 60))
            var s: [UInt32]
            if round % 3 == 2 {
                // Chat-like or "buy now buy now …"-like: a long period or many distinct bigrams, some defects.
                let period = 1 + Int(rng.next() % 24)
                let unit = (0..<period).map { _ in UInt32(0x61 + rng.next() % 27) }
                s = (0..<n).map { unit[$0 % period] }
                for _ in 0..<(rng.next() % 10) where !s.isEmpty { s[Int(rng.next() % UInt64(s.count))] = UInt32(0x61 + rng.next() % 27) }
            } else if round % 2 == 0 {
                let alphabet = 1 + rng.next() % 5
                s = (0..<n).map { _ in UInt32(0x61 + rng.next() % alphabet) }
            } else {
                let period = 1 + Int(rng.next() % 7)
                let unit = (0..<period).map { _ in UInt32(0x61 + rng.next() % 26) }
                s = (0..<n).map { unit[$0 % period] }
                for _ in 0..<(rng.next() % 4) where !s.isEmpty { s[Int(rng.next() % UInt64(s.count))] = 0x4E00 }
            }
            let threshold = thresholds[Int(rng.next() % UInt64(thresholds.count))]
            let got = Autocorrelation.firstReaching(s, threshold: threshold)
            let expected = Self.model(s, threshold: threshold)
            #expect(got?.shift == expected?.shift && got?.value == expected?.value, "\(s) at \(threshold)")
            // Skipping the shifts the distinct-bigram bound rules out changes nothing.
            let distinct = Set(zip(s, s.dropFirst()).map { UInt64($0.0) << 32 | UInt64($0.1) }).count
            let skipping = Autocorrelation.firstReaching(s, threshold: threshold, distinctBigrams: distinct)
            #expect(skipping?.shift == expected?.shift && skipping?.value == expected?.value, "\(s) at \(threshold), \(distinct) bigrams")
            // The table-driven search the filter uses (allowances memoised per length), with and without the skip.
            let allowances = (0..<max(n, 1)).map { Int32(Autocorrelation.allowedMismatches(total: $0, threshold: threshold)) }
            for bigrams in [0, distinct] {
                let table = Autocorrelation.firstReaching(s, allowances: allowances, distinctBigrams: bigrams)
                #expect(table?.shift == expected?.shift && table?.value == expected?.value, "\(s) at \(threshold), table, \(bigrams) bigrams")
            }
        }
    }
}
