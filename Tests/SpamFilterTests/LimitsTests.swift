import BotSupport
import Testing
@testable import SpamFilter

@Suite("Spam filter limits at n and n+1")
struct LimitsTests {
    @Test(arguments: [
        ("max_tracked_senders", "1000000", true), ("max_tracked_senders", "1000001", false),
        ("max_tracked_senders", "4", true), ("max_tracked_senders", "3", false),
        ("repeat_window_seconds", "86400", true), ("repeat_window_seconds", "86400.5", false),
        ("timestamp_clamp_seconds", "86400", true), ("timestamp_clamp_seconds", "86401", false),
        ("stored_texts", "10000", true), ("stored_texts", "10001", false),
        ("cross_user_scan_max_comparisons", "10000", true), ("cross_user_scan_max_comparisons", "10001", false),
    ])
    func configLimits(field: String, value: String, accepted: Bool) throws {
        let json = try JSONParser().parse(#"{"\#(field)": \#(value)}"#)
        if accepted {
            #expect(throws: Never.self) { try SpamFilterConfig(json: json) }
        } else {
            #expect(throws: SpamConfigError.self) { try SpamFilterConfig(json: json) }
        }
    }

    /// The open-addressing bigram index behaves like a dictionary of posting lists through growth,
    /// tombstones and rebuilds.
    @Test func bigramIndexMatchesADictionaryModel() {
        var rng = SeededRandom(seed: 7)
        var index = BigramIndex(minimumCapacity: 4)
        var model: [UInt64: [Int32]] = [:]
        for step in 0..<20_000 {
            let key = 1 + rng.next() % 700
            let slot = Int32(rng.next() % 50)
            if rng.next() % 3 == 0 {
                index.remove(slot: slot, for: key)
                if let p = model[key]?.firstIndex(of: slot) { model[key]?.remove(at: p) }
                if model[key]?.isEmpty == true { model[key] = nil }
            } else if model[key]?.contains(slot) != true {
                index.append(BigramIndex.Posting(slot: slot, count: 1), for: key)
                model[key, default: []].append(slot)
            }
            if step % 1000 == 0 || step == 19_999 {
                #expect(index.count == model.count)
                for (key, slots) in model {
                    let position = index.position(of: key)
                    #expect(position.map { index.postings(at: $0).map(\.slot) } == slots)
                }
                #expect(index.position(of: 5000) == nil)
            }
        }
    }

    @Test func textStoreEvictsItsOldestTextAtCapacity() {
        var store = TextStore(capacity: 3)
        for i in 0..<4 {
            let scalars = Array("text \(i)".unicodeScalars.map(\.value))
            store.insert(
                senderKey: "s", messageID: "m\(i)", time: 0, length: scalars.count, scalars: scalars,
                bigrams: TextStore.bigrams(of: scalars))
            #expect(store.count == min(i + 1, 3))
        }
        let ids = store.slotsNewestFirst().compactMap { store.slots[$0]?.messageID }
        #expect(ids == ["m3", "m2", "m1"])
    }
}
