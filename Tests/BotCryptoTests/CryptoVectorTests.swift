import BotCrypto
import BotSupport
import Testing

private func hex(_ s: String) -> [UInt8] { try! Hex.decode(s) }

@Suite("SHA-256, HMAC, HKDF")
struct HashVectorTests {
    @Test("FIPS 180-2 SHA-256 examples")
    func sha256() {
        #expect(Hex.encode(SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Hex.encode(SHA256.hash(utf8: "abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        var hasher = SHA256.Hasher()
        hasher.update(Array("a".utf8))
        hasher.update(Array("bc".utf8))
        #expect(Hex.encode(hasher.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test("one-shot hash: two-block FIPS example, and equal to the incremental hasher for 0…300 bytes")
    func sha256OneShotAgreesWithHasher() {
        #expect(
            Hex.encode(SHA256.hash(utf8: "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        var state: UInt64 = 0x7d04
        for count in 0...300 {
            let bytes = (0..<count).map { _ -> UInt8 in
                state = state &* 6364136223846793005 &+ 1442695040888963407
                return UInt8(truncatingIfNeeded: state >> 33)
            }
            var hasher = SHA256.Hasher()
            hasher.update(bytes)
            let incremental = hasher.finalize()
            #expect(SHA256.hash(bytes) == incremental)
        }
    }

    @Test("RFC 4231 §4.2 and §4.3 (test cases 1 and 2)")
    func hmac() {
        let case1 = HMACSHA256.authenticationCode(key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8))
        #expect(Hex.encode(case1) == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        let case2 = HMACSHA256.authenticationCode(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(Hex.encode(case2) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test("RFC 5869 A.1 and A.3")
    func hkdf() throws {
        let a1 = try HKDFSHA256.deriveKey(
            inputKeyMaterial: [UInt8](repeating: 0x0b, count: 22),
            salt: hex("000102030405060708090a0b0c"),
            info: hex("f0f1f2f3f4f5f6f7f8f9"),
            outputByteCount: 42
        )
        #expect(Hex.encode(a1) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        let a3 = try HKDFSHA256.deriveKey(
            inputKeyMaterial: [UInt8](repeating: 0x0b, count: 22), salt: [], info: [], outputByteCount: 42)
        #expect(Hex.encode(a3) == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
    }
}

@Suite("Ed25519 (RFC 8032 §7.1)")
struct Ed25519Tests {
    static let vectors: [(secret: String, public: String, message: String, signature: String)] = [
        (
            "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        ),
        (
            "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
            "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
            "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
        ),
        (
            "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
            "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
            "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"
        ),
    ]

    @Test("TEST 1–3: public key, deterministic signature, verification", arguments: 0..<3)
    func vector(_ index: Int) throws {
        let v = Self.vectors[index]
        let key = try Ed25519PrivateKey(seed: hex(v.secret))
        #expect(Hex.encode(key.publicKey.rawRepresentation) == v.public)
        let signature = try key.signature(for: hex(v.message))
        #expect(Hex.encode(signature) == v.signature)
        #expect(key.publicKey.isValidSignature(signature, for: hex(v.message)))
    }

    @Test("tampered message, signature or key is rejected; malformed input is false, not a trap")
    func rejects() throws {
        let key = try Ed25519PrivateKey(seed: hex(Self.vectors[1].secret))
        let signature = try key.signature(for: [0x72])
        #expect(!key.publicKey.isValidSignature(signature, for: [0x73]))
        var flipped = signature
        flipped[10] ^= 0x01
        #expect(!key.publicKey.isValidSignature(flipped, for: [0x72]))
        #expect(!key.publicKey.isValidSignature(Array(signature.prefix(63)), for: [0x72]))
        let other = try Ed25519PublicKey(rawRepresentation: hex(Self.vectors[0].public))
        #expect(!other.isValidSignature(signature, for: [0x72]))
        #expect(throws: CryptoError.self) { try Ed25519PrivateKey(seed: [1, 2, 3]) }
        #expect(throws: CryptoError.self) { try Ed25519PublicKey(rawRepresentation: [UInt8](repeating: 0, count: 31)) }
    }

    @Test("descriptions never print the secret seed")
    func redaction() throws {
        let key = try Ed25519PrivateKey(seed: hex(Self.vectors[0].secret))
        #expect(!"\(key)".contains("9d61b19d"))
        #expect(!String(reflecting: key).contains("9d61b19d"))
    }
}

@Suite("X25519 (RFC 7748 §6.1)")
struct X25519Tests {
    @Test("Alice and Bob derive the published public keys and shared secret")
    func rfc7748() throws {
        let alice = try X25519PrivateKey(rawRepresentation: hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
        let bob = try X25519PrivateKey(rawRepresentation: hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))
        #expect(Hex.encode(alice.publicKey) == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        #expect(Hex.encode(bob.publicKey) == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        let shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
        #expect(Hex.encode(try alice.sharedSecret(with: bob.publicKey)) == shared)
        #expect(Hex.encode(try bob.sharedSecret(with: alice.publicKey)) == shared)
        #expect(throws: CryptoError.self) { try alice.sharedSecret(with: [1, 2]) }
    }
}

@Suite("ChaCha20-Poly1305 (RFC 8439 §2.8.2)")
struct ChaChaPolyTests {
    let key = hex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
    let nonce = hex("070000004041424344454647")
    let aad = hex("50515253c0c1c2c3c4c5c6c7")
    let plaintext = Array(
        "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it."
            .utf8)
    let expected =
        "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116"
        + "1ae10b594f09e26a7e902ecbd0600691"

    @Test("seal matches the RFC ciphertext and tag; open round-trips")
    func seal() throws {
        let sealed = try ChaChaPoly.seal(plaintext, key: key, nonce: nonce, authenticating: aad)
        #expect(Hex.encode(sealed) == expected)
        #expect(try ChaChaPoly.open(sealed, key: key, nonce: nonce, authenticating: aad) == plaintext)
    }

    @Test("tampered tag, ciphertext or AAD is rejected")
    func tamper() throws {
        let sealed = try ChaChaPoly.seal(plaintext, key: key, nonce: nonce, authenticating: aad)
        for index in [0, sealed.count - 1] {
            var bad = sealed
            bad[index] ^= 0x80
            #expect(throws: CryptoError.authenticationFailed) {
                try ChaChaPoly.open(bad, key: key, nonce: nonce, authenticating: aad)
            }
        }
        #expect(throws: CryptoError.authenticationFailed) {
            try ChaChaPoly.open(sealed, key: key, nonce: nonce, authenticating: [])
        }
        #expect(throws: CryptoError.authenticationFailed) { try ChaChaPoly.open([1, 2], key: key, nonce: nonce) }
    }
}

@Suite("Secure random")
struct SecureRandomTests {
    @Test("returns the requested length and differs between calls")
    func bytes() {
        let a = SecureRandom.bytes(32)
        let b = SecureRandom.bytes(32)
        #expect(a.count == 32 && b.count == 32)
        #expect(a != b)
        #expect(SecureRandom.bytes(0).isEmpty)
    }
}
