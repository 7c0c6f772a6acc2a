import BotSupport
import COpenSSL

/// An X25519 key-agreement key (RFC 7748): the bitchat Noise static key, held as its 32-byte scalar.
public struct X25519PrivateKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The 32-byte scalar. Secret: write it only to the 0600 key file.
    public let rawRepresentation: [UInt8]
    /// The 32-byte public u-coordinate (announce TLV 0x02).
    public let publicKey: [UInt8]

    public init(rawRepresentation: [UInt8]) throws(CryptoError) {
        try requireLength(rawRepresentation, 32, "X25519 private key")
        self.rawRepresentation = rawRepresentation
        let key = try EVPKey.privateKey(type: EVP_PKEY_X25519, raw: rawRepresentation)
        defer { EVP_PKEY_free(key) }
        self.publicKey = try EVPKey.rawPublicKey(key)
    }

    public static func generate() -> X25519PrivateKey {
        // Any 32 bytes are a valid X25519 scalar (clamping happens inside the function).
        try! X25519PrivateKey(rawRepresentation: SecureRandom.bytes(32))
    }

    /// The 32-byte shared secret with `peerPublicKey`.
    public func sharedSecret(with peerPublicKey: [UInt8]) throws(CryptoError) -> [UInt8] {
        try requireLength(peerPublicKey, 32, "X25519 public key")
        let mine = try EVPKey.privateKey(type: EVP_PKEY_X25519, raw: rawRepresentation)
        defer { EVP_PKEY_free(mine) }
        let theirs = try EVPKey.publicKey(type: EVP_PKEY_X25519, raw: peerPublicKey)
        defer { EVP_PKEY_free(theirs) }
        let context = try OpenSSL.nonNil(EVP_PKEY_CTX_new(mine, nil), "EVP_PKEY_CTX_new")
        defer { EVP_PKEY_CTX_free(context) }
        try OpenSSL.check(EVP_PKEY_derive_init(context), "EVP_PKEY_derive_init")
        try OpenSSL.check(EVP_PKEY_derive_set_peer(context, theirs), "EVP_PKEY_derive_set_peer")
        var out = [UInt8](repeating: 0, count: 32)
        var length = 32
        try OpenSSL.check(EVP_PKEY_derive(context, &out, &length), "EVP_PKEY_derive")
        return out
    }

    public var description: String { "X25519PrivateKey(public: \(Hex.encodePrefix(publicKey)))" }
    public var debugDescription: String { description }
}
