public import Identity
/// The retention rules of STRANGER-CACHE §3 as pure functions of day numbers: no clock, no store.
///
/// Reading of the two-day agreement (the spec's wording, made exact): a pass on day D forgets a stranger by age
/// only if a previous pass ran on an earlier day P < D *and* that pass already found the stamp at the end of its
/// life, i.e. evictable from P + 1 on (`P + 1 − stamp > 37`). With daily passes the stamp is kept at 36 and 37
/// days and forgotten at 38 (the pass on day 37 found it "expiring"), as the spec's tests require. A single clock
/// reading that jumps ahead forgets only what a correct clock would forget the next day; after a restart (no
/// previous pass in this process) or a gap of more than two days, age removals wait for a pass on a later day.
public enum RetentionRules {
    public enum Limits {
        /// Strangers unseen this long are forgotten (the phone's 30-day retention).
        public static let retentionDays = 30
        /// The stamp is refreshed at most weekly, so it lags the last sighting by up to six days.
        public static let refreshIntervalDays = 7
        /// A stamp older than this (30 + 7 days) is expired.
        public static let maxStampAgeDays = retentionDays + refreshIntervalDays
        /// Above this many strangers a cap pass runs at once.
        public static let strangerCap = 2_000
        /// A cap pass trims down to this many strangers (hysteresis: the next 500 arrivals trigger nothing).
        public static let strangerTrimTarget = 1_500
    }

    /// True when a sighting on `today` must rewrite the stamp: no stamp yet, or the stamp is at least a week old.
    /// A stamp in the future (the clock went back) is never moved back.
    public static func shouldRefresh(stamp: UTCDay?, today: UTCDay) -> Bool {
        guard let stamp else { return true }
        return today.days(since: stamp) >= Limits.refreshIntervalDays
    }

    /// True when a stamp is older than 37 days on `day`.
    public static func isExpired(stamp: UTCDay, on day: UTCDay) -> Bool {
        day.days(since: stamp) > Limits.maxStampAgeDays
    }

    /// The age rule with the two-day agreement: may a pass on `today` forget a stranger stamped `stamp`, given the
    /// day of the previous pass in this process (nil after a start)?
    public static func mayForgetByAge(stamp: UTCDay, today: UTCDay, previousPass: UTCDay?) -> Bool {
        guard let cutoff = forgetCutoff(today: today, previousPass: previousPass) else { return false }
        return stamp <= cutoff
    }

    /// The largest stamp a pass on `today` forgets (expired today, and already expiring at the previous pass), for
    /// an indexed range query; nil when no age removal is allowed on `today`. The one definition of the age rule.
    public static func forgetCutoff(today: UTCDay, previousPass: UTCDay?) -> UTCDay? {
        guard let previousPass, previousPass < today else { return nil }
        // Expired on the day after the previous pass; since previousPass < today, that implies expired today.
        let agreedDay = previousPass + 1
        return agreedDay - (Limits.maxStampAgeDays + 1)
    }

    /// The latest day a stranger may have been seen: stamp + 7, but strangers stamped within the last week (or
    /// in the future) rank as seen today. Unstamped strangers are stamped today by the pass, so rank today.
    public static func latestPossibleSighting(stamp: UTCDay?, today: UTCDay) -> UTCDay {
        guard let stamp else { return today }
        return min(stamp + Limits.refreshIntervalDays, today)
    }

    /// Strangers to evict when more than ``Limits/strangerCap`` remain: the first `count − trimTarget` in
    /// eviction order, never `announcer`. Order: latest possible sighting, oldest first; on equal rank the newest
    /// arrival (latest firstSeen) first, so a flood of fresh identities pushes out older stamps first and reaches
    /// this week's strangers newest-first; then key order, so the result does not depend on storage order.
    public static func capEvictions(
        strangers: [RetentionRow], today: UTCDay, announcer: IdentityKey?
    ) -> [IdentityKey] {
        guard strangers.count > Limits.strangerCap else { return [] }
        let excess = strangers.count - Limits.strangerTrimTarget
        // Sort keys computed once per row (not per comparison), and indices sorted instead of rows, so a cap pass
        // over ~2,000 rows moves integers, not records. A missing firstSeen ranks as the oldest arrival.
        let ranks = strangers.map { latestPossibleSighting(stamp: $0.lastSeen, today: today).number }
        let arrivals = strangers.map { $0.firstSeen?.millisecondsSince1970 ?? Int64.min }
        let ordered = strangers.indices.filter { strangers[$0].key != announcer }.sorted { a, b in
            if ranks[a] != ranks[b] { return ranks[a] < ranks[b] }
            if arrivals[a] != arrivals[b] { return arrivals[a] > arrivals[b] }
            return strangers[a].key < strangers[b].key
        }
        return ordered.prefix(excess).map { strangers[$0].key }
    }
}
