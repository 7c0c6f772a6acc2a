import COpenSSL

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
        var digest = [UInt8](repeating: 0, count: byteCount)
        // One-shot SHA256() cannot fail for in-memory input.
        _ = COpenSSL.SHA256(buffer.baseAddress, buffer.count, &digest)
        return digest
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
