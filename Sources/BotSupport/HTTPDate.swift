/// HTTP dates (RFC 9110 §5.6.7): the `Date` header a server sends, read to compare its clock with ours.
///
/// Parsing accepts the three forms a recipient must accept: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the
/// obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`, two-digit years read as 1970–2069) and asctime
/// (`Sun Nov  6 08:49:37 1994`). Formatting writes IMF-fixdate only (``CivilCalendar``: no libc time zone state).
public enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday

    /// Seconds since 1970-01-01T00:00:00Z for `text`, or nil when it is none of the three forms or not a real date.
    public static func parse(_ text: String) -> Int64? {
        let fields = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        switch fields.count {
        case 6 where fields[5] == "GMT":  // IMF-fixdate: wkday, DD Mon YYYY HH:MM:SS GMT
            guard let day = Int(fields[1]), let year = Int(fields[3]), fields[3].count == 4 else { return nil }
            return seconds(year: year, month: fields[2], day: day, time: fields[4])
        case 4 where fields[3] == "GMT":  // RFC 850: weekday, DD-Mon-YY HH:MM:SS GMT
            let parts = fields[1].split(separator: "-").map(String.init)
            guard parts.count == 3, let day = Int(parts[0]), parts[2].count == 2, let yy = Int(parts[2]) else { return nil }
            return seconds(year: yy < 70 ? 2000 + yy : 1900 + yy, month: parts[1], day: day, time: fields[2])
        case 5:  // asctime: wkday Mon D HH:MM:SS YYYY
            guard let day = Int(fields[2]), let year = Int(fields[4]), fields[4].count == 4 else { return nil }
            return seconds(year: year, month: fields[1], day: day, time: fields[3])
        default:
            return nil
        }
    }

    /// IMF-fixdate for `unixSeconds` (≥ 0).
    public static func format(_ unixSeconds: Int64) -> String {
        let days = unixSeconds >= 0 ? unixSeconds / 86_400 : (unixSeconds - 86_399) / 86_400
        let second = unixSeconds - days * 86_400
        let (year, month, day) = CivilCalendar.civilFromDays(days)
        let weekday = weekdays[Int(((days % 7) + 7) % 7)]
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(weekday), \(two(Int64(day))) \(months[month - 1]) \(year) "
            + "\(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60)) GMT"
    }

    private static func seconds(year: Int, month name: String, day: Int, time: String) -> Int64? {
        guard let monthIndex = months.firstIndex(of: name) else { return nil }
        let clock = time.split(separator: ":").map { Int($0) }
        guard clock.count == 3, time.count == 8, let hour = clock[0], let minute = clock[1], let second = clock[2],
              (0..<24).contains(hour), (0..<60).contains(minute), (0...60).contains(second),
              (1...CivilCalendar.daysIn(month: monthIndex + 1, year: year)).contains(day), (1...9999).contains(year)
        else { return nil }
        return CivilCalendar.daysFromCivil(year: year, month: monthIndex + 1, day: day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }
}
