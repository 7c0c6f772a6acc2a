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
    /// merged_duplicates}, relays[{address, lat, lon}]}`, relays sorted by address.
    public var jsonValue: JSONValue {
        var members: [(String, JSONValue)] = [("format", .integer(Self.fileFormat))]
        if let source {
            members.append(
                (
                    "source",
                    .object([
                        ("file", .string(source.file)),
                        ("sha256", .string(source.sha256)),
                        ("data_rows", .integer(Int64(source.dataRows))),
                        ("unique_relays", .integer(Int64(source.uniqueRelays))),
                        ("merged_duplicates", .integer(Int64(source.mergedDuplicates))),
                    ])
                ))
        }
        members.append(
            (
                "relays",
                .array(
                    entries.map {
                        .object([
                            ("address", .string($0.address)), ("lat", .double($0.latitude)),
                            ("lon", .double($0.longitude)),
                        ])
                    })
            ))
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
        guard let relays = root["relays"]?.arrayValue else { throw .field("relays") }
        var entries: [RelayEntry] = []
        for (index, relay) in relays.enumerated() {
            guard let address = relay["address"]?.stringValue, let lat = relay["lat"]?.numberValue,
                let lon = relay["lon"]?.numberValue
            else { throw .relay(index: index, "needs address, lat and lon") }
            guard (try? RelayAddress.normalize(address)) == address else {
                throw .relay(index: index, "address '\(address)' is not normalised")
            }
            guard (-90...90).contains(lat), (-180...180).contains(lon) else {
                throw .relay(index: index, "coordinates out of range")
            }
            entries.append(RelayEntry(address: address, latitude: lat, longitude: lon))
        }
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
        self.init(entries: entries, source: source)
    }
}
