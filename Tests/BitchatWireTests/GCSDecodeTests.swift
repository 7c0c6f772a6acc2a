import BitchatWire
import BotSupport
import Testing

/// The byte-at-a-time GCS decoder against the bit-at-a-time statement of iOS `decodeToSortedSet` (BOARD.md §9.3):
/// same values for every P, M and data, including truncated runs, zero fill and values past M.
@Suite("GCS decoder: byte-at-a-time equals bit-at-a-time")
struct GCSDecodeTests {
    /// §9.3 read literally: unary q (stop at the end), P bits (stop at the end), acc += (q << P) + r + 1, stop at M.
    static func reference(p: Int, m: UInt64, data: [UInt8]) -> [UInt64] {
        guard (1...32).contains(p), m > 1 else { return [] }
        var bit = 0
        let total = data.count * 8
        func next() -> UInt64? {
            guard bit < total else { return nil }
            defer { bit += 1 }
            return UInt64(data[bit >> 3] >> (7 - UInt8(bit & 7)) & 1)
        }
        var values: [UInt64] = []
        var running: UInt64 = 0
        while true {
            var q: UInt64 = 0
            var sawZero = false
            while let b = next() {
                if b == 0 { sawZero = true; break }
                q += 1
            }
            guard sawZero, bit + p <= total else { break }
            var r: UInt64 = 0
            for _ in 0..<p { r = r << 1 | (next() ?? 0) }
            let (shifted, overflow) = q.multipliedReportingOverflow(by: 1 << UInt64(p))
            guard !overflow else { break }
            let (sum, overflow2) = running.addingReportingOverflow(shifted | r &+ 1)
            guard !overflow2, sum < m else { break }
            running = sum
            values.append(running)
        }
        return values
    }

    @Test("3,000 seeded inputs: random bytes, runs of ones and zeros, every P in 1…32, small and huge M")
    func differential() {
        var rng = SeededRandom(seed: 0x6c5_0017)
        for round in 0..<3_000 {
            let p = Int.random(in: 1...32, using: &rng)
            let m: UInt64 = round % 3 == 0 ? UInt64.random(in: 2...4_096, using: &rng) : UInt64.random(in: 2...UInt64.max, using: &rng)
            let count = Int.random(in: 0...64, using: &rng)
            let data: [UInt8] = (0..<count).map { _ in
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: 0xff
                case 1: 0x00
                default: UInt8.random(in: 0...255, using: &rng)
                }
            }
            let fast = GCSFilter.decode(p: p, m: m, data: data)
            let slow = Self.reference(p: p, m: m, data: data)
            if fast != slow {
                Issue.record("p \(p) m \(m) data \(Hex.encode(data)): \(fast) vs \(slow)")
                return
            }
        }
    }

    @Test("what the encoder writes decodes back (zero fill may add values after them when P < 7), for 0…400 values")
    func roundTrip() {
        var rng = SeededRandom(seed: 17)
        for _ in 0..<200 {
            let p = Int.random(in: 1...20, using: &rng)
            let n = Int.random(in: 0...400, using: &rng)
            // M ≈ n · 2^(P+2), as a built filter's is: the unary parts stay a few bits long.
            let m = UInt64(n + 1) << UInt64(p + 2)
            let values = Set((0..<n).map { _ in UInt64.random(in: 1..<m, using: &rng) }).sorted()
            #expect(GCSFilter.decode(p: p, m: m, data: GCSFilter.encode(p: p, values: values)).prefix(values.count) == values[...])
        }
    }
}

@Suite("GCS: a request made to cover one more packet")
struct GCSCoveringTests {
    @Test("covering adds the packet to the filter with the same P and M, keeps what was there, and fills an empty filter")
    func covering() {
        let ids = (0..<20).map { i in [UInt8](repeating: UInt8(i), count: 16) }
        let extra = [UInt8](repeating: 0xee, count: 16)
        let request = RequestSyncPayload.build(types: .publicMessages, candidates: ids.enumerated().map { ($0.element, UInt64($0.offset)) })
        let covered = request.covering(extra)
        #expect(covered.p == request.p && covered.m == request.m && covered.types == request.types)
        let membership = GCSFilter.Membership(covered)
        #expect(membership.mightContain(h64: GCSFilter.h64(extra)))
        for id in ids { #expect(membership.mightContain(h64: GCSFilter.h64(id))) }
        #expect(covered.covering(extra) == covered, "already covered: unchanged")
        let empty = RequestSyncPayload.build(types: .publicMessages, candidates: []).covering(extra)
        #expect(empty.m == 128 && GCSFilter.Membership(empty).mightContain(h64: GCSFilter.h64(extra)))
    }
}
