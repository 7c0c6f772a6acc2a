public import Geohash

#if canImport(Glibc)
import Glibc
#endif

/// One row of the Android app's relay list, kept as the app keeps it (NOSTR-GEO §3.3): the URL as the app
/// builds it — `wss://` prefixed when the row has no scheme; case, `:443` and duplicates left alone, so
/// `wss://x` and `wss://x:443` are two rows — and the location.
public struct AndroidRelayEntry: Hashable, Sendable {
    public let url: String
    public let latitude: Double
    public let longitude: Double

    public init(url: String, latitude: Double, longitude: Double) {
        self.url = url
        self.latitude = latitude
        self.longitude = longitude
    }

    /// The address the bridge connects to for this row: the URL under the iOS address rules (§3.2), so
    /// `wss://x:443` and `wss://x` are one relay and a local or malformed URL is refused.
    public var bridgeAddress: Result<String, RelayAddress.Rejection> {
        Result { () throws(RelayAddress.Rejection) -> String in try RelayAddress.normalize(url) }
    }
}

/// A row Android chose for a place, with its haversine distance in metres (the app's unit).
public struct AndroidRelaySelection: Equatable, Sendable {
    public let entry: AndroidRelayEntry
    public let distanceMetres: Double
}

/// Where the Android list came from, recorded in `relays.json` next to the rows.
public struct AndroidRelayListSource: Equatable, Sendable {
    public var file: String
    public var sha256: String
    /// Non-blank lines other than `relay url` headers.
    public var dataRows: Int
    /// Data rows the app skips (fewer than 3 fields, empty URL, non-numeric coordinates).
    public var skippedRows: Int

    public init(file: String, sha256: String, dataRows: Int, skippedRows: Int) {
        self.file = file
        self.sha256 = sha256
        self.dataRows = dataRows
        self.skippedRows = skippedRows
    }
}

/// A data row the app skips while reading its list, reported by the import.
public struct AndroidSkippedRow: Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        case fieldCount(Int)
        case emptyURL
        case coordinate(String)
    }

    public let line: Int
    public let reason: Reason

    public init(line: Int, reason: Reason) {
        self.line = line
        self.reason = reason
    }

    public var description: String {
        switch reason {
        case .fieldCount(let n): "line \(line): \(n) field\(n == 1 ? "" : "s"), the app needs 3"
        case .emptyURL: "line \(line): empty relay URL"
        case .coordinate(let text): "line \(line): '\(text)' is not a number"
        }
    }
}

/// Why an Android relay list could not be imported. The app itself only skips rows; these are the cases
/// where the bridge cannot reproduce what the app would do, or the file is outside the bridge's bounds.
public enum AndroidRelayImportError: Error, Equatable, Sendable, CustomStringConvertible {
    case fileSize(Int)
    case invalidUTF8
    case tooManyRows(Int)
    /// A coordinate the app reads as a number (`NaN`, `Infinity`, hexadecimal, an `f`/`d` suffix, an
    /// overflowing exponent) but that is not a finite decimal here: the app's distances could not be reproduced.
    case coordinate(line: Int, String)
    case empty

    public var description: String {
        switch self {
        case .fileSize(let n): "file is \(n) bytes (allowed 1…\(RelayDirectory.CSVLimits.maxFileBytes))"
        case .invalidUTF8: "file is not valid UTF-8"
        case .tooManyRows(let n): "\(n) data rows (max \(RelayDirectory.CSVLimits.maxRows))"
        case .coordinate(let line, let text):
            "line \(line): the app reads '\(text)' as a number, but it is not a finite decimal the bridge can place"
        case .empty: "no relay rows"
        }
    }
}

/// The Android app's relay list and selection rule (bitchat-android `RelayDirectory.kt`, NOSTR-GEO §3.3):
/// the N rows nearest the centre of a geohash cell by haversine distance in metres (R = 6 371 000 m), with
/// a stable sort, so equal distances keep **file order**. Rows stay in file order because of that.
public struct AndroidRelayList: Sendable {
    public enum Limits {
        /// Earth radius of the app's `haversineMeters`.
        public static let earthRadiusMetres = 6_371_000.0
    }

    public let entries: [AndroidRelayEntry]
    public let source: AndroidRelayListSource?

    public init(entries: [AndroidRelayEntry], source: AndroidRelayListSource? = nil) {
        self.entries = entries
        self.source = source
    }

    /// The `count` rows closest to the centre of `cell`, nearest first, ties in file order.
    public func closest(to cell: GeohashCell, count: Int) -> [AndroidRelaySelection] {
        let (lat, lon) = cell.center
        let ranked = entries.enumerated().map { index, entry in
            (index, AndroidRelaySelection(
                entry: entry, distanceMetres: Self.haversineMetres(lat, lon, entry.latitude, entry.longitude)))
        }
        // The app sorts with Kotlin's stable `sortedBy` and `Double.compareTo` (NaN after every number);
        // Swift's sort is not documented as stable, so the file index breaks ties explicitly.
        .sorted { a, b in
            let (x, y) = (a.1.distanceMetres, b.1.distanceMetres)
            if x.isNaN || y.isNaN { return x.isNaN == y.isNaN ? a.0 < b.0 : y.isNaN }
            return x != y ? x < y : a.0 < b.0
        }
        return ranked.prefix(max(0, count)).map(\.1)
    }

    /// The app's `haversineMeters`, in its operation order, so that rows with the same coordinates tie here
    /// as they do on the phone. (The last bit of `sin`/`cos` may differ between libms, which can only
    /// reorder rows whose distances differ by less than that.)
    public static func haversineMetres(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let radians = Double.pi / 180
        let dLat = (lat2 - lat1) * radians
        let dLon = (lon2 - lon1) * radians
        let sinLat = sin(dLat / 2)
        let sinLon = sin(dLon / 2)
        let a = sinLat * sinLat + cos(lat1 * radians) * cos(lat2 * radians) * (sinLon * sinLon)
        let c = 2 * atan2(a.squareRoot(), (1 - a).squareRoot())
        return Limits.earthRadiusMetres * c
    }
}

extension AndroidRelayList {
    /// Reads a relay CSV as the Android app does (`RelayDirectory.parseCsv`): lines split like
    /// `BufferedReader.readLine` (LF, CR or CRLF) and trimmed of Kotlin whitespace; blank lines and lines
    /// starting with `relay url` (any case) skipped; fields split on `,`, at least 3, extra fields ignored; the
    /// URL `wss://` prefixed when it has no `://`; rows with an empty URL or a non-numeric coordinate skipped.
    /// Nothing is deduplicated or range-checked. Text is handled as Unicode scalars, as the app handles UTF-16
    /// units, not as grapheme clusters. The file must be valid UTF-8 and within the iOS bounds
    /// (``RelayDirectory/CSVLimits``): the app has no bound; its bundled list is 15 KB.
    public static func importCSV(_ bytes: [UInt8], fileName: String, sha256: String)
        throws(AndroidRelayImportError) -> (list: AndroidRelayList, skipped: [AndroidSkippedRow])
    {
        guard (1...RelayDirectory.CSVLimits.maxFileBytes).contains(bytes.count) else { throw .fileSize(bytes.count) }
        guard String(validating: bytes, as: UTF8.self) != nil else { throw .invalidUTF8 }
        var entries: [AndroidRelayEntry] = []
        var skipped: [AndroidSkippedRow] = []
        var dataRows = 0
        for (index, line) in readLines(bytes).enumerated() {
            let lineNumber = index + 1
            let trimmed = kotlinTrimmed(line.unicodeScalars[...])
            if trimmed.isEmpty || String(trimmed).lowercased().unicodeScalars.starts(with: "relay url".unicodeScalars) {
                continue
            }
            dataRows += 1
            guard dataRows <= RelayDirectory.CSVLimits.maxRows else { throw .tooManyRows(dataRows) }
            let fields = trimmed.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.count >= 3 else {
                skipped.append(AndroidSkippedRow(line: lineNumber, reason: .fieldCount(fields.count)))
                continue
            }
            let url = appURL(fields[0])
            let latitude = appNumber(fields[1])
            let longitude = appNumber(fields[2])
            guard !url.isEmpty else {
                skipped.append(AndroidSkippedRow(line: lineNumber, reason: .emptyURL))
                continue
            }
            switch (latitude, longitude) {
            case (.number(let lat), .number(let lon)):
                entries.append(AndroidRelayEntry(url: url, latitude: lat, longitude: lon))
            case (.notANumber(let text), _), (_, .notANumber(let text)):
                skipped.append(AndroidSkippedRow(line: lineNumber, reason: .coordinate(text)))
            case (.unrepresentable(let text), _), (_, .unrepresentable(let text)):
                throw .coordinate(line: lineNumber, text)
            }
        }
        guard !entries.isEmpty else { throw .empty }
        let source = AndroidRelayListSource(file: fileName, sha256: sha256, dataRows: dataRows, skippedRows: skipped.count)
        return (AndroidRelayList(entries: entries, source: source), skipped)
    }

    /// The app's `normalizeRelayUrl` of a field: trimmed, kept when it has a scheme, else `wss://` prefixed.
    static func appURL(_ field: Substring.UnicodeScalarView) -> String {
        let trimmed = String(kotlinTrimmed(field))
        guard !trimmed.isEmpty else { return "" }
        return trimmed.unicodeScalars.firstRange(of: "://".unicodeScalars) != nil ? trimmed : "wss://" + trimmed
    }

    /// Lines as `BufferedReader.readLine` returns them: LF, CR and CRLF each end one line.
    private static func readLines(_ bytes: [UInt8]) -> [String] {
        var lines: [String] = []
        var start = 0
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x0a || byte == 0x0d {
                lines.append(String(decoding: bytes[start..<index], as: UTF8.self))
                index += byte == 0x0d && index + 1 < bytes.count && bytes[index + 1] == 0x0a ? 2 : 1
                start = index
            } else {
                index += 1
            }
        }
        if start < bytes.count { lines.append(String(decoding: bytes[start...], as: UTF8.self)) }
        return lines
    }

    /// Kotlin's `trim()`: drops leading and trailing `Char.isWhitespace()` characters, which on the JVM are
    /// `Character.isWhitespace` ∪ `Character.isSpaceChar`: Unicode space, line and paragraph separators,
    /// TAB, LF, VT, FF, CR and U+001C…U+001F.
    static func kotlinTrimmed(_ text: Substring.UnicodeScalarView) -> Substring.UnicodeScalarView {
        trimmed(text) { scalar in
            switch scalar.value {
            case 0x09...0x0d, 0x1c...0x1f: return true
            default:
                let category = scalar.properties.generalCategory
                return category == .spaceSeparator || category == .lineSeparator || category == .paragraphSeparator
            }
        }
    }

    private static func trimmed(
        _ text: Substring.UnicodeScalarView,
        _ drop: (Unicode.Scalar) -> Bool
    ) -> Substring.UnicodeScalarView {
        guard let first = text.firstIndex(where: { !drop($0) }) else { return text[text.endIndex...] }
        return text[first...text.lastIndex(where: { !drop($0) })!]
    }

    enum AppNumber: Equatable {
        case number(Double)
        case notANumber(String)
        case unrepresentable(String)
    }

    /// Kotlin's `trim().toDoubleOrNull()`: the Java `Double.valueOf` grammar, which also allows characters up
    /// to U+0020 around the number. A finite ASCII decimal is read; the other forms Java accepts are
    /// `unrepresentable`; anything else is `notANumber` (the app skips the row).
    static func appNumber(_ field: Substring.UnicodeScalarView) -> AppNumber {
        let shown = String(kotlinTrimmed(field))
        let text = String(trimmed(kotlinTrimmed(field)) { $0.value <= 0x20 })
        if RelayDirectory.isASCIIDecimal(text) {
            guard let value = Double(text), value.isFinite else { return .unrepresentable(shown) }
            return .number(value)
        }
        return javaReadsAsNumber(text) ? .unrepresentable(shown) : .notANumber(shown)
    }

    /// The forms of Java's floating-point grammar other than a plain decimal: `NaN`, `Infinity`, a decimal
    /// with an `f`/`F`/`d`/`D` suffix, and hexadecimal `0x…p…` (each with an optional sign).
    private static func javaReadsAsNumber(_ text: String) -> Bool {
        var body = Substring(text)
        if let sign = body.first, sign == "+" || sign == "-" { body = body.dropFirst() }
        if body == "NaN" || body == "Infinity" { return true }
        if let suffix = body.last, "fFdD".contains(suffix) { body = body.dropLast() }
        if RelayDirectory.isASCIIDecimal(String(body)) { return true }
        guard body.hasPrefix("0x") || body.hasPrefix("0X"), let p = body.firstIndex(where: { $0 == "p" || $0 == "P" })
        else { return false }
        let mantissa = body[body.index(body.startIndex, offsetBy: 2)..<p]
        var exponent = body[body.index(after: p)...]
        if let sign = exponent.first, sign == "+" || sign == "-" { exponent = exponent.dropFirst() }
        let digits = mantissa.filter { $0 != "." }
        return mantissa.count - digits.count <= 1 && !digits.isEmpty && digits.allSatisfy { $0.isASCII && $0.isHexDigit }
            && !exponent.isEmpty && exponent.allSatisfy { $0.isASCII && $0.isNumber }
    }
}
