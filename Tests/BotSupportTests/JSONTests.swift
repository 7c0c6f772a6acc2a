import BotSupport
import Testing

@Suite("JSON parser and writer")
struct JSONTests {
    let parser = JSONParser()

    @Test("round-trips nested documents, preserving member order")
    func roundTrip() throws {
        let text = #"{"b":[1,-2,3.5,true,false,null],"a":{"x":"y"},"e":[],"o":{}}"#
        let value = try parser.parse(text)
        #expect(JSONWriter.compact(value) == text)
        #expect(value["b"]?.arrayValue?.count == 6)
        #expect(value["b"]?.arrayValue?[1] == .integer(-2))
        #expect(value["b"]?.arrayValue?[2] == .double(3.5))
    }

    @Test("canonical string escaping (NIP-01): short escapes, lowercase \\u00xx, '/' and non-ASCII raw")
    func escaping() throws {
        let content = "line1\nq\"uote\\ tab\t url http://x.y/z é 😀\u{01}\u{1f}\u{7f}\u{2028}\u{08}\u{0c}\r"
        let written = JSONWriter.compact(.string(content))
        #expect(written == "\"line1\\nq\\\"uote\\\\ tab\\t url http://x.y/z é 😀\\u0001\\u001f\u{7f}\u{2028}\\b\\f\\r\"")
        #expect(try parser.parse(written) == .string(content))
    }

    @Test("escapes and surrogate pairs decode; lone surrogates are rejected")
    func unicodeEscapes() throws {
        #expect(try parser.parse(#""\u00e9\ud83d\ude00\/""#) == .string("é😀/"))
        #expect(throws: JSONParseError.self) { try parser.parse(#""\ud83d""#) }
        #expect(throws: JSONParseError.self) { try parser.parse(#""\ude00""#) }
        #expect(throws: JSONParseError.self) { try parser.parse(#""\x""#) }
    }

    @Test(
        "malformed documents are named errors, never traps",
        arguments: [
            "", "[", "[1,", "[1,]", "{\"a\"}", "{\"a\":1,}", "{a:1}", "01", "1.", "-", "1e", "+1", "[1] x",
            "\"abc", "\"a\u{01}\"", "tru", "nul", "{\"a\":1,\"a\":2}", "[\"\\", "NaN", "1e999",
        ])
    func malformed(text: String) {
        #expect(throws: JSONParseError.self) { try parser.parse(text) }
    }

    @Test("invalid UTF-8 inside a string is rejected")
    func invalidUTF8() {
        #expect(throws: JSONParseError.self) { try parser.parse([0x22, 0xff, 0x22]) }
    }

    @Test("depth limit: maxDepth nested arrays parse, one more is tooDeep")
    func depth() throws {
        let limited = JSONParser(limits: .init(maxBytes: 1 << 20, maxDepth: 8))
        _ = try limited.parse(String(repeating: "[", count: 8) + String(repeating: "]", count: 8))
        #expect(throws: JSONParseError.self) {
            try limited.parse(String(repeating: "[", count: 9) + String(repeating: "]", count: 9))
        }
        // The default limit protects the stack against hostile nesting.
        #expect(throws: JSONParseError.self) { try parser.parse(String(repeating: "[", count: 100_000)) }
    }

    @Test("size limit: maxBytes accepted, one more byte rejected")
    func size() throws {
        let limited = JSONParser(limits: .init(maxBytes: 10, maxDepth: 8))
        _ = try limited.parse("\"12345678\"")
        #expect(throws: JSONParseError.tooLarge(11, limit: 10)) { try limited.parse("\"123456789\"") }
    }

    @Test("integers stay exact up to Int64; larger numbers become doubles")
    func numbers() throws {
        #expect(try parser.parse("9223372036854775807") == .integer(Int64.max))
        #expect(try parser.parse("9223372036854775808") == .double(9223372036854775808))
        #expect(try parser.parse("1E2") == .double(100))
        #expect(JSONWriter.compact(.double(40.7057)) == "40.7057")
        #expect(JSONWriter.compact(.double(3)) == "3")
    }

    @Test("random byte strings never trap the parser")
    func fuzz() {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("[]{}\",:01-.eE\\u tfnrl\u{00}a".utf8)
        for _ in 0..<20_000 {
            let count = Int.random(in: 0..<24, using: &rng)
            let bytes = (0..<count).map { _ in alphabet.randomElement(using: &rng)! }
            _ = try? parser.parse(bytes)
        }
    }

    @Test("pretty output parses back to the same value")
    func pretty() throws {
        let value = try parser.parse(#"{"a":[1,{"b":"c"}],"d":{}}"#)
        #expect(try parser.parse(JSONWriter.pretty(value)) == value)
    }
}

@Suite("Hex")
struct HexTests {
    @Test("encode lowercase; decode either case; named errors")
    func hex() throws {
        #expect(Hex.encode([0x00, 0xab, 0xff]) == "00abff")
        #expect(try Hex.decode("00ABff") == [0x00, 0xab, 0xff])
        #expect(throws: Hex.DecodeError.oddLength(3)) { try Hex.decode("abc") }
        #expect(throws: Hex.DecodeError.invalidCharacter(offset: 1)) { try Hex.decode("0g") }
        #expect(throws: Hex.DecodeError.wrongLength(expected: 2, actual: 1)) { try Hex.decode("00", expectedCount: 2) }
        #expect(Hex.isLowercase("00ab", byteCount: 2))
        #expect(!Hex.isLowercase("00AB", byteCount: 2))
        #expect(!Hex.isLowercase("00ab", byteCount: 3))
    }
}

@Suite("Hex fast paths")
struct HexFastPathTests {
    /// The generic (Sequence / StringProtocol) forms are the reference: Substring and a lazy sequence
    /// route there, String and [UInt8] take the concrete overloads.
    @Test("the [UInt8]/String overloads agree with the generic forms on random and crafted inputs")
    func agree() throws {
        var rng = SeededRandom(seed: 0x4e58)
        let alphabet = Array("0123456789abcdefABCDEFgz \u{e9}".unicodeScalars)
        for round in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...70, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let generic = Hex.encode(bytes.lazy.map { $0 })
            #expect(Hex.encode(bytes) == generic)
            var appended: [UInt8] = [0x41]
            Hex.append(bytes, to: &appended)
            #expect(appended == [0x41] + Array(generic.utf8))
            // Text: mostly hex, sometimes a wrong character, odd length or uppercase.
            var text = round % 3 == 0 ? generic.uppercased() : generic
            if round % 5 == 0 {
                text = String(String.UnicodeScalarView((0..<Int.random(in: 0...9, using: &rng)).map { _ in
                    alphabet[Int.random(in: 0..<alphabet.count, using: &rng)]
                }))
            }
            let expected = Int.random(in: 0...3, using: &rng) == 0 ? nil : Optional(text.utf8.count / 2)
            let fast = Result { () throws(Hex.DecodeError) -> [UInt8] in try Hex.decode(text, expectedCount: expected) }
            let reference = Result { () throws(Hex.DecodeError) -> [UInt8] in try Hex.decode(text[...], expectedCount: expected) }
            #expect(fast == reference, "\(text)")
            for count in [text.utf8.count / 2, text.utf8.count / 2 + 1] {
                #expect(Hex.isLowercase(text, byteCount: count) == Hex.isLowercase(text[...], byteCount: count), "\(text)")
            }
        }
        #expect(Hex.encode([UInt8]()) == "")
        #expect(try Hex.decode("", expectedCount: 0) == [])
        #expect(throws: Hex.DecodeError.invalidCharacter(offset: 2)) { try Hex.decode("00g0") }
        #expect(throws: Hex.DecodeError.invalidCharacter(offset: 3)) { try Hex.decode("000g") }
        #expect(!Hex.isLowercase("0\u{e9}", byteCount: 1))
    }
}
