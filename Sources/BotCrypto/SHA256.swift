import COpenSSL

/// SHA-256 fetched from the default provider once per process (an immutable, shareable method object).
nonisolated(unsafe) private let sha256Method: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil) ?? EVP_sha256()

/// SHA-256 (FIPS 180-4) through OpenSSL.
public enum SHA256 {
    public static let byteCount = 32

    /// The 32-byte digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBufferPointer { hash($0) }
    }

    /// The 32-byte digest of the UTF-8 bytes of `text`.
    public static func hash(utf8 text: String) -> [UInt8] {
        var text = text
        return text.withUTF8 { hash($0) }
    }

    public static func hash(_ buffer: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        // EVP_Digest with SHA-256 fetched once: the one-shot `SHA256()` and the legacy `EVP_sha256()` of
        // OpenSSL 3 look the algorithm up on every call, about a quarter of hashing an event. EVP_Digest is
        // stateless and thread-safe; like the one-shot call before, it cannot fail for in-memory input
        // (a failure would leave the digest all zero).
        [UInt8](unsafeUninitializedCapacity: byteCount) { digest, initialized in
            for i in 0..<byteCount { digest[i] = 0 }
            initialized = byteCount
            var length: UInt32 = 0
            _ = EVP_Digest(buffer.baseAddress, buffer.count, digest.baseAddress, &length, sha256Method, nil)
        }
    }

    /// Incremental hashing, for inputs that arrive in pieces.
    public struct Hasher: ~Copyable {
        private let context: OpaquePointer

        public init() {
            context = EVP_MD_CTX_new()
            EVP_DigestInit_ex(context, EVP_sha256(), nil)
        }

        deinit { EVP_MD_CTX_free(context) }

        public mutating func update(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        }

        public consuming func finalize() -> [UInt8] {
            var digest = [UInt8](repeating: 0, count: SHA256.byteCount)
            var length: UInt32 = 0
            EVP_DigestFinal_ex(context, &digest, &length)
            return digest
        }
    }
}

/// SHA-1, for the one place a protocol still asks for it: the WebSocket handshake's `Sec-WebSocket-Accept`
/// (RFC 6455 §4.2.2). Never for anything that must resist collisions.
public enum SHA1 {
    public static let byteCount = 20

    /// The 20-byte digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        bytes.withUnsafeBufferPointer { _ = EVP_Digest($0.baseAddress, $0.count, &digest, &length, EVP_sha1(), nil) }
        return digest
    }
}
