/// Why a bitchat frame or payload was rejected. Every decoder in this module throws one of these; none
/// returns nil or traps on untrusted bytes. ``name`` is a stable short identifier for drop counters.
public enum WireError: Error, Equatable, Hashable, Sendable, CustomStringConvertible {
    /// Fewer bytes than the smallest possible frame (22, or 24 for v2).
    case frameTooShort(Int)
    /// Version byte other than 1 or 2.
    case unsupportedVersion(UInt8)
    /// A field runs past the end of the buffer.
    case truncated(field: Field, needed: Int, available: Int)
    /// payloadLength (or a compressed original size) above ``MeshPacket/Limits/maxPayloadLength``.
    case payloadTooLarge(Int)
    /// Compressed flag set but the payload region cannot hold the original-size field plus a body.
    case compressedBodyMissing
    /// originalSize / compressedSize above ``MeshPacket/Limits/maxCompressionRatio``.
    case compressionRatioTooHigh
    /// The deflate stream is corrupt, truncated, has trailing bytes or inflates to more than declared.
    case inflateFailed
    /// Inflated length differs from the declared original size.
    case originalSizeMismatch(declared: Int, actual: Int)
    /// Encoding: the payload does not fit the version's length field (v1: 65 535).
    case payloadTooLargeForVersion(Int)
    /// Encoding: more than 255 route hops.
    case routeTooLong(Int)
    /// A TLV's length runs past the end of its payload.
    case tlvOverrun(type: UInt8)
    /// A required TLV is absent.
    case missingTLV(UInt8)
    /// A field has a length outside what the spec allows.
    case invalidLength(field: Field, length: Int)
    /// A text field is not valid UTF-8.
    case invalidUTF8(field: Field)
    /// A field holds a value the spec does not define (direction, P parameter, …).
    case invalidValue(field: Field, value: Int)
    /// Bytes remain after the last element where the format forbids it.
    case trailingBytes(Int)
    /// The packet type is not the one the payload decoder expects.
    case wrongType(UInt8)

    /// Which field a reason refers to.
    public enum Field: String, Sendable, Hashable {
        case header, sender, recipient, routeCount, route, payload, originalSize, signature
        case nickname, noisePublicKey, signingPublicKey, geohash, eventJSON, direction
        case fragmentHeader, fragmentIndex, fragmentTotal
        case syncP, syncM, syncData, syncTypes, syncSince
        case boardKind, postID, boardGeohash, content, authorKey, authorNickname, createdAt, expiresAt, boardFlags
        case boardSignature, deletedAt, lifetime
        case text
        case recipientTag, expiry, ciphertext, copies, prekeyID
    }

    /// A stable short name for counting drops by reason.
    public var name: String {
        switch self {
        case .frameTooShort: "frameTooShort"
        case .unsupportedVersion: "unsupportedVersion"
        case .truncated(let field, _, _): "truncated.\(field.rawValue)"
        case .payloadTooLarge: "payloadTooLarge"
        case .compressedBodyMissing: "compressedBodyMissing"
        case .compressionRatioTooHigh: "compressionRatioTooHigh"
        case .inflateFailed: "inflateFailed"
        case .originalSizeMismatch: "originalSizeMismatch"
        case .payloadTooLargeForVersion: "payloadTooLargeForVersion"
        case .routeTooLong: "routeTooLong"
        case .tlvOverrun: "tlvOverrun"
        case .missingTLV(let type): "missingTLV.\(type)"
        case .invalidLength(let field, _): "invalidLength.\(field.rawValue)"
        case .invalidUTF8(let field): "invalidUTF8.\(field.rawValue)"
        case .invalidValue(let field, _): "invalidValue.\(field.rawValue)"
        case .trailingBytes: "trailingBytes"
        case .wrongType: "wrongType"
        }
    }

    public var description: String {
        switch self {
        case .frameTooShort(let n): "frame of \(n) bytes is shorter than the minimum"
        case .unsupportedVersion(let v): "unsupported version \(v)"
        case .truncated(let field, let needed, let available):
            "\(field.rawValue) needs \(needed) bytes, \(available) available"
        case .payloadTooLarge(let n): "payload length \(n) exceeds the cap"
        case .compressedBodyMissing: "compressed payload without body"
        case .compressionRatioTooHigh: "compression ratio above the cap"
        case .inflateFailed: "deflate stream does not inflate cleanly"
        case .originalSizeMismatch(let declared, let actual): "inflated \(actual) bytes, declared \(declared)"
        case .payloadTooLargeForVersion(let n): "payload of \(n) bytes does not fit this version's length field"
        case .routeTooLong(let n): "route of \(n) hops exceeds 255"
        case .tlvOverrun(let type): "TLV 0x\(String(type, radix: 16)) runs past the end"
        case .missingTLV(let type): "required TLV 0x\(String(type, radix: 16)) missing"
        case .invalidLength(let field, let length): "\(field.rawValue) has invalid length \(length)"
        case .invalidUTF8(let field): "\(field.rawValue) is not valid UTF-8"
        case .invalidValue(let field, let value): "\(field.rawValue) has invalid value \(value)"
        case .trailingBytes(let n): "\(n) trailing bytes"
        case .wrongType(let t): "unexpected packet type 0x\(String(t, radix: 16))"
        }
    }
}
