import Foundation

/// Throw-away certificates made by the `openssl` CLI inside the test, valid for one day.
public enum TestCertificate {
    /// Self-signed P-256 certificate + key in `directory`; `subjectAltName` as openssl takes it (`DNS:a.test,IP:127.0.0.1`).
    public static func make(in directory: String, commonName: String, subjectAltName: String) async throws -> (cert: String, key: String) {
        let cert = directory + "/\(commonName)-cert.pem"
        let key = directory + "/\(commonName)-key.pem"
        let openssl = try ChildProcess("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=\(commonName)", "-addext", "subjectAltName=\(subjectAltName)", "-keyout", key, "-out", cert,
        ], name: "openssl")
        let status = try await openssl.waitForExit(timeout: .seconds(20))
        guard status == 0 else {
            struct OpenSSLFailed: Error, CustomStringConvertible { let description: String }
            throw OpenSSLFailed(description: "openssl req exited \(status):\n\(openssl.transcript)")
        }
        return (cert, key)
    }
}
