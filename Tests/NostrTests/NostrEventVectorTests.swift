import BotCrypto
import BotSupport
import Foundation
import Testing

@testable import Nostr

/// NOSTR-GEO §13.2: keys, canonical bytes, ids and signatures (aux randomness = 32 zero bytes).
@Suite("NIP-01 events: NOSTR-GEO §13 vectors")
struct NostrEventVectorTests {
    static let seed = (0..<32).map { UInt8($0) }
    static let zeroAux = [UInt8](repeating: 0, count: 32)

    static func key(_ label: String) throws -> SchnorrSecretKey {
        try NostrKeyDerivation.secretKey(seed: seed, label: label)
    }

    struct KeyVector: Sendable {
        let label: String, secret: String, pubkey: String, npub: String
    }

    @Test(arguments: [
        KeyVector(label: "u4pruy", secret: "8a6077fa211f5edd2480c33e53e2fa334b679b43b833ff9885d92bd4aed14e6c",
                  pubkey: "c4607abb02b2f7fb2b775f7137fde98182397684ca00c993793f574178977c66",
                  npub: "npub1c3s84wczktmlk2mhtacn0l0fsxprja5yegqvnyme8at5z7yh03nqxneq2r"),
        KeyVector(label: "bridge|u4pruy", secret: "0867663fa69a705bae2b33e3e22c71b00994c18516a90401a50ffc96b388ea16",
                  pubkey: "94ea4d35fb35a3487b07f4465f77e902411be809d0960ce104b1ad1b98412f2d",
                  npub: "npub1jn4y6d0mxk35s7c873r97alfqfq3h6qf6ztqecgykxk3hxzp9uks4jpzp8"),
        KeyVector(label: "9q8yy", secret: "acc10d6d715537e9b172fa3528d1bd855819c870f61012e194d221d4cb81cc9d",
                  pubkey: "ad81f34942c33c34c169d255c89da40f563573747f55073503203a20e0261acc",
                  npub: "npub14kqlxj2zcv7rfstf6f2u38dypatr2um50a2swdgryqazpcpxrtxqlj7fkx"),
        KeyVector(label: "dr5r7p4r", secret: "7591f5c568050ff441ce49b4d43f41e34794fc6485da3a9d98cabd4afe1df489",
                  pubkey: "3f6b24a06789cd6902a366f2557d47892a5f7829a69f9aedc3cd0edc3ba9e1f7",
                  npub: "npub18a4jfgr838xkjq4rvme92l283y4977pf560e4mwre58dcwafu8msvzk2rc"),
    ])
    func keyDerivation(_ vector: KeyVector) throws {
        let key = try Self.key(vector.label)
        #expect(Hex.encode(key.bytes) == vector.secret)
        #expect(key.publicKey.hex == vector.pubkey)
        #expect(NIP19.npub(key.publicKey) == vector.npub)
    }

    @Test func mirrorLabelIsDisjointFromPhoneLabels() throws {
        let label = NostrKeyDerivation.mirrorAuthorLabel(fingerprint: "ab12", geohash: "u4pruy")
        #expect(label == "mesh|ab12|u4pruy")
        #expect(try Self.key(label).publicKey != Self.key("u4pruy").publicKey)
    }

    struct EventVector: Sendable {
        let label: String, createdAt: Int64, kind: Int, tags: [[String]], content: String, id: String, sig: String
    }

    static let events: [EventVector] = [
        EventVector(label: "u4pruy", createdAt: 1_700_000_000, kind: 20000, tags: [["g", "u4pruy"], ["n", "bridgebot"]],
                    content: "hello from the bridge",
                    id: "8e4d548261e64882165a00a106fe8bc72a66e6231ea63815c9defb314388dcb8",
                    sig: "45634012df933c798f42e0590efe7a22432f2834a8e5f22489e3810a3d7d38a73d08804ab5a83d960c96a9603ef734115c7525f32efa39dd7be334fff57a3421"),
        EventVector(label: "9q8yy", createdAt: 1_700_000_000, kind: 20001, tags: [["g", "9q8yy"]], content: "",
                    id: "ccf5683315280abd63c0ec0c527f12f3f21f86db7f85f7cd717bbc7be8ae4fa3",
                    sig: "9cb9ad63221ff84aa814dc5db63da5169d3ae8f8122103d2eb4493998709c1488a5c3d57b947987826e2dd274cad65d54047cde0894ba5afeabe7d299a609618"),
        EventVector(label: "u4pruy", createdAt: 1_700_000_000, kind: 20000,
                    tags: [["g", "u4pruy"], ["n", "bridgebot"], ["t", "teleport"]], content: "teleported hi",
                    id: "5f603575d2736aceb571a27db6de4a56dbe91e5a78bacb1eda96406f9594bafe",
                    sig: "97580ddeb275db593aec588de2cec12050a4f2dccb5fed6a43146fb490999187f0b21b7fec8c3e9e40bdef85a5304c0c64bfd9003f9540542fc1fd5a96073153"),
        EventVector(label: "bridge|u4pruy", createdAt: 1_750_000_000, kind: 20000,
                    tags: [["r", "u4pruy"], ["n", "bridgebot"],
                           ["m", "b83f94d81dcdd1b0c0048f6645995dd4", "0011223344556677", "1750000000123"]],
                    content: "hello mesh",
                    id: "f41c4a50137d12372d0ab2ab69164d3b7e72892983bc5736d674273c14baf9e9",
                    sig: "dc635526ee7084c2b6a56847f9f5e9395f81e60367b37f27bad6939ac990cae0cf8717311f5d235e99b6c1c4607098a1824bdb09f1bdae9be74673695c0f6d23"),
        EventVector(label: "bridge|u4pruy", createdAt: 1_750_000_000, kind: 20001, tags: [["r", "u4pruy"]], content: "",
                    id: "661cc0a01aff093f3e50eaaeef19ade845ace0930fd3c0f81e4e21f29508c13f",
                    sig: "43518305aae21c6121547d75841b37fcb2015d148494d652d3eebf9b867a84069a8feddcbc3dfef5ae03da97fa79e2588c7b247856802c0aecd00e9b4f53c419"),
        EventVector(label: "u4pruy", createdAt: 1_700_000_000, kind: 20000, tags: [["g", "u4pruy"]],
                    content: "line1\nq\"uote\\ tab\t url http://x.y/z é 😀",
                    id: "530a20501680d40a98aed694949f83c5a147a76823b6663847eb4422381b38c9",
                    sig: "9dd8380961f8b52a6e0559a097a27413bdb567818ee993a5379b0fbc023cc0e6382ffdf289b320f5ed03204bf6a8f3d3e3406eb2fbab92a30eace7f6b62b952d"),
    ]

    @Test(arguments: events)
    func signedEventMatchesVector(_ vector: EventVector) throws {
        let key = try Self.key(vector.label)
        let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: vector.createdAt, kind: vector.kind,
                                     tags: vector.tags, content: vector.content)
        let event = try unsigned.signed(with: key, auxiliaryRandomness: Self.zeroAux)
        #expect(event.id.hex == vector.id)
        #expect(event.signature.hex == vector.sig)
        // And the wire form parses back and verifies.
        let parsed = try UnverifiedEvent(json: event.json)
        #expect(try parsed.verified() == event)
    }

    @Test func canonicalBytesOfChannelChat() throws {
        let key = try Self.key("u4pruy")
        let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: 1_700_000_000, kind: 20000,
                                     tags: [["g", "u4pruy"], ["n", "bridgebot"]], content: "hello from the bridge")
        #expect(String(decoding: unsigned.canonicalBytes, as: UTF8.self)
            == #"[0,"c4607abb02b2f7fb2b775f7137fde98182397684ca00c993793f574178977c66",1700000000,20000,[["g","u4pruy"],["n","bridgebot"]],"hello from the bridge"]"#)
    }

    @Test func escapingVectorContentPart() throws {
        let key = try Self.key("u4pruy")
        let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: 1_700_000_000, kind: 20000,
                                     tags: [["g", "u4pruy"]], content: "line1\nq\"uote\\ tab\t url http://x.y/z é 😀")
        let text = String(decoding: unsigned.canonicalBytes, as: UTF8.self)
        #expect(text.hasSuffix(#","line1\nq\"uote\\ tab\t url http://x.y/z é 😀"]"#))
    }

    @Test func controlCharactersUseShortOrLowercaseEscapes() throws {
        let key = try Self.key("u4pruy")
        let content = "\u{0}\u{1}\u{8}\u{c}\u{1f}\u{7f}\u{2028}/"
        let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: 0, kind: 1, tags: [], content: content)
        let text = String(decoding: unsigned.canonicalBytes, as: UTF8.self)
        #expect(text.hasSuffix("\"\\u0000\\u0001\\b\\f\\u001f\u{7f}\u{2028}/\"]"))
    }

    @Test func tamperedContentFailsTheIDCheck() throws {
        let key = try Self.key("u4pruy")
        let event = try UnsignedEvent(pubkey: key.publicKey, createdAt: 1, kind: 20000, tags: [], content: "a")
            .signed(with: key)
        let tampered = event.json.replacingOccurrences(of: "\"content\":\"a\"", with: "\"content\":\"b\"")
        #expect(throws: NostrError.idMismatch) { try UnverifiedEvent(json: tampered).verified() }
    }

    @Test func wrongKeyRefusesToSign() throws {
        let unsigned = UnsignedEvent(pubkey: try Self.key("a").publicKey, createdAt: 1, kind: 1, tags: [], content: "")
        #expect(throws: CryptoError.self) { try unsigned.signed(with: Self.key("b")) }
    }
}

