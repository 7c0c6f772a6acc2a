/// Counts links in normalised text (SPAM-FILTER.md §4 rule 3): a URL with a scheme (`scheme://…`),
/// a `www.` host, or a bare domain (`label.tld`, tld 2–24 ASCII letters, e.g. `example.com`, `t.me/x`).
///
/// Each occurrence counts once: a match consumes the rest of its whitespace-delimited run, so
/// `https://www.example.com/a.b` is one link. A match must start at a word boundary (not after a
/// letter, digit, `.`, `-` or `@`), so `name@example.com` is not a link. Only ASCII labels are
/// recognised; normalisation has already turned fullwidth and styled letters into ASCII.
public enum LinkCounter {
    public static func count(_ s: [UInt32]) -> Int {
        // Every form needs a `.` or a `:` (`scheme://`, `www.`, `label.tld`): text with neither has no
        // link, decided in one pass without the matcher (most chat lines).
        guard s.contains(where: { $0 == 0x2E || $0 == 0x3A }) else { return 0 }
        return countScanning(s)
    }

    /// The matcher over every position (what ``count(_:)`` runs once the text has a `.` or `:`).
    static func countScanning(_ s: [UInt32]) -> Int {
        var links = 0
        var i = 0
        let n = s.count
        while i < n {
            if i > 0, isWordContinuation(s[i - 1]) {
                i += 1
                continue
            }
            if let end = matchLink(s, at: i) {
                links += 1
                i = end
                while i < n, s[i] != 0x20 { i += 1 }
            } else {
                i += 1
            }
        }
        return links
    }

    /// End index of a link starting at `start`, or nil.
    private static func matchLink(_ s: [UInt32], at start: Int) -> Int? {
        let n = s.count
        guard start < n, isAlnum(s[start]) else { return nil }
        // scheme://
        if isLetter(s[start]) {
            var j = start + 1
            while j < n, isLetter(s[j]) || isDigit(s[j]) || s[j] == 0x2B || s[j] == 0x2D || s[j] == 0x2E { j += 1 }
            if j + 2 < n, s[j] == 0x3A, s[j + 1] == 0x2F, s[j + 2] == 0x2F {
                return j + 3
            }
        }
        // www.
        if start + 3 < n, s[start] == 0x77, s[start + 1] == 0x77, s[start + 2] == 0x77, s[start + 3] == 0x2E,
            start + 4 < n, isAlnum(s[start + 4])
        {
            return start + 4
        }
        // label(.label)*.tld
        var j = start
        var labels = 0
        var lastLabelStart = start
        var lastLabelAllLetters = true
        while true {
            let labelStart = j
            var allLetters = true
            while j < n, isAlnum(s[j]) || s[j] == 0x2D {
                if !isLetter(s[j]) { allLetters = false }
                j += 1
            }
            guard j > labelStart else { break }
            labels += 1
            lastLabelStart = labelStart
            lastLabelAllLetters = allLetters
            if j + 1 < n, s[j] == 0x2E, isAlnum(s[j + 1]) {
                j += 1
                continue
            }
            break
        }
        let tldLength = j - lastLabelStart
        guard labels >= 2, lastLabelAllLetters, (2...24).contains(tldLength) else { return nil }
        return j
    }

    @inline(__always) static func isLetter(_ c: UInt32) -> Bool { (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) }
    @inline(__always) static func isDigit(_ c: UInt32) -> Bool { c >= 0x30 && c <= 0x39 }
    @inline(__always) static func isAlnum(_ c: UInt32) -> Bool { isLetter(c) || isDigit(c) }
    @inline(__always) static func isWordContinuation(_ c: UInt32) -> Bool {
        isAlnum(c) || c == 0x2E || c == 0x2D || c == 0x40 || c == 0x5F
    }
}
