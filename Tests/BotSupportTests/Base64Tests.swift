import BotSupport
import Testing

@Suite("Base64 (RFC 4648 §4, strict)")
struct Base64Tests {
    @Test("RFC 4648 §10 vectors both ways")
    func vectors() throws {
        let pairs = [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")]
        for (plain, encoded) in pairs {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(try Base64.decode(encoded) == Array(plain.utf8))
        }
        let all = (0...255).map(UInt8.init)
        #expect(try Base64.decode(Base64.encode(all)) == all)
        #expect(Base64.encode([0xfb, 0xff]) == "+/8=")
    }

    @Test("one spelling per byte string: bad length, stray characters, misplaced padding and non-zero spare bits are errors")
    func strict() {
        #expect(throws: Base64.DecodeError.badLength(3)) { try Base64.decode("Zm9") }
        #expect(throws: Base64.DecodeError.invalidCharacter(offset: 2)) { try Base64.decode("Zm 9") }
        #expect(throws: Base64.DecodeError.invalidCharacter(offset: 1)) { try Base64.decode("Z=9v") }
        #expect(throws: Base64.DecodeError.invalidCharacter(offset: 2)) { try Base64.decode("Zm=vZm9v") }
        #expect(throws: Base64.DecodeError.invalidCharacter(offset: 2)) { try Base64.decode("Zm-_") }
        #expect(throws: Base64.DecodeError.nonCanonical) { try Base64.decode("Zh==") }
        #expect(throws: Base64.DecodeError.nonCanonical) { try Base64.decode("Zm9=") }
        #expect(throws: Base64.DecodeError.invalidCharacter(offset: 2)) { try Base64.decode("Zg=a") }
    }
}
