import BotCrypto
import BotSupport
import Testing

@testable import Nostr

/// The per-event serialisers written straight into byte buffers must spell exactly what the value-tree
/// writer spells (the carrier JSON) and what `String(Int64)` spells (canonical bytes → event ids).
@Suite("Event JSON fast paths")
struct EventJSONFastPathTests {
    @Test("jsonBytes equals JSONWriter.compact(jsonValue) on random and crafted events")
    func jsonBytesMatchesWriter() throws {
        var rng = SeededRandom(seed: 0x7a11)
        let key = try SchnorrSecretKey(bytes: (1...32).map { UInt8($0) })
        // Escapes, controls, DEL, non-ASCII and astral scalars, quotes and backslashes.
        let pieces = ["a", "Z", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{08}", "\u{0c}", "\u{01}", "\u{1f}", "\u{7f}",
                      "é", "€", "😀", "\u{200b}", "ｆ", "0"]
        func text(_ n: Int) -> String {
            (0..<n).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &rng)] }.joined()
        }
        let times: [Int64] = [0, 1, 9, 10, 1_764_464_000, Int64.max, Int64.min, -1, -10]
        for round in 0..<300 {
            let tags = (0..<Int.random(in: 0...4, using: &rng)).map { _ in
                (0..<Int.random(in: 0...3, using: &rng)).map { _ in text(Int.random(in: 0...6, using: &rng)) }
            }
            let createdAt = round < times.count ? times[round] : Int64.random(in: Int64.min...Int64.max, using: &rng)
            let event = try UnsignedEvent(
                pubkey: key.publicKey, createdAt: createdAt, kind: Int.random(in: 0...65535, using: &rng), tags: tags,
                content: text(Int.random(in: 0...40, using: &rng))
            ).signed(with: key, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
            #expect(event.jsonBytes == Array(JSONWriter.compact(event.jsonValue).utf8))
            #expect(event.json == JSONWriter.compact(event.jsonValue))
        }
    }

    @Test("appendDecimal spells String(Int64) at the edges and at random", arguments: [
        Int64.min, Int64.min + 1, -1_000_000_007, -10, -9, -1, 0, 1, 9, 10, 99, 100, 1_764_464_000, Int64.max - 1, Int64.max,
    ])
    func decimal(_ value: Int64) {
        var out: [UInt8] = [0x5b]
        CanonicalJSON.appendDecimal(value, into: &out)
        #expect(out == [0x5b] + Array(String(value).utf8))
    }

    @Test("appendDecimal agrees with String(Int64) on 5,000 random values")
    func decimalRandom() {
        var rng = SeededRandom(seed: 0xdec)
        for _ in 0..<5_000 {
            let value = Int64(bitPattern: rng.next()) >> Int64.random(in: 0...63, using: &rng)
            var out: [UInt8] = []
            CanonicalJSON.appendDecimal(value, into: &out)
            #expect(out == Array(String(value).utf8))
        }
    }
}
