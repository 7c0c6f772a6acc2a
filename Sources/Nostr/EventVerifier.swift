/// A token bucket over an injected clock: `capacity` tokens, refilled continuously at `refillPerSecond`.
public struct TokenBucket: Sendable {
    public let capacity: Double
    public let refillPerSecond: Double
    public private(set) var tokens: Double
    private var last: ContinuousClock.Instant?

    public init(capacity: Double, refillPerSecond: Double) {
        self.capacity = capacity
        self.refillPerSecond = refillPerSecond
        self.tokens = capacity
    }

    /// Takes one token if available at `now`.
    public mutating func take(now: ContinuousClock.Instant) -> Bool {
        if let last {
            if now > last {
                let elapsed = now - last
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                tokens = min(capacity, tokens + seconds * refillPerSecond)
                self.last = now
            }
        } else {
            last = now
        }
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// Verifies inbound events cheapest check first, with Schnorr behind a token-bucket budget, so a flood
/// of forged events costs bounded CPU (NOSTR-GEO §2.4, §8.11; STYLE §13 rule 9).
///
/// Order: fields present → recomputed id string-equals the claimed id (one SHA-256) → budget token →
/// pubkey curve check + BIP-340. Only events that reach Schnorr consume budget; tampered copies (id
/// mismatch) are rejected for the price of a hash. Every outcome is counted.
public struct EventVerifier: Sendable {
    public struct Configuration: Sendable {
        /// Burst of Schnorr verifications allowed at once.
        public var burst: Double
        /// Sustained verifications per second. A Schnorr check costs ≈ 50 µs, so the default 200/s bounds
        /// verification at ≈ 1 % of one core even under a flood; phones verify 720/min on the bridge path.
        public var perSecond: Double

        public init(burst: Double = 400, perSecond: Double = 200) {
            self.burst = burst
            self.perSecond = perSecond
        }
    }

    /// Outcome counts since creation.
    public struct Counters: Equatable, Sendable {
        public var verified = 0
        public var missingIDOrSignature = 0
        public var idMismatch = 0
        public var overBudget = 0
        public var invalidPublicKey = 0
        public var badSignature = 0
        /// How many Schnorr verifications actually ran (the CPU-bound part).
        public var schnorrChecks = 0
    }

    private var budget: TokenBucket
    public private(set) var counters = Counters()

    public init(configuration: Configuration = Configuration()) {
        budget = TokenBucket(capacity: configuration.burst, refillPerSecond: configuration.perSecond)
    }

    /// Verifies `event` at `now`; throws the named reason of a rejection.
    public mutating func verify(_ event: UnverifiedEvent, now: ContinuousClock.Instant) throws(NostrError)
        -> NostrEvent
    {
        let id: EventID
        let signature: SchnorrSignature
        do {
            (id, signature) = try event.checkID()
        } catch {
            if error == .idMismatch { counters.idMismatch += 1 } else { counters.missingIDOrSignature += 1 }
            throw error
        }
        guard budget.take(now: now) else {
            counters.overBudget += 1
            throw .overBudget
        }
        counters.schnorrChecks += 1
        do {
            let verified = try event.checkSignature(id: id, signature: signature)
            counters.verified += 1
            return verified
        } catch {
            if error == .invalidPublicKey { counters.invalidPublicKey += 1 } else { counters.badSignature += 1 }
            throw error
        }
    }
}
