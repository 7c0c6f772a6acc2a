import BitchatWire
import BotCrypto
@testable import Bridge
import Testing
import BridgeCore

@Suite("Personas: one mesh identity per channel author for the plain-text downlink")
struct PersonaTests {
    static let seed = [UInt8](repeating: 7, count: 32)
    static let alice = [UInt8](repeating: 0xa1, count: 32)
    static let bob = [UInt8](repeating: 0xb0, count: 32)

    @Test func keysAreDerivedFromTheSeedAndTheAuthorAlone() throws {
        var one = PersonaBook(seed: Self.seed)
        var two = PersonaBook(seed: Self.seed)
        var other = PersonaBook(seed: [UInt8](repeating: 8, count: 32))
        let a1 = try one.persona(author: Self.alice, name: "alice", now: 0).persona
        let a2 = try two.persona(author: Self.alice, name: "renamed", now: 99).persona
        #expect(a1.peerID == a2.peerID && a1.signingKey.publicKey == a2.signingKey.publicKey, "same author, same persona after a restart")
        #expect(try one.persona(author: Self.bob, name: nil, now: 0).persona.peerID != a1.peerID)
        #expect(try other.persona(author: Self.alice, name: "alice", now: 0).persona.peerID != a1.peerID, "another bridge cannot forge it")
        #expect(a1.peerID == MeshPeerID(noisePublicKey: a1.noisePublicKey))
    }

    @Test func aPersonaAnnouncesFirstAndAgainAfterFiftySecondsOrANewName() throws {
        var book = PersonaBook(seed: Self.seed)
        let first = try book.persona(author: Self.alice, name: "alice", now: 100)
        #expect(first.announce)
        book.announced(first.persona, now: 100)
        #expect(try !book.persona(author: Self.alice, name: "alice", now: 149).announce)
        #expect(try book.persona(author: Self.alice, name: "alice", now: 150).announce, "iOS forgets a peer after 60 s")
        book.announced(first.persona, now: 150)
        #expect(try book.persona(author: Self.alice, name: "alice2", now: 151).announce, "a new nickname shows only after an announce")
    }

    @Test func theBookIsBoundedAndDropsTheLeastRecentlyUsed() throws {
        var book = PersonaBook(seed: Self.seed)
        for i in 0..<PersonaBook.Limits.maxPersonas {
            var author = [UInt8](repeating: 0, count: 32)
            author[0] = UInt8(i)
            book.announced(try book.persona(author: author, name: "p\(i)", now: Double(i)).persona, now: Double(i))
        }
        #expect(book.count == PersonaBook.Limits.maxPersonas)
        let newcomer = try book.persona(author: Self.bob, name: "bob", now: 1_000)
        #expect(book.count == PersonaBook.Limits.maxPersonas && newcomer.announce)
        // Author 0 was the least recently used: it comes back derived again, and announces again.
        let returning = try book.persona(author: [UInt8](repeating: 0, count: 32), name: "p0", now: 1_001)
        #expect(returning.announce)
    }

    @Test func nicknamesFitAndroidsFifteenCharactersAndSayWhereTheyComeFrom() {
        #expect(PersonaBook.nickname("alice") == "alice@nostr")
        #expect(PersonaBook.nickname(nil) == "anon@nostr" && PersonaBook.nickname("  ") == "anon@nostr")
        #expect(PersonaBook.nickname("a very long festival name") == "a very lo@nostr")
        #expect(PersonaBook.nickname("al#ice") == "alice@nostr")
        for name in ["x", "abcdefghijklmnop", "émile zola", "日本語の名前です"] {
            let nickname = PersonaBook.nickname(name)
            #expect(nickname.count <= 15 && nickname.hasSuffix("@nostr"), "\(nickname)")
        }
    }

    @Test func announceAndMessageVerifyUnderThePersonasKey() throws {
        var book = PersonaBook(seed: Self.seed)
        let persona = try book.persona(author: Self.alice, name: "alice", now: 0).persona
        let announce = try PersonaBook.announce(persona, at: 1_000)
        let payload = try AnnouncePayload.decode(announce.payload)
        #expect(payload.nickname == "alice@nostr" && payload.noisePublicKey == persona.noisePublicKey)
        #expect(announce.verifySignature(persona.signingKey.publicKey).isValid && announce.sender == persona.peerID)
        let message = try PersonaBook.message(persona, text: "gig starts", at: 1_001)
        #expect(message.verifySignature(persona.signingKey.publicKey).isValid && message.payload == Array("gig starts".utf8))
    }
}
