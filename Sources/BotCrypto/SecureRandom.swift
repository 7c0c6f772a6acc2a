import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's DRBG (seeded from the kernel).
public enum SecureRandom {
    /// `count` random bytes. OpenSSL failing to seed is unrecoverable for a key-holding process, so it traps.
    public static func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return out }
        let result = RAND_bytes(&out, Int32(count))
        precondition(result == 1, "RAND_bytes failed: \(OpenSSL.drainErrors())")
        return out
    }
}

/// A `RandomNumberGenerator` over ``SecureRandom``, for the live side of injected randomness.
public struct SecureRandomNumberGenerator: RandomNumberGenerator, Sendable {
    public init() {}

    public mutating func next() -> UInt64 {
        SecureRandom.bytes(8).reduce(0) { $0 << 8 | UInt64($1) }
    }
}
