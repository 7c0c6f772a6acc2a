import BotSupport
import COpenSSL

/// An Ed25519 signing key (RFC 8032, pure, no context) held as its 32-byte seed — the form bitchat
/// phones store and the form our key file keeps.
public struct Ed25519PrivateKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The 32-byte seed. Secret: write it only to the 0600 key file.
    public let seed: [UInt8]
    /// The matching public key.
    public let publicKey: Ed25519PublicKey

    public init(seed: [UInt8]) throws(CryptoError) {
        try requireLength(seed, 32, "Ed25519 seed")
        self.seed = seed
        let key = try EVPKey.privateKey(type: EVP_PKEY_ED25519, raw: seed)
        defer { EVP_PKEY_free(key) }
        self.publicKey = Ed25519PublicKey(unchecked: try EVPKey.rawPublicKey(key))
    }

    /// A fresh random key.
    public static func generate() -> Ed25519PrivateKey {
        // 32 random bytes are always a valid Ed25519 seed.
        try! Ed25519PrivateKey(seed: SecureRandom.bytes(32))
    }

    /// The 64-byte signature of `message`.
    public func signature(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let key = try EVPKey.privateKey(type: EVP_PKEY_ED25519, raw: seed)
        defer { EVP_PKEY_free(key) }
        let context = try OpenSSL.nonNil(EVP_MD_CTX_new(), "EVP_MD_CTX_new")
        defer { EVP_MD_CTX_free(context) }
        try OpenSSL.check(EVP_DigestSignInit(context, nil, nil, nil, key), "EVP_DigestSignInit")
        var signature = [UInt8](repeating: 0, count: 64)
        var length = 64
        // Ed25519 has no update/final: one-shot only.
        try OpenSSL.check(
            message.withUnsafeBufferPointer { EVP_DigestSign(context, &signature, &length, $0.baseAddress, $0.count) },
            "EVP_DigestSign"
        )
        return signature
    }

    public var description: String { "Ed25519PrivateKey(public: \(publicKey))" }
    public var debugDescription: String { description }
}

/// An Ed25519 public key: the 32-byte RFC 8032 encoding (announce TLV 0x03).
public struct Ed25519PublicKey: Hashable, Sendable, CustomStringConvertible {
    public let rawRepresentation: [UInt8]

    public init(rawRepresentation: [UInt8]) throws(CryptoError) {
        try requireLength(rawRepresentation, 32, "Ed25519 public key")
        self.rawRepresentation = rawRepresentation
    }

    init(unchecked raw: [UInt8]) { rawRepresentation = raw }

    /// True when `signature` is a valid signature of `message` under this key. Malformed input is `false`.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard signature.count == 64,
            let key = try? EVPKey.publicKey(type: EVP_PKEY_ED25519, raw: rawRepresentation)
        else {
            _ = OpenSSL.drainErrors()
            return false
        }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else {
            _ = OpenSSL.drainErrors()
            return false
        }
        let result = message.withUnsafeBufferPointer {
            EVP_DigestVerify(context, signature, 64, $0.baseAddress, $0.count)
        }
        if result != 1 { _ = OpenSSL.drainErrors() }
        return result == 1
    }

    public var description: String { String(Hex.encodePrefix(rawRepresentation)) }
}

/// Raw-key EVP_PKEY helpers shared by Ed25519 and X25519.
enum EVPKey {
    static func privateKey(type: Int32, raw: [UInt8]) throws(CryptoError) -> OpaquePointer {
        try OpenSSL.nonNil(
            raw.withUnsafeBufferPointer { EVP_PKEY_new_raw_private_key(type, nil, $0.baseAddress, $0.count) },
            "EVP_PKEY_new_raw_private_key"
        )
    }

    static func publicKey(type: Int32, raw: [UInt8]) throws(CryptoError) -> OpaquePointer {
        try OpenSSL.nonNil(
            raw.withUnsafeBufferPointer { EVP_PKEY_new_raw_public_key(type, nil, $0.baseAddress, $0.count) },
            "EVP_PKEY_new_raw_public_key"
        )
    }

    static func rawPublicKey(_ key: OpaquePointer) throws(CryptoError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length = 32
        try OpenSSL.check(EVP_PKEY_get_raw_public_key(key, &out, &length), "EVP_PKEY_get_raw_public_key")
        return out
    }
}

extension Hex {
    /// The first 8 hex characters and an ellipsis: how public keys print in logs.
    static func encodePrefix(_ bytes: [UInt8]) -> String {
        Hex.encode(bytes.prefix(4)) + "…"
    }
}
