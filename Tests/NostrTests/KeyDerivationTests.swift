import BotCrypto
import BotSupport
import Nostr
import Testing

/// NOSTR-GEO §13.2 key derivation: seed = bytes 0x00…0x1f.
@Suite("Per-label key derivation and NIP-19")
struct KeyDerivationTests {
    static let seed = (0..<32).map { UInt8($0) }

    @Test(
        "labels derive the published private key, x-only key and npub",
        arguments: [
            ("u4pruy", "8a6077fa211f5edd2480c33e53e2fa334b679b43b833ff9885d92bd4aed14e6c",
             "c4607abb02b2f7fb2b775f7137fde98182397684ca00c993793f574178977c66",
             "npub1c3s84wczktmlk2mhtacn0l0fsxprja5yegqvnyme8at5z7yh03nqxneq2r"),
            ("bridge|u4pruy", "0867663fa69a705bae2b33e3e22c71b00994c18516a90401a50ffc96b388ea16",
             "94ea4d35fb35a3487b07f4465f77e902411be809d0960ce104b1ad1b98412f2d",
             "npub1jn4y6d0mxk35s7c873r97alfqfq3h6qf6ztqecgykxk3hxzp9uks4jpzp8"),
            ("9q8yy", "acc10d6d715537e9b172fa3528d1bd855819c870f61012e194d221d4cb81cc9d",
             "ad81f34942c33c34c169d255c89da40f563573747f55073503203a20e0261acc",
             "npub14kqlxj2zcv7rfstf6f2u38dypatr2um50a2swdgryqazpcpxrtxqlj7fkx"),
            ("dr5r7p4r", "7591f5c568050ff441ce49b4d43f41e34794fc6485da3a9d98cabd4afe1df489",
             "3f6b24a06789cd6902a366f2557d47892a5f7829a69f9aedc3cd0edc3ba9e1f7",
             "npub18a4jfgr838xkjq4rvme92l283y4977pf560e4mwre58dcwafu8msvzk2rc"),
        ])
    func derive(label: String, secret: String, pubkey: String, npub: String) throws {
        let key = try NostrKeyDerivation.secretKey(seed: Self.seed, label: label)
        #expect(Hex.encode(key.bytes) == secret)
        #expect(key.publicKey.hex == pubkey)
        #expect(NIP19.npub(key.publicKey) == npub)
        #expect(try NIP19.publicKey(npub: npub) == key.publicKey)
    }

    @Test("labels: channel = geohash, rendezvous = bridge|cell, mirror is disjoint from phone labels")
    func labels() throws {
        #expect(NostrKeyDerivation.channelLabel(geohash: "u4pruy") == "u4pruy")
        #expect(NostrKeyDerivation.rendezvousLabel(cell: "u4pruy") == "bridge|u4pruy")
        let mirror = NostrKeyDerivation.mirrorAuthorLabel(fingerprint: "ab", geohash: "u4pruy")
        #expect(mirror == "mesh|ab|u4pruy")
        #expect(try NostrKeyDerivation.secretKey(seed: Self.seed, label: mirror).publicKey
            != NostrKeyDerivation.secretKey(seed: Self.seed, label: "u4pruy").publicKey)
    }

    @Test("a seed of the wrong length is an error")
    func badSeed() {
        #expect(throws: CryptoError.self) { try NostrKeyDerivation.secretKey(seed: [1, 2, 3], label: "u4pruy") }
    }

    @Test("bech32 rejects bad checksums, mixed case, wrong prefixes and lengths")
    func bech32() {
        let npub = "npub1c3s84wczktmlk2mhtacn0l0fsxprja5yegqvnyme8at5z7yh03nqxneq2r"
        #expect(throws: Bech32.DecodeError.badChecksum) { try Bech32.decode(String(npub.dropLast()) + "q") }
        #expect(throws: Bech32.DecodeError.mixedCase) { try Bech32.decode("Npub1" + npub.dropFirst(5)) }
        #expect(throws: Bech32.DecodeError.wrongPrefix(expected: "nsec", actual: "npub")) {
            try Bech32.decodeKey(npub, hrp: "nsec")
        }
        let short = Bech32.encode(hrp: "npub", data: [1, 2, 3])
        #expect(throws: Bech32.DecodeError.wrongLength(expected: 32, actual: 3)) { try Bech32.decodeKey(short, hrp: "npub") }
        #expect(throws: Bech32.DecodeError.invalidCharacter("b")) { try Bech32.decode("npub1bbbbbbbb") }
        // Upper case as a whole is valid bech32.
        #expect((try? Bech32.decode(npub.uppercased()))?.data.count == 32)
    }
}
