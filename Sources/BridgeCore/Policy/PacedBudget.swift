/// The mesh budget as a pace, not a window (issue 34): a token bucket refilled continuously, so lines waiting for the
/// air go out one every couple of seconds instead of a minute's worth in its first second and then nothing.
///
/// An island's `perMinute` is split evenly between the bridges on it (``share``, 1/n). Each holds `burst × share`
/// tokens (at least one: a whole token sends) and refills at what is left of its share of the minute after that burst,
/// so no sliding minute ever sees more than its share go out: `capacity + rate × 60 = perMinute × share`, and the
/// island's bridges together never more than `perMinute`. Time is passed in (seconds).
public struct PacedBudget: Sendable, Equatable {
    public enum Limits {
        /// The slowest pace a share may fall to (a minute per broadcast), however many bridges split an island.
        public static let minimumPerMinute = 1.0
    }

    public let perMinute: Int
    public let burst: Double
    /// This bridge's part of the island's budget: 1 alone, 1/n with n bridges (``setShare(_:now:)``).
    public private(set) var share: Double = 1
    private var tokens: Double
    private var at: Double?

    public init(perMinute: Int, burst: Double) {
        precondition(perMinute > 0 && burst >= 1)
        self.perMinute = perMinute
        self.burst = min(burst, Double(perMinute))
        tokens = self.burst
    }

    /// Tokens the bucket holds at most.
    public var capacity: Double { max(1, burst * share) }
    /// Tokens per second: the share of the minute less the burst, spread evenly.
    public var perSecond: Double { max(Limits.minimumPerMinute, Double(perMinute) * share - capacity) / 60 }

    /// Whole tokens at `now`: how many items may go now (a hair under a whole one counts: the time
    /// ``nextToken(now:)`` names is when it is whole, whatever the rounding).
    public func available(now: Double) -> Int { Int((tokens(now: now) + Self.epsilon).rounded(.down)) }

    static let epsilon = 1e-9

    /// Takes one token at `now` (the caller checked ``available(now:)``).
    public mutating func take(now: Double) {
        tokens = tokens(now: now) - 1
        at = now
    }

    /// When the next whole token is there (`now` when one is).
    public func nextToken(now: Double) -> Double {
        guard available(now: now) < 1 else { return now }
        // A microsecond past the exact refill, so the token is whole there whatever the rounding.
        return now + (1 - tokens(now: now)) / perSecond + 1e-6
    }

    /// A new share of the island (bridges came or left): the bucket keeps what it holds, up to its new capacity.
    public mutating func setShare(_ share: Double, now: Double) {
        let held = tokens(now: now)
        self.share = min(1, max(0.001, share))
        tokens = min(capacity, held)
        at = now
    }

    private func tokens(now: Double) -> Double {
        guard let at else { return tokens }
        return min(capacity, tokens + max(0, now - at) * perSecond)
    }
}
