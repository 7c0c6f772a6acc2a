/// Delays between attempts to re-establish a lost connection: exponential from `baseMs`, capped at
/// `maxMs`, each delay jittered to a random point of its upper half ("equal jitter"), so bridges that lost
/// one hub together do not retry in lockstep. Pure: the caller passes the generator.
struct ReconnectBackoff: Sendable {
    let baseMs: UInt64
    let maxMs: UInt64
    /// Failed attempts since the last success.
    private(set) var failures = 0

    init(baseMs: UInt64, maxMs: UInt64) {
        self.baseMs = max(1, baseMs)
        self.maxMs = max(self.baseMs, maxMs)
    }

    /// The delay before the next attempt (after a loss or a failed attempt), in [ceiling / 2, ceiling] where
    /// ceiling = min(maxMs, baseMs · 2^failures).
    mutating func nextDelay(random: inout some RandomNumberGenerator) -> UInt64 {
        let ceiling = min(maxMs, baseMs << UInt64(min(failures, 40)))
        failures += 1
        let floor = ceiling / 2
        return floor + UInt64.random(in: 0...(ceiling - floor), using: &random)
    }

    mutating func reset() { failures = 0 }
}
