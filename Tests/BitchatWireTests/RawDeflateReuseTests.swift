import BotCompression
import BotSupport
import Testing

/// `RawDeflate.compress` reuses one reset zlib stream per thread and level; its bytes must be exactly
/// those of a stream created for the call (signed packets are verified by re-compressing, MESH-WIRE §4.4).
@Suite("RawDeflate stream reuse")
struct RawDeflateReuseTests {
    @Test("reused streams give the bytes of fresh streams, interleaved across sizes and levels")
    func reuseMatchesFresh() throws {
        var rng = SeededRandom(seed: 0xdef1)
        let words = ["stage", "tent", "water", "the", "festival", "u4pruy", "\"id\":", "{", "}", "a1b2c3", "again"]
        for round in 0..<400 {
            let input: [UInt8]
            switch round % 4 {
            case 0: input = (0..<Int.random(in: 0...3_000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            case 1: input = []
            default:
                input = Array((0..<Int.random(in: 1...400, using: &rng)).map { _ in
                    words[Int.random(in: 0..<words.count, using: &rng)]
                }.joined(separator: " ").utf8)
            }
            let level: Int32 = round % 7 == 0 ? 6 : RawDeflate.Limits.level
            let fresh = try #require(RawDeflate.compressWithFreshStream(input, level: level))
            #expect(RawDeflate.compress(input, level: level) == fresh)
            #expect(try RawDeflate.decompress(fresh, cap: input.count) == input)
        }
    }

    @Test("an out-of-range level fails as zlib does, and the default level still works afterwards")
    func badLevel() throws {
        #expect(RawDeflate.compress([1, 2, 3], level: 42) == nil)
        #expect(RawDeflate.compressWithFreshStream([1, 2, 3], level: -7) == nil)
        let text = Array(String(repeating: "festival ", count: 30).utf8)
        #expect(try RawDeflate.decompress(try #require(RawDeflate.compress(text)), cap: text.count) == text)
    }
}
