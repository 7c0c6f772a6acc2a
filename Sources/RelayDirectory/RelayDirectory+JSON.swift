public import BotSupport

/// Why `relays.json` could not be read.
public enum RelayDirectoryFileError: Error, Equatable, Sendable, CustomStringConvertible {
    case json(JSONParseError)
    case field(String)
    case relay(index: Int, String)

    public var description: String {
        switch self {
        case .json(let e): "relays.json is not valid JSON: \(e)"
        case .field(let f): "relays.json: missing or invalid field '\(f)'"
        case .relay(let i, let why): "relays.json: relay #\(i): \(why)"
        }
    }
}

extension RelayDirectory {
    /// Version of the `relays.json` layout.
    public static let fileFormat: Int64 = 1

    /// The committed `relays.json` form: `{format, source{file, sha256, data_rows, unique_relays,
    /// merged_duplicates}, relays[{address, lat, lon}], android{source{file, sha256, data_rows,
    /// skipped_rows}, relays[{url, lat, lon}]}}`: the iOS relays sorted by address, Android's rows in file
    /// order (its ties keep it). `android` is optional, so the format stays 1 and older readers ignore it.
    public var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = [("format", .integer(Self.fileFormat))]
        if let source {
            members.append(
                sourceJSON(
                    file: source.file, sha256: source.sha256, dataRows: source.dataRows,
                    counts: [("unique_relays", source.uniqueRelays), ("merged_duplicates", source.mergedDuplicates)]))
        }
        members.append(("relays", locatedRowsJSON(entries.map { ($0.address, $0.latitude, $0.longitude) }, name: "address")))
        if let android { members.append(("android", android.jsonValue)) }
        return .object(members)
    }

    /// Reads the `relays.json` form back. Every address is re-validated, so a hand-edited file cannot
    /// smuggle in a local or malformed relay.
    public init(json text: String) throws(RelayDirectoryFileError) {
        let root: JSONValue
        do {
            root = try JSONParser().parse(text)
        } catch {
            throw .json(error)
        }
        guard root["format"]?.integerValue == Self.fileFormat else { throw .field("format") }
        let entries = try locatedRows(root["relays"], field: "relays", name: "address") { address, lat, lon in
            guard (try? RelayAddress.normalize(address)) == address else { return "address '\(address)' is not normalised" }
            guard (-90...90).contains(lat), (-180...180).contains(lon) else { return "coordinates out of range" }
            return nil
        }.map { RelayEntry(address: $0.name, latitude: $0.lat, longitude: $0.lon) }
        var source: RelayDirectorySource?
        if let s = root["source"] {
            guard let file = s["file"]?.stringValue, let sha = s["sha256"]?.stringValue,
                let rows = s["data_rows"]?.integerValue, let unique = s["unique_relays"]?.integerValue,
                let merged = s["merged_duplicates"]?.integerValue
            else { throw .field("source") }
            source = RelayDirectorySource(
                file: file,
                sha256: sha,
                dataRows: Int(rows),
                uniqueRelays: Int(unique),
                mergedDuplicates: Int(merged)
            )
        }
        var android: AndroidRelayList?
        if let section = root["android"] { android = try AndroidRelayList(jsonValue: section) }
        self.init(entries: entries, source: source, android: android)
    }
}

extension AndroidRelayList {
    var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = []
        if let source {
            members.append(
                sourceJSON(
                    file: source.file, sha256: source.sha256, dataRows: source.dataRows,
                    counts: [("skipped_rows", source.skippedRows)]))
        }
        members.append(("relays", locatedRowsJSON(entries.map { ($0.url, $0.latitude, $0.longitude) }, name: "url")))
        return .object(members)
    }

    /// The `android` section. Every URL must be one the app's own reading could have produced (trimmed, no
    /// comma, with a scheme); the bridge re-checks it with the iOS address rules before connecting anyway.
    init(jsonValue section: JSONValue) throws(RelayDirectoryFileError) {
        let entries = try locatedRows(section["relays"], field: "android.relays", name: "url") { url, lat, lon in
            guard lat.isFinite, lon.isFinite else { return "coordinates not finite" }
            guard !url.isEmpty, !url.unicodeScalars.contains(","), Self.appURL(url.unicodeScalars[...]) == url else {
                return "url '\(url)' is not one the app's reading makes"
            }
            return nil
        }.map { AndroidRelayEntry(url: $0.name, latitude: $0.lat, longitude: $0.lon) }
        var source: AndroidRelayListSource?
        if let s = section["source"] {
            guard let file = s["file"]?.stringValue, let sha = s["sha256"]?.stringValue,
                let rows = s["data_rows"]?.integerValue, let skipped = s["skipped_rows"]?.integerValue
            else { throw .field("android.source") }
            source = AndroidRelayListSource(file: file, sha256: sha, dataRows: Int(rows), skippedRows: Int(skipped))
        }
        self.init(entries: entries, source: source)
    }
}

/// `("source", {file, sha256, data_rows, <counts>…})`: the source member of both lists, `counts` in their order.
private func sourceJSON(file: String, sha256: String, dataRows: Int, counts: [(String, Int)]) -> (String, JSONValue) {
    let fixed: [(String, JSONValue)] = [
        ("file", .string(file)), ("sha256", .string(sha256)), ("data_rows", .integer(Int64(dataRows))),
    ]
    return ("source", .object(fixed + counts.map { ($0.0, .integer(Int64($0.1))) }))
}

/// `[{<name>, lat, lon}]`: the row form of both lists.
private func locatedRowsJSON(_ rows: [(String, Double, Double)], name: String) -> JSONValue {
    .array(rows.map { .object([(name, .string($0.0)), ("lat", .double($0.1)), ("lon", .double($0.2))]) })
}

/// Reads `[{<name>, lat, lon}]` back; `problem` names what is wrong with a row, or nil.
private func locatedRows(
    _ value: JSONValue?,
    field: String,
    name: String,
    problem: (String, Double, Double) -> String?
) throws(RelayDirectoryFileError) -> [(name: String, lat: Double, lon: Double)] {
    guard let rows = value?.arrayValue else { throw .field(field) }
    var result: [(name: String, lat: Double, lon: Double)] = []
    for (index, row) in rows.enumerated() {
        guard let text = row[name]?.stringValue, let lat = row["lat"]?.numberValue, let lon = row["lon"]?.numberValue
        else { throw .relay(index: index, "\(field): needs \(name), lat and lon") }
        if let problem = problem(text, lat, lon) { throw .relay(index: index, "\(field): \(problem)") }
        result.append((text, lat, lon))
    }
    return result
}
