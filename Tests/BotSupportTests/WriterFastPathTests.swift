@testable import BotSupport
import Testing

/// The block-copy paths of ``JSONWriter/appendString(_:into:)`` and ``Hex/append(_:to:)`` write exactly
/// what the byte-at-a-time forms write.
@Suite("JSON string and hex fast paths")
struct WriterFastPathTests {
    /// Characters that exercise every branch: plain ASCII, each escaped byte, C0 controls, U+007F,
    /// multi-byte UTF-8 and a scalar outside the BMP.
    static let alphabet: [Character] = [
        "a", "Z", "0", " ", "/", ".", ":", "\"", "\\", "\n", "\r", "\t", "\u{08}", "\u{0c}", "\u{00}", "\u{01}", "\u{1f}",
        "\u{7f}", "é", "ß", "\u{2028}", "😀",
    ]

    @Test("appendString equals the escaping loop on 3,000 random strings, after a non-empty prefix too")
    func appendStringAgrees() {
        var rng = SeededRandom(seed: 0x7d01)
        for round in 0..<3_000 {
            let length = Int.random(in: 0...40, using: &rng)
            // Half the strings draw only from the escape-free characters, so the fast path is taken.
            let plain = round % 2 == 0
            let pool = plain ? Self.alphabet.filter { !["\"", "\\", "\n", "\r", "\t", "\u{08}", "\u{0c}", "\u{00}", "\u{01}", "\u{1f}"].contains($0) } : Self.alphabet
            let text = String((0..<length).map { _ in pool[Int.random(in: 0..<pool.count, using: &rng)] })
            var prefix: [UInt8] = round % 3 == 0 ? [] : Array("[0,".utf8)
            var fast = prefix
            JSONWriter.appendString(text, into: &fast)
            JSONWriter.appendStringEscaping(text, into: &prefix)
            #expect(fast == prefix, "\(text.debugDescription)")
        }
    }

    @Test("appendString on crafted strings: empty, only escapes, escape at either end, a substring")
    func appendStringCrafted() {
        let long = String(repeating: "x", count: 300)
        let cases = ["", "\"", "\\", "\u{1f}", "\u{20}", "a\"", "\"a", long, long + "\n", "\u{7f}é😀/",
                     String(long.dropFirst(7).prefix(20))]
        for text in cases {
            var fast: [UInt8] = []
            var slow: [UInt8] = []
            JSONWriter.appendString(text, into: &fast)
            JSONWriter.appendStringEscaping(text, into: &slow)
            #expect(fast == slow, "\(text.debugDescription)")
        }
    }

    @Test("Hex.append equals Hex.encode for 0…100 bytes, onto empty and non-empty buffers")
    func hexAppendAgrees() {
        var rng = SeededRandom(seed: 0x7d02)
        for count in 0...100 {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            var out: [UInt8] = count % 2 == 0 ? [] : [0x41, 0x42]
            let before = out
            Hex.append(bytes, to: &out)
            #expect(out == before + Array(Hex.encode(bytes).utf8))
        }
        var all: [UInt8] = []
        Hex.append(Array(0...255), to: &all)
        #expect(String(decoding: all, as: UTF8.self) == (0...255).map { String(format2: $0) }.joined())
    }
}

private extension String {
    /// Two lowercase hex digits, spelled without Foundation.
    init(format2 byte: Int) {
        let digits = Array("0123456789abcdef")
        self.init([digits[byte >> 4], digits[byte & 15]])
    }
}
