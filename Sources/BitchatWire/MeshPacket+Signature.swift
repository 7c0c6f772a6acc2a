public import BotCrypto

/// Signing and verification over the §4.3 pre-image.
///
/// Pre-image = the packet re-encoded with TTL 0, no signature (flag 0x02 clear), RSR clear, version,
/// type, timestamp, sender, recipient and route as sent, the payload put through the normal compression
/// decision, then PKCS#7-padded to its bucket.
///
/// Compression trap (§4.4), and what we do about it:
/// - We sign what we send: our own packets go through the standard decision with zlib level 5 / −15 / 8
///   (Apple's documented configuration). Payloads under 100 bytes, or that do not qualify, stay
///   uncompressed — for those, every implementation builds the same pre-image (no residual risk).
/// - Residual risk: a signed payload of ≥ 100 low-entropy bytes (a long chat message) is compressed; an
///   iPhone verifies it only if Apple's encoder produces byte-identical output to Debian's zlib, which is
///   documented but unproven (MESH-WIRE §14.1). Our own announces stay < 100 bytes (no neighbour TLV).
/// - Verifying is tolerant: the pre-image with the received compressed bytes, then re-compressed at level 5,
///   then uncompressed (bitchat-cli never compresses), so any honest signer's packet verifies.
public enum SignatureCheck: Equatable, Sendable {
    /// The packet has no signature.
    case missing
    /// No pre-image variant verifies.
    case invalid
    /// Valid; `variant` names which pre-image matched.
    case valid(Variant)

    public enum Variant: String, Sendable {
        case asReceived, recompressed, uncompressed
    }

    public var isValid: Bool {
        if case .valid = self { return true }
        return false
    }
}

/// Why signing failed.
public enum MeshSigningError: Error, Equatable, Sendable {
    case wire(WireError)
    case crypto(CryptoError)
}

extension MeshPacket {
    /// The §4.3 pre-image under the given compression treatment.
    public func signingBytes(compression: Compression = .standard) throws(WireError) -> [UInt8] {
        var copy = self
        copy.ttl = 0
        copy.signature = nil
        copy.isRSR = false
        return try copy.encode(padding: true, compression: compression)
    }

    /// This packet signed with `key` (Ed25519 over ``signingBytes(compression:)``).
    public func signed(with key: Ed25519PrivateKey) throws(MeshSigningError) -> MeshPacket {
        let preimage: [UInt8]
        do {
            preimage = try signingBytes()
        } catch {
            throw .wire(error)
        }
        var copy = self
        do {
            copy.signature = try key.signature(for: preimage)
        } catch {
            throw .crypto(error)
        }
        return copy
    }

    /// Verifies the signature under `publicKey`, trying the pre-image variants of §4.4 in turn.
    public func verifySignature(_ publicKey: Ed25519PublicKey) -> SignatureCheck {
        guard let signature else { return .missing }
        guard signature.count == Limits.signatureLength else { return .invalid }
        var tried: [[UInt8]] = []
        let variants: [(Compression, SignatureCheck.Variant)] = [
            (.standard, .asReceived), (.recompress, .recompressed), (.none, .uncompressed),
        ]
        for (compression, variant) in variants {
            guard let preimage = try? signingBytes(compression: compression), !tried.contains(preimage) else {
                continue
            }
            if publicKey.isValidSignature(signature, for: preimage) { return .valid(variant) }
            tried.append(preimage)
        }
        return .invalid
    }
}
