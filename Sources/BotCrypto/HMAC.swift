import COpenSSL

/// HMAC-SHA256 (RFC 2104 / 4231) and HKDF-SHA256 (RFC 5869).
public enum HMACSHA256 {
    /// The 32-byte MAC of `message` under `key`.
    public static func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        key.withUnsafeBufferPointer { k in
            message.withUnsafeBufferPointer { m in
                // A valid digest and in-memory buffers: HMAC() cannot fail here.
                _ = HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress, m.count, &out, &length)
            }
        }
        return out
    }
}

public enum HKDFSHA256 {
    /// Derives `outputByteCount` bytes (≤ 255 × 32) from `inputKeyMaterial`, `salt` and `info`.
    ///
    /// Uses the `EVP_PKEY_CTX_set_hkdf_*` functions rather than `OSSL_PARAM`s: the param route stores the
    /// key-name pointer, and Swift's bridged string literals would dangle (silent wrong output).
    public static func deriveKey(
        inputKeyMaterial: [UInt8],
        salt: [UInt8],
        info: [UInt8],
        outputByteCount: Int
    ) throws(CryptoError) -> [UInt8] {
        guard outputByteCount > 0, outputByteCount <= 255 * 32 else {
            throw .invalidLength(what: "HKDF output", expected: 32, actual: outputByteCount)
        }
        let context = try OpenSSL.nonNil(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nil), "EVP_PKEY_CTX_new_id")
        defer { EVP_PKEY_CTX_free(context) }
        try OpenSSL.check(EVP_PKEY_derive_init(context), "EVP_PKEY_derive_init")
        try OpenSSL.check(EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()), "EVP_PKEY_CTX_set_hkdf_md")
        try OpenSSL.check(
            EVP_PKEY_CTX_set1_hkdf_salt(context, salt, Int32(salt.count)),
            "EVP_PKEY_CTX_set1_hkdf_salt"
        )
        try OpenSSL.check(
            EVP_PKEY_CTX_set1_hkdf_key(context, inputKeyMaterial, Int32(inputKeyMaterial.count)),
            "EVP_PKEY_CTX_set1_hkdf_key"
        )
        try OpenSSL.check(EVP_PKEY_CTX_add1_hkdf_info(context, info, Int32(info.count)), "EVP_PKEY_CTX_add1_hkdf_info")
        var out = [UInt8](repeating: 0, count: outputByteCount)
        var length = outputByteCount
        try OpenSSL.check(EVP_PKEY_derive(context, &out, &length), "EVP_PKEY_derive")
        return out
    }
}
