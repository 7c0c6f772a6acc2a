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

    /// A line's turn, with `taken` the nicknames the mesh's peers (and the bridge) use.
    static func turn(_ book: inout PersonaBook, _ author: [UInt8], _ name: String?, at now: Double, taken: Set<String> = []) throws -> PersonaBook.Turn {
        try book.turn(author: author, name: name, now: now) { taken.contains($0) }
    }

    @Test func keysAreDerivedFromTheSeedAndTheAuthorAlone() throws {
        var one = PersonaBook(seed: Self.seed)
        var two = PersonaBook(seed: Self.seed)
        var other = PersonaBook(seed: [UInt8](repeating: 8, count: 32))
        let a1 = try Self.turn(&one, Self.alice, "alice", at: 0).persona
        let a2 = try Self.turn(&two, Self.alice, "renamed", at: 99).persona
        #expect(a1.peerID == a2.peerID && a1.signingKey.publicKey == a2.signingKey.publicKey, "same author, same persona after a restart")
        #expect(try Self.turn(&one, Self.bob, nil, at: 0).persona.peerID != a1.peerID)
        #expect(try Self.turn(&other, Self.alice, "alice", at: 0).persona.peerID != a1.peerID, "another bridge cannot forge it")
        #expect(a1.peerID == MeshPeerID(noisePublicKey: a1.noisePublicKey))
    }

    @Test func aPersonaAnnouncesFirstAndAgainAfterFiftySecondsOrANewName() throws {
        var book = PersonaBook(seed: Self.seed)
        let first = try Self.turn(&book, Self.alice, "alice", at: 100)
        #expect(first.announce)
        book.announced(first.persona, now: 100)
        #expect(try !Self.turn(&book, Self.alice, "alice", at: 149).announce)
        #expect(try Self.turn(&book, Self.alice, "alice", at: 150).announce, "iOS forgets a relayed peer 60 s after its announce")
        book.announced(first.persona, now: 150)
        #expect(try Self.turn(&book, Self.alice, "alice2", at: 151).announce, "a new nickname shows only after an announce")
    }

    @Test("a line follows its persona's announce by half a second (Android may handle a sender's packets out of order), and never overtakes it")
    func linesFollowTheAnnounce() throws {
        var book = PersonaBook(seed: Self.seed)
        let first = try Self.turn(&book, Self.alice, "alice", at: 100)
        #expect(first.announce && first.lineDelayMs == PersonaBook.Limits.announceLeadMs)
        book.announced(first.persona, now: 100)
        #expect(try Self.turn(&book, Self.alice, "alice", at: 100.2).lineDelayMs == 300, "a second line within the lead waits for it too")
        #expect(try Self.turn(&book, Self.alice, "alice", at: 101).lineDelayMs == 0)
    }

    @Test("every persona's nickname is its own on the mesh: two authors of one name, a name a phone or the bridge uses, a rename")
    func nicknamesAreUnique() throws {
        var book = PersonaBook(seed: Self.seed)
        let a = try Self.turn(&book, Self.alice, "sam", at: 0).persona
        let b = try Self.turn(&book, Self.bob, "sam", at: 1).persona
        #expect(a.nickname == "sam@nostr")
        #expect(b.nickname == "sam@nostr#" + String(b.peerID.hex.prefix(4)), "\(b.nickname): Android draws #xxxx dimmed")
        #expect(try Self.turn(&book, Self.alice, "sam", at: 2).persona.nickname == "sam@nostr", "a persona keeps the name it has")
        // A phone on the mesh calls itself sam@nostr: the persona steps aside (and announces its new name).
        let moved = try Self.turn(&book, Self.alice, "sam", at: 3, taken: ["sam@nostr"])
        #expect(moved.persona.nickname == "sam@nostr#" + String(moved.persona.peerID.hex.prefix(4)) && moved.announce)
        // The bridge's own nickname, as a persona's, is taken.
        #expect(try Self.turn(&book, [UInt8](repeating: 3, count: 32), "x", at: 4, taken: ["x@nostr"]).persona.nickname.hasPrefix("x@nostr#"))
        // Bob renames and alice moved off sam@nostr: a third author of that name gets it.
        _ = try Self.turn(&book, Self.bob, "robert", at: 5)
        #expect(try Self.turn(&book, [UInt8](repeating: 4, count: 32), "sam", at: 6).persona.nickname == "sam@nostr")
    }

    @Test func theBookIsBoundedAndDropsTheLeastRecentlyUsed() throws {
        var book = PersonaBook(seed: Self.seed)
        for i in 0..<PersonaBook.Limits.maxPersonas {
            var author = [UInt8](repeating: 0, count: 32)
            author[0] = UInt8(i)
            book.announced(try Self.turn(&book, author, "p\(i)", at: Double(i)).persona, now: Double(i))
        }
        #expect(book.count == PersonaBook.Limits.maxPersonas)
        let newcomer = try Self.turn(&book, Self.bob, "bob", at: 1_000)
        #expect(book.count == PersonaBook.Limits.maxPersonas && newcomer.announce)
        // Author 0 was the least recently used: it comes back derived again, and announces again.
        let returning = try Self.turn(&book, [UInt8](repeating: 0, count: 32), "p0", at: 1_001)
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
        let persona = try Self.turn(&book, Self.alice, "alice", at: 0).persona
        let announce = try PersonaBook.announce(persona, at: 1_000)
        let payload = try AnnouncePayload.decode(announce.payload)
        #expect(payload.nickname == "alice@nostr" && payload.noisePublicKey == persona.noisePublicKey)
        #expect(announce.verifySignature(persona.signingKey.publicKey).isValid && announce.sender == persona.peerID)
        let message = try PersonaBook.message(persona, text: "gig starts", at: 1_001)
        #expect(message.verifySignature(persona.signingKey.publicKey).isValid && message.payload == Array("gig starts".utf8))
    }
}
