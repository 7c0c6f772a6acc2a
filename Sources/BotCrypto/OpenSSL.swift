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

/// Process-wide OpenSSL settings the executable applies before anything else touches OpenSSL.
public enum CryptoRuntime {
    /// Tells OpenSSL not to tear itself down in an `atexit` handler. By default the first OpenSSL call
    /// registers `OPENSSL_cleanup`, so `exit()` on the main thread frees OpenSSL's global state while other
    /// threads may still be inside OpenSSL — e.g. a task signing a mesh leave when SIGTERM and the radio
    /// link's end arrive together. That crashed `mesh listen` (SIGSEGV in `EVP_PKEY_new_raw_private_key`
    /// under `OPENSSL_cleanup`, about 1 stop in 10 in the runtime-image check). The kernel reclaims the
    /// memory at exit anyway. Must run before any other OpenSSL call to take effect; returns false if
    /// OpenSSL refused (then the default teardown stays).
    @discardableResult
    public static func skipCleanupAtExit() -> Bool {
        OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil) == 1
    }
}
