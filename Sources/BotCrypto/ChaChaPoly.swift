import COpenSSL

/// ChaCha20-Poly1305 AEAD (RFC 8439): 32-byte key, 12-byte nonce, 16-byte tag appended to the ciphertext.
public enum ChaChaPoly {
    public static let tagByteCount = 16
    /// RFC 8439 §2.8: the AEAD takes a 256-bit key.
    public static let keyByteCount = 32
    /// RFC 8439 §2.8: the IETF variant's 96-bit nonce.
    public static let nonceByteCount = 12

    /// Encrypts and authenticates; returns ciphertext ‖ tag.
    public static func seal(
        _ plaintext: [UInt8],
        key: [UInt8],
        nonce: [UInt8],
        authenticating aad: [UInt8] = []
    ) throws(CryptoError) -> [UInt8] {
        try requireKeyAndNonce(key, nonce)
        let context = try OpenSSL.nonNil(EVP_CIPHER_CTX_new(), "EVP_CIPHER_CTX_new")
        defer { EVP_CIPHER_CTX_free(context) }
        try OpenSSL.check(EVP_EncryptInit_ex(context, EVP_chacha20_poly1305(), nil, nil, nil), "EVP_EncryptInit_ex")
        try OpenSSL.check(EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_IVLEN, 12, nil), "EVP_CIPHER_CTX_ctrl")
        try OpenSSL.check(EVP_EncryptInit_ex(context, nil, nil, key, nonce), "EVP_EncryptInit_ex")
        var length: Int32 = 0
        if !aad.isEmpty {
            try OpenSSL.check(EVP_EncryptUpdate(context, nil, &length, aad, Int32(aad.count)), "EVP_EncryptUpdate")
        }
        var out = [UInt8](repeating: 0, count: plaintext.count + tagByteCount)
        var written: Int32 = 0
        if !plaintext.isEmpty {
            try OpenSSL.check(
                EVP_EncryptUpdate(context, &out, &written, plaintext, Int32(plaintext.count)),
                "EVP_EncryptUpdate"
            )
        }
        var tail: Int32 = 0
        try out.withUnsafeMutableBufferPointer { (buffer) throws(CryptoError) in
            try OpenSSL.check(
                EVP_EncryptFinal_ex(context, buffer.baseAddress! + Int(written), &tail),
                "EVP_EncryptFinal_ex"
            )
            try OpenSSL.check(
                EVP_CIPHER_CTX_ctrl(
                    context,
                    EVP_CTRL_AEAD_GET_TAG,
                    Int32(tagByteCount),
                    buffer.baseAddress! + plaintext.count
                ),
                "EVP_CIPHER_CTX_ctrl"
            )
        }
        return out
    }

    /// Verifies the tag and decrypts; throws ``CryptoError/authenticationFailed`` on any tampering.
    public static func open(
        _ sealed: [UInt8],
        key: [UInt8],
        nonce: [UInt8],
        authenticating aad: [UInt8] = []
    ) throws(CryptoError) -> [UInt8] {
        try requireKeyAndNonce(key, nonce)
        guard sealed.count >= tagByteCount else { throw .authenticationFailed }
        let ciphertext = Array(sealed[..<(sealed.count - tagByteCount)])
        var tag = Array(sealed[(sealed.count - tagByteCount)...])
        let context = try OpenSSL.nonNil(EVP_CIPHER_CTX_new(), "EVP_CIPHER_CTX_new")
        defer { EVP_CIPHER_CTX_free(context) }
        try OpenSSL.check(EVP_DecryptInit_ex(context, EVP_chacha20_poly1305(), nil, nil, nil), "EVP_DecryptInit_ex")
        try OpenSSL.check(EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_IVLEN, 12, nil), "EVP_CIPHER_CTX_ctrl")
        try OpenSSL.check(EVP_DecryptInit_ex(context, nil, nil, key, nonce), "EVP_DecryptInit_ex")
        var length: Int32 = 0
        if !aad.isEmpty {
            try OpenSSL.check(EVP_DecryptUpdate(context, nil, &length, aad, Int32(aad.count)), "EVP_DecryptUpdate")
        }
        var out = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var written: Int32 = 0
        if !ciphertext.isEmpty {
            try OpenSSL.check(
                EVP_DecryptUpdate(context, &out, &written, ciphertext, Int32(ciphertext.count)),
                "EVP_DecryptUpdate"
            )
        }
        try OpenSSL.check(
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(tagByteCount), &tag),
            "EVP_CIPHER_CTX_ctrl"
        )
        var tail: Int32 = 0
        let finalResult = out.withUnsafeMutableBufferPointer {
            EVP_DecryptFinal_ex(context, $0.baseAddress! + Int(written), &tail)
        }
        guard finalResult == 1 else {
            _ = OpenSSL.drainErrors()
            throw .authenticationFailed
        }
        return Array(out[..<Int(written + tail)])
    }

    /// The one check of both directions: a key and a nonce of the lengths RFC 8439 fixes.
    private static func requireKeyAndNonce(_ key: [UInt8], _ nonce: [UInt8]) throws(CryptoError) {
        try requireLength(key, keyByteCount, "ChaCha20-Poly1305 key")
        try requireLength(nonce, nonceByteCount, "ChaCha20-Poly1305 nonce")
    }
}
