public import BotSupport

/// Every reason the `Nostr` module rejects input. Closed, so callers can count drops per case.
///
/// Names are stable: they appear as `drop.reason` in logs and in the operator tools' output
/// (``NostrError/name``).
public enum NostrError: Error, Equatable, Sendable, CustomStringConvertible {
    // Frame gate (NOSTR-GEO §5.5 step 1).
    /// The text frame is larger than ``RelayMessage/Limits/maxFrameBytes``.
    case frameTooLarge(bytes: Int)
    /// Not valid JSON (truncated, bad escape, control character, …).
    case invalidJSON(JSONParseError)
    /// Valid JSON but not an array whose first element is a string verb.
    case notAMessageArray
    /// A verb we do not know.
    case unknownVerb(String)
    /// A known verb with the wrong number of elements.
    case wrongArity(verb: String, count: Int)
    /// A message or event field of the wrong JSON type.
    case wrongType(field: String)

    // Event parse (§5.5 step 2).
    case missingField(String)
    /// An integer field outside its range (`created_at` < 0, `kind` > 65535).
    case outOfRange(field: String)
    /// A hex field that is not lowercase hex of the right length (`id`, `pubkey`, `sig`).
    case invalidHex(field: String)
    /// More than ``UnverifiedEvent/Limits/maxTags`` tags.
    case tooManyTags(Int)
    /// A tag with more than ``UnverifiedEvent/Limits/maxTagElements`` elements.
    case tooManyTagElements(Int)
    /// A tag element longer than ``UnverifiedEvent/Limits/maxTagElementBytes`` UTF-8 bytes.
    case tagElementTooLong(bytes: Int)

    // Verification (§2.4).
    /// The recomputed id differs from the claimed one (tampered or non-canonical event).
    case idMismatch
    /// `pubkey` is not an x coordinate on secp256k1.
    case invalidPublicKey
    /// The BIP-340 signature does not verify.
    case badSignature
    /// The verification budget is spent; the event was dropped before Schnorr.
    case overBudget

    // Mining.
    /// NIP-13 target outside 0…256.
    case invalidTarget(Int)
    /// Mining was cancelled by its progress callback.
    case miningCancelled(attempts: UInt64)

    /// A short stable name for logs and counters (`frame_too_large`, `id_mismatch`, …).
    public var name: String {
        switch self {
        case .frameTooLarge: "frame_too_large"
        case .invalidJSON: "invalid_json"
        case .notAMessageArray: "not_a_message_array"
        case .unknownVerb: "unknown_verb"
        case .wrongArity: "wrong_arity"
        case .wrongType: "wrong_type"
        case .missingField: "missing_field"
        case .outOfRange: "out_of_range"
        case .invalidHex: "invalid_hex"
        case .tooManyTags: "too_many_tags"
        case .tooManyTagElements: "too_many_tag_elements"
        case .tagElementTooLong: "tag_element_too_long"
        case .idMismatch: "id_mismatch"
        case .invalidPublicKey: "invalid_public_key"
        case .badSignature: "bad_signature"
        case .overBudget: "over_budget"
        case .invalidTarget: "invalid_target"
        case .miningCancelled: "mining_cancelled"
        }
    }

    public var description: String {
        switch self {
        case .frameTooLarge(let bytes): "frame of \(bytes) bytes exceeds \(RelayMessage.Limits.maxFrameBytes)"
        case .invalidJSON(let error): "invalid JSON: \(error)"
        case .notAMessageArray: "not a JSON array starting with a verb"
        case .unknownVerb(let verb): "unknown verb \(verb)"
        case .wrongArity(let verb, let count): "\(verb) message with \(count) elements"
        case .wrongType(let field): "\(field) has the wrong JSON type"
        case .missingField(let field): "missing field \(field)"
        case .outOfRange(let field): "\(field) out of range"
        case .invalidHex(let field): "\(field) is not lowercase hex of the right length"
        case .tooManyTags(let n): "\(n) tags (limit \(UnverifiedEvent.Limits.maxTags))"
        case .tooManyTagElements(let n): "tag with \(n) elements (limit \(UnverifiedEvent.Limits.maxTagElements))"
        case .tagElementTooLong(let bytes):
            "tag element of \(bytes) bytes (limit \(UnverifiedEvent.Limits.maxTagElementBytes))"
        case .idMismatch: "event id does not match its content"
        case .invalidPublicKey: "pubkey is not a valid x-only key"
        case .badSignature: "signature does not verify"
        case .overBudget: "verification budget exhausted"
        case .invalidTarget(let t): "PoW target \(t) outside 0…256"
        case .miningCancelled(let attempts): "mining cancelled after \(attempts) attempts"
        }
    }
}
