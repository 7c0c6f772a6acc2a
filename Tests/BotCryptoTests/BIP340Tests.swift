import BotCrypto
import BotSupport
import Foundation
import Testing

/// Every vector of the official `bip-0340/test-vectors.csv` (see Fixtures/README.md), including the
/// must-fail ones: signing vectors reproduce the exact signature from the given aux randomness, and
/// verification agrees with the expected result for all 19.
@Suite("BIP-340 Schnorr (all official vectors)")
struct BIP340Tests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let index: Int
        let secretKey: String
        let publicKey: String
        let aux: String
        let message: String
        let signature: String
        let valid: Bool
        let comment: String
        var testDescription: String { "vector \(index)\(comment.isEmpty ? "" : " (\(comment))")" }
    }

    static let vectors: [Vector] = {
        let url = Bundle.module.url(forResource: "bip340-test-vectors", withExtension: "csv", subdirectory: "Fixtures")!
        let text = try! String(contentsOf: url, encoding: .utf8)
        return text.split(separator: "\n").dropFirst().map { line in
            let f = line.split(separator: ",", maxSplits: 7, omittingEmptySubsequences: false).map(String.init)
            return Vector(
                index: Int(f[0])!, secretKey: f[1], publicKey: f[2], aux: f[3], message: f[4], signature: f[5],
                valid: f[6] == "TRUE", comment: f.count > 7 ? f[7] : "")
        }
    }()

    @Test("the fixture holds the 19 current vectors, 10 of them must-fail")
    func fixtureShape() {
        #expect(Self.vectors.count == 19)
        #expect(Self.vectors.filter { !$0.valid }.count == 10)
    }

    @Test("verification matches the expected result", arguments: vectors)
    func verify(_ v: Vector) throws {
        let message = try Hex.decode(v.message)
        let signature = try Hex.decode(v.signature)
        let result: Bool
        do {
            let key = try XOnlyPublicKey(bytes: try Hex.decode(v.publicKey))
            result = key.isValidSignature(signature, for: message)
        } catch {
            // Vectors 5 and 14 carry public keys that are not on the curve: parsing rejects them.
            result = false
        }
        #expect(result == v.valid)
    }

    @Test("signing vectors derive the public key and reproduce the signature", arguments: vectors.filter { !$0.secretKey.isEmpty })
    func sign(_ v: Vector) throws {
        let key = try SchnorrSecretKey(bytes: try Hex.decode(v.secretKey))
        #expect(key.publicKey.hex == v.publicKey.lowercased())
        let signature = try key.signature(for: try Hex.decode(v.message), auxiliaryRandomness: try Hex.decode(v.aux))
        #expect(Hex.encode(signature) == v.signature.lowercased())
    }

    @Test("invalid secret keys are rejected (zero, group order, wrong length)")
    func invalidSecrets() {
        #expect(throws: CryptoError.self) { try SchnorrSecretKey(bytes: [UInt8](repeating: 0, count: 32)) }
        let order = try! Hex.decode("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141")
        #expect(throws: CryptoError.self) { try SchnorrSecretKey(bytes: order) }
        #expect(throws: CryptoError.self) { try SchnorrSecretKey(bytes: [1]) }
        #expect(!SchnorrSecretKey.isValid(order))
    }

    @Test("random aux gives different, valid signatures; secrets never print")
    func randomAux() throws {
        let key = try SchnorrSecretKey(bytes: [UInt8](repeating: 7, count: 32))
        let message = SHA256.hash(utf8: "hello")
        let a = try key.signature(for: message)
        let b = try key.signature(for: message)
        #expect(a != b)
        #expect(key.publicKey.isValidSignature(a, for: message) && key.publicKey.isValidSignature(b, for: message))
        #expect(!key.publicKey.isValidSignature(Array(a.prefix(63)), for: message))
        #expect(!"\(key)".contains("0707070707"))
    }
}
