/// A failure in one of the crypto libraries, keeping the C function's name.
public enum CryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// An OpenSSL call failed; `detail` is the drained OpenSSL error queue.
    case openssl(function: String, detail: String)
    /// A libsecp256k1 call returned 0.
    case secp256k1(function: String)
    /// Input of the wrong size for the primitive.
    case invalidLength(what: String, expected: Int, actual: Int)
    /// A key that is not valid for its curve (zero, ≥ group order, not on the curve).
    case invalidKey(String)
    /// An AEAD tag did not verify.
    case authenticationFailed

    public var description: String {
        switch self {
        case .openssl(let function, let detail): "OpenSSL \(function) failed: \(detail)"
        case .secp256k1(let function): "libsecp256k1 \(function) failed"
        case .invalidLength(let what, let expected, let actual): "\(what) must be \(expected) bytes, got \(actual)"
        case .invalidKey(let what): "invalid \(what)"
        case .authenticationFailed: "authentication tag mismatch"
        }
    }
}

@inline(__always)
func requireLength(_ bytes: [UInt8], _ expected: Int, _ what: String) throws(CryptoError) {
    guard bytes.count == expected else { throw .invalidLength(what: what, expected: expected, actual: bytes.count) }
}
