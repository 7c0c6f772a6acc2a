/// A UTC calendar day: whole days since 1970-01-01 (day 0). Retention stamps are day numbers.
public struct UTCDay: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let number: Int

    public init(_ number: Int) { self.number = number }

    public static func < (a: UTCDay, b: UTCDay) -> Bool { a.number < b.number }

    public static func + (day: UTCDay, days: Int) -> UTCDay { UTCDay(day.number + days) }

    public static func - (day: UTCDay, days: Int) -> UTCDay { UTCDay(day.number - days) }

    /// Whole days from `earlier` to `self` (negative when `earlier` is later).
    public func days(since earlier: UTCDay) -> Int { number - earlier.number }

    public var description: String { "day \(number)" }
}

/// An exact UTC instant in milliseconds since the Unix epoch (wall-clock time, injected by the caller).
public struct UTCTime: Hashable, Comparable, Sendable {
    public let millisecondsSince1970: Int64

    public init(millisecondsSince1970: Int64) { self.millisecondsSince1970 = millisecondsSince1970 }

    /// Noon of `day` plus `milliseconds`: handy for tests and benchmarks.
    public init(day: UTCDay, plusMilliseconds milliseconds: Int64 = 43_200_000) {
        self.millisecondsSince1970 = Int64(day.number) * UTCTime.millisecondsPerDay + milliseconds
    }

    public static let millisecondsPerDay: Int64 = 86_400_000

    /// The UTC day this instant falls on (floor division, so times before 1970 land on negative days).
    public var day: UTCDay {
        let (quotient, remainder) = millisecondsSince1970.quotientAndRemainder(dividingBy: UTCTime.millisecondsPerDay)
        return UTCDay(Int(remainder < 0 ? quotient - 1 : quotient))
    }

    public static func < (a: UTCTime, b: UTCTime) -> Bool { a.millisecondsSince1970 < b.millisecondsSince1970 }
}
