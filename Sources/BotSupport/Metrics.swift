/// Counters and gauges with labels, as one immutable-once-published value, and their Prometheus text form.
///
/// The owner of the numbers (the bridge's coordinator) builds a fresh ``MetricsSnapshot`` from its own
/// counters and publishes it to a ``StatusBoard``; the HTTP thread only renders what was published. So no
/// metric is ever incremented from two threads, and a scrape never sees half an update.
///
/// Names come from code: an invalid metric or label name, or one name registered with two kinds, is a
/// programmer error (`precondition`). Label *values* may come from the outside world (relay URLs, drop
/// reasons) and are escaped when rendered.
public struct MetricsSnapshot: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// Only ever goes up (resets when the process restarts). Names end in `_total` by convention.
        case counter
        /// Goes up and down (queue depth, connected relays).
        case gauge
    }

    /// One series: label pairs in the order given, and a value.
    public struct Sample: Sendable, Equatable {
        public var labels: [Label]
        public var value: Double

        public init(labels: [Label], value: Double) {
            self.labels = labels
            self.value = value
        }
    }

    public struct Label: Sendable, Hashable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// One metric name with its help text, kind and series.
    public struct Family: Sendable, Equatable {
        public var name: String
        public var help: String
        public var kind: Kind
        public var samples: [Sample]

        public init(name: String, help: String, kind: Kind, samples: [Sample]) {
            self.name = name
            self.help = help
            self.kind = kind
            self.samples = samples
        }
    }

    public enum Limits {
        /// Series kept per snapshot: bounds the `/metrics` body (about 100 B a series, so ~1 MB) whatever
        /// label values the owner reports (a relay list, drop reasons); the excess is counted, not kept.
        public static let maxSeries = 10_000
    }

    /// Families in the order they were first added (the order they render in).
    public private(set) var families: [Family] = []
    /// Series refused because ``Limits/maxSeries`` was reached (rendered as `metrics_series_dropped_total`).
    public private(set) var droppedSeries = 0
    private var seriesCount = 0
    private var index: [String: Int] = [:]
    /// `(name, labels)` → position of the sample in its family: O(1) replace instead of a scan.
    private var seriesIndex: [SeriesKey: Int] = [:]

    private struct SeriesKey: Hashable, Sendable {
        let name: String
        let labels: [Label]
    }

    public static func == (a: MetricsSnapshot, b: MetricsSnapshot) -> Bool {
        a.families == b.families && a.droppedSeries == b.droppedSeries
    }

    public init() {}

    /// Adds one counter series. Adding the same name and labels again replaces the value.
    public mutating func counter(_ name: String, _ help: String, labels: [Label] = [], _ value: Double) {
        add(name, help: help, kind: .counter, labels: labels, value: value)
    }

    /// Adds one gauge series. Adding the same name and labels again replaces the value.
    public mutating func gauge(_ name: String, _ help: String, labels: [Label] = [], _ value: Double) {
        add(name, help: help, kind: .gauge, labels: labels, value: value)
    }

    /// Declares a family with no series yet (so HELP/TYPE render even when nothing happened).
    public mutating func declare(_ name: String, _ help: String, kind: Kind) {
        _ = familyIndex(name, help: help, kind: kind)
    }

    public mutating func add(_ name: String, help: String, kind: Kind, labels: [Label], value: Double) {
        for label in labels {
            precondition(Self.isValidLabelName(label.name), "invalid Prometheus label name '\(label.name)'")
        }
        let position = familyIndex(name, help: help, kind: kind)
        let key = SeriesKey(name: name, labels: labels)
        if let existing = seriesIndex[key] {
            families[position].samples[existing].value = value
            return
        }
        guard seriesCount < Limits.maxSeries else {
            droppedSeries += 1
            return
        }
        seriesCount += 1
        seriesIndex[key] = families[position].samples.count
        families[position].samples.append(Sample(labels: labels, value: value))
    }

    private mutating func familyIndex(_ name: String, help: String, kind: Kind) -> Int {
        if let position = index[name] {
            precondition(families[position].kind == kind, "metric '\(name)' registered as two kinds")
            return position
        }
        precondition(Self.isValidMetricName(name), "invalid Prometheus metric name '\(name)'")
        families.append(Family(name: name, help: help, kind: kind, samples: []))
        index[name] = families.count - 1
        return families.count - 1
    }

    /// Sets the help text of an existing family (the parser meets `# HELP` in any order).
    mutating func setHelp(_ name: String, _ help: String) {
        if let position = index[name] { families[position].help = help }
    }

    /// The family named `name`, if any.
    public func family(_ name: String) -> Family? { index[name].map { families[$0] } }

    /// The value of the series `name{labels}`, if present.
    public func value(_ name: String, labels: [Label] = []) -> Double? {
        guard let family = index[name], let sample = seriesIndex[SeriesKey(name: name, labels: labels)] else { return nil }
        return families[family].samples[sample].value
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    public static func isValidMetricName(_ name: String) -> Bool {
        guard let first = name.utf8.first, isLetter(first) || first == 0x5f || first == 0x3a else { return false }
        return name.utf8.allSatisfy { isLetter($0) || isDigit($0) || $0 == 0x5f || $0 == 0x3a }
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved by Prometheus).
    public static func isValidLabelName(_ name: String) -> Bool {
        guard let first = name.utf8.first, isLetter(first) || first == 0x5f, !name.hasPrefix("__") else {
            return false
        }
        return name.utf8.allSatisfy { isLetter($0) || isDigit($0) || $0 == 0x5f }
    }

    private static func isLetter(_ byte: UInt8) -> Bool { (0x41...0x5a).contains(byte) || (0x61...0x7a).contains(byte) }
    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
}

/// The Prometheus text exposition format, version 0.0.4: rendering, and a strict parser for reading it
/// back (`bitchat-bridge status`).
///
/// ```
/// # HELP <name> <help, with \ and newline escaped>
/// # TYPE <name> counter|gauge
/// <name>{<label>="<value, with \ " and newline escaped>",…} <value>
/// ```
public enum PrometheusText {
    /// The `Content-Type` of a scrape response.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Why a text could not be read as Prometheus 0.0.4.
    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        case tooLarge(bytes: Int)
        case malformedLine(line: Int, reason: String)

        public var description: String {
            switch self {
            case .tooLarge(let bytes): "metrics text of \(bytes) bytes is over the limit"
            case .malformedLine(let line, let reason): "metrics line \(line): \(reason)"
            }
        }
    }

    public enum Limits {
        /// Largest text parsed: ten times a full snapshot (``MetricsSnapshot/Limits/maxSeries`` ≈ 1 MB).
        public static let maxParseBytes = 10 << 20
    }

    public static func render(_ snapshot: MetricsSnapshot) -> String {
        var out = ""
        out.reserveCapacity(64 * snapshot.families.count)
        for family in snapshot.families {
            out += "# HELP \(family.name) \(escapeHelp(family.help))\n"
            out += "# TYPE \(family.name) \(family.kind.rawValue)\n"
            for sample in family.samples {
                out += family.name
                if !sample.labels.isEmpty {
                    out += "{"
                    out += sample.labels.map { "\($0.name)=\"\(escapeLabelValue($0.value))\"" }.joined(separator: ",")
                    out += "}"
                }
                out += " \(formatValue(sample.value))\n"
            }
        }
        if snapshot.droppedSeries > 0 {
            out += "# HELP metrics_series_dropped_total Series left out of this snapshot (over the series limit).\n"
            out += "# TYPE metrics_series_dropped_total counter\n"
            out += "metrics_series_dropped_total \(snapshot.droppedSeries)\n"
        }
        return out
    }

    /// `\` → `\\`, newline → `\n`.
    public static func escapeHelp(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// `\` → `\\`, `"` → `\"`, newline → `\n`.
    public static func escapeLabelValue(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Whole numbers without a fraction, `NaN`, `+Inf`, `-Inf`, else Swift's shortest round-trip form.
    public static func formatValue(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    /// Reads text in the format ``render(_:)`` writes (and what other 0.0.4 exporters write for counters
    /// and gauges). Untyped series get `.gauge`; a trailing timestamp is accepted and ignored.
    public static func parse(_ text: String) throws(ParseError) -> MetricsSnapshot {
        guard text.utf8.count <= Limits.maxParseBytes else { throw .tooLarge(bytes: text.utf8.count) }
        var helps: [String: String] = [:]
        var kinds: [String: MetricsSnapshot.Kind] = [:]
        var snapshot = MetricsSnapshot()
        var lineNumber = 0
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let line = Substring(rawLine)
            if line.allSatisfy({ $0 == " " || $0 == "\t" }) { continue }
            if line.hasPrefix("#") {
                let words = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: true)
                guard words.count >= 3, words[1] == "HELP" || words[1] == "TYPE" else { continue }  // comment
                let name = String(words[2])
                guard MetricsSnapshot.isValidMetricName(name) else {
                    throw .malformedLine(line: lineNumber, reason: "bad metric name '\(name)'")
                }
                let rest = words.count > 3 ? String(words[3]) : ""
                if words[1] == "HELP" {
                    let help = try unescape(rest, quotes: false, line: lineNumber)
                    helps[name] = help
                    snapshot.setHelp(name, help)
                } else {
                    let kind: MetricsSnapshot.Kind
                    switch rest {
                    case "counter": kind = .counter
                    case "gauge", "untyped": kind = .gauge
                    default: throw .malformedLine(line: lineNumber, reason: "unsupported type '\(rest)'")
                    }
                    if let existing = snapshot.family(name), existing.kind != kind {
                        throw .malformedLine(line: lineNumber, reason: "'\(name)' has two types")
                    }
                    kinds[name] = kind
                    snapshot.declare(name, helps[name] ?? "", kind: kind)
                }
                continue
            }
            let (name, labels, value) = try parseSample(line, line: lineNumber)
            let kind = kinds[name] ?? .gauge
            if let existing = snapshot.family(name), existing.kind != kind {
                throw .malformedLine(line: lineNumber, reason: "'\(name)' has two types")
            }
            snapshot.add(name, help: helps[name] ?? "", kind: kind, labels: labels, value: value)
        }
        return snapshot
    }

    private static func parseSample(_ line: Substring, line number: Int) throws(ParseError)
        -> (String, [MetricsSnapshot.Label], Double)
    {
        let scalars = Array(line.unicodeScalars)
        var position = 0
        var name = ""
        while position < scalars.count, scalars[position] != "{", scalars[position] != " " {
            name.unicodeScalars.append(scalars[position])
            position += 1
        }
        guard MetricsSnapshot.isValidMetricName(name) else {
            throw .malformedLine(line: number, reason: "bad metric name '\(name)'")
        }
        var labels: [MetricsSnapshot.Label] = []
        if position < scalars.count, scalars[position] == "{" {
            position += 1
            while true {
                guard position < scalars.count else { throw .malformedLine(line: number, reason: "unterminated labels") }
                if scalars[position] == "}" {
                    position += 1
                    break
                }
                var labelName = ""
                while position < scalars.count, scalars[position] != "=" {
                    labelName.unicodeScalars.append(scalars[position])
                    position += 1
                }
                guard MetricsSnapshot.isValidLabelName(labelName) else {
                    throw .malformedLine(line: number, reason: "bad label name '\(labelName)'")
                }
                position += 1  // "="
                guard position < scalars.count, scalars[position] == "\"" else {
                    throw .malformedLine(line: number, reason: "label value must be quoted")
                }
                position += 1
                var raw = ""
                var closed = false
                while position < scalars.count {
                    let scalar = scalars[position]
                    position += 1
                    if scalar == "\\" {
                        guard position < scalars.count else { break }
                        raw.unicodeScalars.append(scalar)
                        raw.unicodeScalars.append(scalars[position])
                        position += 1
                    } else if scalar == "\"" {
                        closed = true
                        break
                    } else {
                        raw.unicodeScalars.append(scalar)
                    }
                }
                guard closed else { throw .malformedLine(line: number, reason: "unterminated label value") }
                labels.append(.init(labelName, try unescape(raw, quotes: true, line: number)))
                if position < scalars.count, scalars[position] == "," { position += 1 }
            }
        }
        var rest = ""
        while position < scalars.count {
            rest.unicodeScalars.append(scalars[position])
            position += 1
        }
        let fields = rest.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count == 1 || fields.count == 2, let value = parseValue(fields[0]) else {
            throw .malformedLine(line: number, reason: "expected a value (and optional timestamp)")
        }
        if fields.count == 2, Int64(fields[1]) == nil {
            throw .malformedLine(line: number, reason: "bad timestamp '\(fields[1])'")
        }
        return (name, labels, value)
    }

    private static func parseValue(_ text: Substring) -> Double? {
        switch text {
        case "NaN": return .nan
        case "+Inf", "Inf": return .infinity
        case "-Inf": return -.infinity
        default: return Double(text)
        }
    }

    private static func unescape(_ text: String, quotes: Bool, line: Int) throws(ParseError) -> String {
        var out = ""
        var escaping = false
        for scalar in text.unicodeScalars {
            if escaping {
                switch scalar {
                case "\\": out += "\\"
                case "n": out += "\n"
                case "\"" where quotes: out += "\""
                default: throw .malformedLine(line: line, reason: "unknown escape '\\\(scalar)'")
                }
                escaping = false
            } else if scalar == "\\" {
                escaping = true
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        if escaping { throw .malformedLine(line: line, reason: "dangling backslash") }
        return out
    }
}
