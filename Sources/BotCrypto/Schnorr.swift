import BotSupport
import CSecp256k1

/// One process-wide libsecp256k1 context, created once and randomized (side-channel blinding) with
/// fresh bytes. After randomization libsecp256k1 documents it as safe for concurrent sign/verify.
nonisolated(unsafe) private let secpContext: OpaquePointer = {
    guard let context = secp256k1_context_create(UInt32(SECP256K1_CONTEXT_NONE)) else {
        preconditionFailure("secp256k1_context_create failed")
    }
    let seed = SecureRandom.bytes(32)
    precondition(secp256k1_context_randomize(context, seed) == 1, "secp256k1_context_randomize failed")
    return context
}()

/// A secp256k1 secret key for BIP-340 Schnorr signatures (Nostr event signing).
public struct SchnorrSecretKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The 32-byte secret. Never log it; it exists only in memory and derivation.
    public let bytes: [UInt8]
    /// The BIP-340 x-only public key.
    public let publicKey: XOnlyPublicKey
    private let keypair: secp256k1_keypair

    /// Accepts 32 bytes that form a valid secret (1 ≤ k < n).
    public init(bytes: [UInt8]) throws(CryptoError) {
        try requireLength(bytes, 32, "secp256k1 secret key")
        guard secp256k1_ec_seckey_verify(secpContext, bytes) == 1 else { throw .invalidKey("secp256k1 secret key") }
        var keypair = secp256k1_keypair()
        guard secp256k1_keypair_create(secpContext, &keypair, bytes) == 1 else {
            throw .secp256k1(function: "secp256k1_keypair_create")
        }
        var xonly = secp256k1_xonly_pubkey()
        guard secp256k1_keypair_xonly_pub(secpContext, &xonly, nil, &keypair) == 1 else {
            throw .secp256k1(function: "secp256k1_keypair_xonly_pub")
        }
        var serialized = [UInt8](repeating: 0, count: 32)
        guard secp256k1_xonly_pubkey_serialize(secpContext, &serialized, &xonly) == 1 else {
            throw .secp256k1(function: "secp256k1_xonly_pubkey_serialize")
        }
        self.bytes = bytes
        self.keypair = keypair
        self.publicKey = XOnlyPublicKey(parsed: xonly, bytes: serialized)
    }

    /// True when `bytes` is a valid secret key (used by label derivation, which retries on failure).
    public static func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.count == 32 && secp256k1_ec_seckey_verify(secpContext, bytes) == 1
    }

    /// A BIP-340 signature of `message` (any length; Nostr signs the 32-byte event id).
    ///
    /// - Parameter auxiliaryRandomness: 32 bytes of aux randomness; `nil` draws fresh random bytes
    ///   (what phones do). Tests pass fixed bytes to reproduce published vectors.
    public func signature(for message: [UInt8], auxiliaryRandomness: [UInt8]? = nil) throws(CryptoError) -> [UInt8] {
        let aux = auxiliaryRandomness ?? SecureRandom.bytes(32)
        try requireLength(aux, 32, "BIP-340 aux randomness")
        var keypair = self.keypair
        var signature = [UInt8](repeating: 0, count: 64)
        if message.count == 32 {
            guard secp256k1_schnorrsig_sign32(secpContext, &signature, message, &keypair, aux) == 1 else {
                throw .secp256k1(function: "secp256k1_schnorrsig_sign32")
            }
        } else {
            let result = aux.withUnsafeBufferPointer { auxBuffer in
                // SECP256K1_SCHNORRSIG_EXTRAPARAMS_MAGIC is an initializer macro; spelled out here.
                var extra = secp256k1_schnorrsig_extraparams(
                    magic: (0xda, 0x6f, 0xb3, 0x8c),
                    noncefp: nil,
                    ndata: UnsafeMutableRawPointer(mutating: auxBuffer.baseAddress)
                )
                return message.withUnsafeBufferPointer {
                    secp256k1_schnorrsig_sign_custom(
                        secpContext, &signature, $0.baseAddress, $0.count, &keypair, &extra)
                }
            }
            guard result == 1 else { throw .secp256k1(function: "secp256k1_schnorrsig_sign_custom") }
        }
        return signature
    }

    public var description: String { "SchnorrSecretKey(public: \(publicKey))" }
    public var debugDescription: String { description }
}

/// A BIP-340 x-only public key (the Nostr `pubkey`), validated to lie on the curve.
public struct XOnlyPublicKey: Hashable, Sendable, CustomStringConvertible {
    /// The 32-byte big-endian x coordinate.
    public let bytes: [UInt8]
    private let parsed: secp256k1_xonly_pubkey

    /// Parses 32 bytes; throws when they are not the x coordinate of a curve point.
    public init(bytes: [UInt8]) throws(CryptoError) {
        try requireLength(bytes, 32, "x-only public key")
        var parsed = secp256k1_xonly_pubkey()
        guard secp256k1_xonly_pubkey_parse(secpContext, &parsed, bytes) == 1 else {
            throw .invalidKey("x-only public key")
        }
        self.bytes = bytes
        self.parsed = parsed
    }

    /// Parses 64 hex characters (either case).
    public init(hex: String) throws(CryptoError) {
        guard let bytes = try? Hex.decode(hex, expectedCount: 32) else {
            throw .invalidLength(what: "x-only public key hex", expected: 64, actual: hex.utf8.count)
        }
        try self.init(bytes: bytes)
    }

    fileprivate init(parsed: secp256k1_xonly_pubkey, bytes: [UInt8]) {
        self.parsed = parsed
        self.bytes = bytes
    }

    /// Lowercase hex, as Nostr writes it.
    public var hex: String { Hex.encode(bytes) }

    /// True when `signature` is a valid BIP-340 signature of `message`. Malformed input is `false`.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard signature.count == 64 else { return false }
        var parsed = self.parsed
        return message.withUnsafeBufferPointer {
            secp256k1_schnorrsig_verify(secpContext, signature, $0.baseAddress, $0.count, &parsed) == 1
        }
    }

    public static func == (a: XOnlyPublicKey, b: XOnlyPublicKey) -> Bool { a.bytes == b.bytes }
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }

    public var description: String { Hex.encodePrefix(bytes) }
}
