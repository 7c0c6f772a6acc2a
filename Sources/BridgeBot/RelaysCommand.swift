import BotCrypto
import BotSupport
import Geohash
import RelayDirectory

/// `bitchat-bridge relays <geohash>` and `bitchat-bridge relays import <csv>`.
enum RelaysCommand {
    static let spec = CommandSpec(
        path: "relays",
        summary: "Show the Nostr relays chosen for a geohash, or regenerate relays.json from the directory CSV.",
        usage: [
            "GEOHASH [--count N] [--directory FILE] [--json]",
            "import CSV [--output FILE]",
        ],
        options: [
            .value("--count", "N", "How many nearest relays (default 5, as phones use)."),
            .value("--directory", "FILE", "relays.json to read (default: $BRIDGE_RELAY_FILE, ./relays.json, then next to the binary)."),
            .value("--output", "FILE", "Where import writes (default relays.json)."),
            .flag("--json", "Print JSON."),
        ],
        details: """
            Selection follows the iOS app: the N relays nearest the centre of the geohash cell by haversine
            distance (R = 6371 km), ties broken by host. Import is all-or-nothing: one bad row rejects the file
            and the error names its line.
            """
    )

    static func run(_ arguments: [String]) throws(CommandExit) {
        let args = try ParsedArguments.parse(arguments, spec: spec)
        guard let first = args.positionals.first else { throw .usage("missing GEOHASH (or 'import CSV')") }
        if first == "import" {
            var rest = args
            rest.positionals.removeFirst()
            try importCSV(path: try rest.requirePositionals(["csv"])[0], output: args.value("--output") ?? "relays.json")
            return
        }
        let cell = try GeohashCommand.parseCell(try args.requirePositionals(["geohash"])[0])
        var count = 5
        if let text = args.value("--count") {
            guard let n = Int(text), n >= 1, n <= 1000 else { throw .usage("--count '\(text)' must be 1–1000") }
            count = n
        }
        let (directory, path) = try loadDirectory(option: args.value("--directory"))
        let chosen = directory.closest(to: cell, count: count)
        let center = cell.center
        if args.has("--json") {
            printJSON(
                .object([
                    ("geohash", .string(cell.string)),
                    ("center", .object([("lat", .double(center.latitude)), ("lon", .double(center.longitude))])),
                    ("directory", .string(path)),
                    (
                        "relays",
                        .array(
                            chosen.map {
                                .object([
                                    ("url", .string($0.entry.url)),
                                    ("distance_km", .double(($0.distanceKilometres * 10).rounded() / 10)),
                                ])
                            })
                    ),
                ]))
            return
        }
        print("Nearest \(chosen.count) of \(directory.entries.count) relays to the centre of \(cell) "
            + "(\(format(center.latitude, 5)), \(format(center.longitude, 5))) from \(path):")
        let width = chosen.map(\.entry.url.count).max() ?? 0
        for selection in chosen {
            print("  \(selection.entry.url.padding(toLength: width))  \(format(selection.distanceKilometres, 1)) km")
        }
    }

    static func loadDirectory(option: String?) throws(CommandExit) -> (RelayDirectory, String) {
        let candidates = Paths.relayDirectoryCandidates(option: option)
        for path in candidates {
            let bytes: [UInt8]
            do {
                bytes = try FileIO.read(path, maxBytes: 8 << 20)
            } catch {
                if error.isNotFound && option == nil { continue }
                throw .failure("cannot read relay directory: \(error)")
            }
            do {
                return (try RelayDirectory(json: String(decoding: bytes, as: UTF8.self)), path)
            } catch {
                throw .failure("\(path): \(error)")
            }
        }
        throw .failure("no relay directory found (tried \(candidates.joined(separator: ", "))); pass --directory FILE")
    }

    private static func importCSV(path: String, output: String) throws(CommandExit) {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.read(path, maxBytes: RelayDirectory.CSVLimits.maxFileBytes + 1)
        } catch {
            throw .failure("cannot read \(path): \(error)")
        }
        let directory: RelayDirectory
        do {
            let name = path.split(separator: "/").last.map(String.init) ?? path
            directory = try RelayDirectory.importCSV(bytes, fileName: name, sha256: Hex.encode(SHA256.hash(bytes)))
        } catch {
            throw .failure("\(path) rejected: \(error)")
        }
        do {
            try FileIO.writeAtomically(Array((JSONWriter.pretty(directory.jsonValue) + "\n").utf8), to: output, mode: 0o644)
        } catch {
            throw .failure("cannot write \(output): \(error)")
        }
        let source = directory.source!
        print("Wrote \(output): \(source.uniqueRelays) relays from \(source.dataRows) rows "
            + "(\(source.mergedDuplicates) duplicates merged), source sha256 \(source.sha256)")
    }

    private static func format(_ value: Double, _ decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        var text = "\(rounded)"
        if let dot = text.firstIndex(of: ".") {
            let fraction = text[text.index(after: dot)...].count
            if fraction < decimals { text += String(repeating: "0", count: decimals - fraction) }
        }
        return text
    }
}
