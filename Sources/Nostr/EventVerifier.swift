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

    /// Gives back a token taken for work that did not happen.
    public mutating func refund() { tokens = min(capacity, tokens + 1) }

    /// Whether a token is available at `now`, without taking it.
    public mutating func hasToken(now: ContinuousClock.Instant) -> Bool {
        guard take(now: now) else { return false }
        refund()
        return true
    }
}

/// Verifies inbound events cheapest check first, with Schnorr behind a token-bucket budget, so a flood
/// of forged events costs bounded CPU (NOSTR-GEO §2.4, §8.11; STYLE §13 rule 9).
///
/// Order: fields present → recomputed id string-equals the claimed id (one SHA-256) → budget token →
/// pubkey curve check + BIP-340. Only events that reach Schnorr consume budget; tampered copies (id
/// mismatch) are rejected for the price of a hash. Every outcome is counted.
///
/// ``verify(_:now:)`` runs the steps in one go. A caller that spreads the work over threads (the relay
/// pool's verification workers) runs the two stateless halves, ``checkID(_:)`` and
/// ``checkSignature(_:)``, wherever it likes and only ``admit(now:)`` (``refund()``) and ``record(_:)``
/// under its lock.
/// The relay pool keeps one verifier, so one budget, per relay.
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

        public init() {}

        /// Counts one outcome of ``EventVerifier/checkID(_:)`` → ``EventVerifier/admit(now:)`` →
        /// ``EventVerifier/checkSignature(_:)`` (every error those throw, plus success).
        public mutating func record(_ outcome: Result<NostrEvent, NostrError>) {
            switch outcome {
            case .success:
                verified += 1
                schnorrChecks += 1
            case .failure(.idMismatch): idMismatch += 1
            case .failure(.overBudget): overBudget += 1
            case .failure(.invalidPublicKey):
                invalidPublicKey += 1
                schnorrChecks += 1
            case .failure(.badSignature):
                badSignature += 1
                schnorrChecks += 1
            case .failure: missingIDOrSignature += 1
            }
        }
    }

    /// An event whose recomputed id matched the claimed one: the input of the Schnorr half.
    public struct IdentifiedEvent: Sendable {
        public let event: UnverifiedEvent
        public let id: EventID
        let signature: SchnorrSignature
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
        let outcome: Result<NostrEvent, NostrError>
        do throws(NostrError) {
            let identified = try Self.checkID(event)
            guard admit(now: now) else { throw .overBudget }
            outcome = .success(try Self.checkSignature(identified))
        } catch {
            outcome = .failure(error)
        }
        counters.record(outcome)
        return try outcome.get()
    }

    // MARK: The steps, for a caller that runs the stateless halves on other threads

    /// The cheap half (one SHA-256): required fields present and the recomputed id equal to the claimed
    /// one. Stateless; safe on any thread.
    public static func checkID(_ event: UnverifiedEvent) throws(NostrError) -> IdentifiedEvent {
        let (id, signature) = try event.checkID()
        return IdentifiedEvent(event: event, id: id, signature: signature)
    }

    /// Takes one token of the Schnorr budget at `now`; false when it is spent (the caller drops the event
    /// as ``NostrError/overBudget``).
    public mutating func admit(now: ContinuousClock.Instant) -> Bool { budget.take(now: now) }

    /// Returns a token taken by ``admit(now:)`` for an event that never reached Schnorr (a caller that
    /// takes the token before the id check, to need its lock once).
    public mutating func refund() { budget.refund() }

    /// Whether ``admit(now:)`` would succeed now (nothing taken).
    public mutating func hasBudget(now: ContinuousClock.Instant) -> Bool { budget.hasToken(now: now) }

    /// The expensive half: the pubkey's curve check and BIP-340. Stateless; safe on any thread.
    public static func checkSignature(_ identified: IdentifiedEvent) throws(NostrError) -> NostrEvent {
        try identified.event.checkSignature(id: identified.id, signature: identified.signature)
    }

    /// Counts an outcome of the steps run elsewhere (``verify(_:now:)`` counts its own).
    public mutating func record(_ outcome: Result<NostrEvent, NostrError>) { counters.record(outcome) }
}
