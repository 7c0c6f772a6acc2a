import BotSupport
import Testing
@testable import SpamFilter
import SpamFilterReference

@Suite("Spam filter normalisation and links")
struct NormalizerAndLinkTests {
    @Test(arguments: [
        ("happy new year everyone", "happy new year everyone"),
        ("  Happy   NEW\tyear\n\neveryone  ", "happy new year everyone"),
        ("h\u{200B}appy n\u{200C}ew y\u{200D}ear e\u{2060}very\u{FEFF}one\u{00AD}", "happy new year everyone"),
        ("hàppý nëw ÿéår ëvéryöñé", "happy new year everyone"),
        ("𝐡𝐚𝐩𝐩𝐲 𝐧𝐞𝐰 𝐲𝐞𝐚𝐫 𝐞𝐯𝐞𝐫𝐲𝐨𝐧𝐞", "happy new year everyone"),
        ("ｈａｐｐｙ　ｎｅｗ　ｙｅａｒ　ｅｖｅｒｙｏｎｅ", "happy new year everyone"),
        ("ＨＡＰＰＹ new 𝓨𝓔𝓐𝓡 e\u{0301}veryone", "happy new year everyone"),
        ("tab\u{0007}bell\u{0000}", "tabbell"),
        ("\u{200B}\u{200B}", ""),
        ("ǅemal İstanbul", "dzemal istanbul"),
    ])
    func normalises(input: String, expected: String) {
        #expect(TextNormalizer.string(TextNormalizer.normalize(input)) == expected)
    }

    /// The ASCII fast path equals the general path (NFKD, Unicode properties): a zero-width space, which
    /// the general path drops, forces that path on the same ASCII text, for every ASCII code point.
    @Test func asciiFastPathEqualsTheGeneralPath() {
        var rng = SeededRandom(seed: 3)
        for _ in 0..<3000 {
            var text = ""
            for _ in 0..<Int(rng.next() % 40) {
                let roll = rng.next() % 4
                let value = roll == 0 ? UInt8(rng.next() % 0x80) : roll == 1 ? 0x20 : UInt8(0x41 + rng.next() % 58)
                text.unicodeScalars.append(Unicode.Scalar(value))
            }
            let fast = TextNormalizer.normalize(text)
            #expect(fast == TextNormalizer.normalize(text + "\u{200B}"), "\(Array(text.utf8))")
            #expect(fast == TextNormalizer.normalize("\u{200B}" + text), "\(Array(text.utf8))")
        }
    }

    /// The filter's normaliser (ASCII fast path, per-scalar shortcuts) equals the reference's step-by-step
    /// §3 on every Unicode scalar: each between letters and spaces (so a dropped one joins its neighbours,
    /// a space collapses with them), and in runs of consecutive scalars (so marks reorder and compose as
    /// NFKD does them); plus random mixes of ASCII controls, spaces and letters.
    @Test func equalsTheStepByStepReferenceOnEveryScalar() {
        let scalars = (0..<0x11_0000).compactMap(Unicode.Scalar.init(_:))
        for start in stride(from: 0, to: scalars.count, by: 256) {
            let chunk = scalars[start..<min(start + 256, scalars.count)]
            var spaced = String.UnicodeScalarView()
            for (index, scalar) in chunk.enumerated() {
                spaced.append(contentsOf: (index % 3 == 0 ? " a" : "A").unicodeScalars)
                spaced.append(scalar)
            }
            spaced.append("b")
            for text in [String(spaced), String(String.UnicodeScalarView(chunk))] {
                #expect(TextNormalizer.normalize(text) == ReferenceSpamFilter.normalize(text), "from U+\(String(chunk.first!.value, radix: 16))")
            }
        }
        var rng = SeededRandom(seed: 0x5EC3)
        let pool = Array("\t\n\r\u{0B}\u{0C}\u{85}\u{1F}\u{7F} \u{A0}\u{2028}aZé\u{301}\u{200B}".unicodeScalars)
        for _ in 0..<3000 {
            let text = String(String.UnicodeScalarView((0..<Int(rng.next() % 16)).map { _ in pool[Int(rng.next() % UInt64(pool.count))] }))
            #expect(TextNormalizer.normalize(text) == ReferenceSpamFilter.normalize(text), "\(text.unicodeScalars.map(\.value))")
        }
    }

    @Test func disguisedCopiesAreIdenticalAfterNormalisation() {
        let plain = TextNormalizer.normalize("Free tokens at the main stage now")
        for disguise in [
            "F\u{200B}ree tok\u{200B}ens at the main stage now", "Frée tökens át the main stage now",
            "𝐅𝐫𝐞𝐞 𝐭𝐨𝐤𝐞𝐧𝐬 𝐚𝐭 𝐭𝐡𝐞 𝐦𝐚𝐢𝐧 𝐬𝐭𝐚𝐠𝐞 𝐧𝐨𝐰", "Ｆｒｅｅ ｔｏｋｅｎｓ ａｔ ｔｈｅ ｍａｉｎ ｓｔａｇｅ ｎｏｗ",
        ] {
            #expect(TextNormalizer.normalize(disguise) == plain, "\(disguise)")
            #expect(Similarity.similarity(TextNormalizer.normalize(disguise), plain) == 1.0)
        }
    }

    @Test(arguments: [
        ("no links here", 0),
        ("see https://example.com/page", 1),
        ("https://www.example.com/a.b counts once", 1),
        ("www.example.org", 1),
        ("join t.me/x now", 1),
        ("example.com and example.org", 2),
        ("ftp://host", 1),
        ("mail me at name@example.com", 0),
        ("e.g. this, i.e. that", 0),
        ("pi is 3.14", 0),
        ("a.b", 0),
        ("tld of 24 x.abcdefghijklmnopqrstuvwx", 1),
        ("tld of 25 x.abcdefghijklmnopqrstuvwxy", 0),
        ("ｅｘａｍｐｌｅ．ｃｏｍ", 1),
        ("http://a http://b http://c", 3),
    ])
    func countsLinks(text: String, expected: Int) {
        #expect(LinkCounter.count(TextNormalizer.normalize(text)) == expected)
    }
}

@Suite("Link counter fast reject")
struct LinkCounterFastRejectTests {
    @Test("count equals the full matcher on 4,000 random texts, with and without '.' and ':'")
    func agreesWithMatcher() {
        var rng = SeededRandom(seed: 0x7d03)
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789-@_ /wt.:é".unicodeScalars).map { $0.value }
        for round in 0..<4_000 {
            // Every other text leaves out '.' and ':' so the reject path is taken as often as the matcher.
            let pool = round % 2 == 0 ? letters.filter { $0 != 0x2E && $0 != 0x3A } : letters
            let text = (0..<Int.random(in: 0...30, using: &rng)).map { _ in pool[Int.random(in: 0..<pool.count, using: &rng)] }
            #expect(LinkCounter.count(text) == LinkCounter.countScanning(text))
        }
        for crafted in ["", "example com", "wwwexample", "http//x", "a.b.c", "x:y", "https://a", "t.me/x", "www.a"] {
            let text = TextNormalizer.normalize(crafted)
            #expect(LinkCounter.count(text) == LinkCounter.countScanning(text), "\(crafted)")
        }
    }
}
