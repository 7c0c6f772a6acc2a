import COpenSSL

/// The one place OpenSSL return codes become Swift errors.
enum OpenSSL {
    /// Drains OpenSSL's thread-local error queue into one readable string.
    static func drainErrors() -> String {
        var messages: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            messages.append(buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        return messages.isEmpty ? "no detail" : messages.joined(separator: "; ")
    }

    /// Throws unless `result` is 1 (OpenSSL's success value for EVP calls).
    @inline(__always)
    static func check(_ result: Int32, _ function: String) throws(CryptoError) {
        guard result == 1 else { throw .openssl(function: function, detail: drainErrors()) }
    }

    @inline(__always)
    static func nonNil<T>(_ value: T?, _ function: String) throws(CryptoError) -> T {
        guard let value else { throw .openssl(function: function, detail: drainErrors()) }
        return value
    }
}
