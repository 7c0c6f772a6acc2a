import BridgeApp
import BotCrypto
import BotSupport
import Geohash
import RelayDirectory

/// `bitchat-bridge relays <geohash>` and `bitchat-bridge relays import <csv> [--android <csv>]`.
enum RelaysCommand {
    static let group = CommandGroup(
        name: "relays",
        summary: "Show the Nostr relays chosen for a geohash, or regenerate relays.json from the directory CSVs.",
        subcommands: [
            Subcommand("import", CommandSpec(
                path: "relays import",
                summary: "Regenerate relays.json from bitchat's reviewed online_relays_gps.csv and Android's nostr_relays.csv.",
                positionals: [PositionalSpec(name: "CSV")],
                options: [
                    .value("--android", "CSV",
                           "The Android app's list (its assets/nostr_relays.csv); without it the bridge serves iOS's choice only."),
                    .value("--output", "FILE", "Where to write (default relays.json)."),
                ],
                details: """
                    The iOS list is read all-or-nothing: one bad row rejects the file and the error names its line.
                    The Android list is read as the app reads it: rows the app skips are listed and skipped.
                    """)) { args throws(CommandExit) in
                    try importCSV(path: args.positionals[0], android: args.value("--android"),
                                  output: args.value("--output") ?? "relays.json")
                },
        ],
        fallback: Subcommand("GEOHASH", CommandSpec(
            path: "relays",
            summary: "Show the relays iOS and Android choose for a geohash cell, and the union the bridge uses.",
            positionals: [PositionalSpec(name: "GEOHASH")],
            options: [
                .value("--count", "N", "How many nearest relays per app (default 5, as phones use)."),
                .value("--directory", "FILE", "relays.json to read (default: $BRIDGE_RELAY_FILE, ./relays.json, then next to the binary)."),
                .flag("--json", "Print JSON."),
            ],
            details: """
                iOS: the N relays of its list nearest the centre of the geohash cell by haversine distance
                (R = 6371 km), ties broken by host. Android: the N rows of its own list nearest the centre, ties
                in file order, `:443` and duplicates kept. The bridge connects to both sets, `:443` dropped,
                once per relay.
                """), run: nearest))

    private static func nearest(_ args: ParsedArguments) throws(CommandExit) {
        let cell = try GeohashCommand.parseCell(args.positionals[0])
        var count = RelayDirectory.Limits.phoneRelayCount
        if let text = args.value("--count") {
            guard let n = Int(text), n >= 1, n <= 1000 else { throw .usage("--count '\(text)' must be 1–1000") }
            count = n
        }
        let (directory, path) = try loadDirectory(option: args.value("--directory"))
        let ios = directory.closest(to: cell, count: count)
        let android = directory.android?.closest(to: cell, count: count)
        let bridge = directory.bridgeSelection(places: [cell], count: count)
        let center = cell.center
        if args.has("--json") {
            let row: (String, Double) -> JSONValue = {
                .object([("url", .string($0)), ("distance_km", .double(($1 * 10).rounded() / 10))])
            }
            printJSON(
                .object([
                    ("geohash", .string(cell.string)),
                    ("center", .object([("lat", .double(center.latitude)), ("lon", .double(center.longitude))])),
                    ("directory", .string(path)),
                    ("ios", .array(ios.map { row($0.entry.url, $0.distanceKilometres) })),
                    ("android", android.map { .array($0.map { row($0.entry.url, $0.distanceMetres / 1000) }) } ?? .null),
                    (
                        "bridge",
                        .array(bridge.relays.map { relay in
                            .object([("url", .string(relay.url)), ("chosen_by", .array(relay.apps.map { .string($0.rawValue) }))])
                        })
                    ),
                    (
                        "refused",
                        .array(bridge.refused.map {
                            .object([("url", .string($0.url)), ("reason", .string($0.reason.description))])
                        })
                    ),
                ]))
            return
        }
        let width = (ios.map(\.entry.url) + (android ?? []).map(\.entry.url) + bridge.urls).map(\.count).max() ?? 0
        print("Relays for \(cell), cell centre (\(format(center.latitude, 5)), \(format(center.longitude, 5))), from \(path):")
        print("iOS: nearest \(ios.count) of \(directory.entries.count) relays (ties by host)")
        for selection in ios {
            print("  \(selection.entry.url.padding(toLength: width))  \(format(selection.distanceKilometres, 1)) km")
        }
        if let android, let list = directory.android {
            print("Android: nearest \(android.count) of \(list.entries.count) rows (ties in file order)")
            for selection in android {
                print("  \(selection.entry.url.padding(toLength: width))  \(format(selection.distanceMetres / 1000, 1)) km")
            }
        } else {
            print("Android: this directory has no Android list (regenerate it with relays import --android)")
        }
        let union = directory.android == nil ? "iOS only" : "iOS ∪ Android, :443 dropped, one connection each"
        print("Bridge: \(bridge.relays.count) relays (\(union))")
        for relay in bridge.relays {
            print("  \(relay.url.padding(toLength: width))  \(relay.apps.map(\.rawValue).joined(separator: " "))")
        }
        for refused in bridge.refused {
            print("  not used: \(refused.url): \(refused.reason)")
        }
    }

    static func loadDirectory(option: String?) throws(CommandExit) -> (RelayDirectory, String) {
        try DataFiles.loadRelayDirectory(option: option, setting: "--directory FILE")
    }

    private static func importCSV(path: String, android androidPath: String?, output: String) throws(CommandExit) {
        let (bytes, name, sha256) = try readCSV(path)
        var directory: RelayDirectory
        do {
            directory = try RelayDirectory.importCSV(bytes, fileName: name, sha256: sha256)
        } catch {
            throw .failure("\(path) rejected: \(error)")
        }
        var skipped: [AndroidSkippedRow] = []
        if let androidPath {
            let (bytes, name, sha256) = try readCSV(androidPath)
            do {
                let android = try AndroidRelayList.importCSV(bytes, fileName: name, sha256: sha256)
                skipped = android.skipped
                directory = RelayDirectory(entries: directory.entries, source: directory.source, android: android.list)
            } catch {
                throw .failure("\(androidPath) rejected: \(error)")
            }
        }
        do {
            try FileIO.writeAtomically(Array((JSONWriter.pretty(directory.jsonValue) + "\n").utf8), to: output, mode: 0o644)
        } catch {
            throw .failure("cannot write \(output): \(error)")
        }
        let source = directory.source!
        print("Wrote \(output): \(source.uniqueRelays) relays from \(source.dataRows) rows "
            + "(\(source.mergedDuplicates) duplicates merged), source sha256 \(source.sha256)")
        guard let android = directory.android, let androidSource = android.source else {
            print("No Android list (--android): the bridge will serve the iOS choice only.")
            return
        }
        print("Android: \(android.entries.count) rows kept of \(androidSource.dataRows) "
            + "(\(androidSource.skippedRows) skipped as the app skips them), source sha256 \(androidSource.sha256)")
        for row in skipped { print("  skipped \(row)") }
        for entry in android.entries {
            if case .failure(let reason) = entry.bridgeAddress {
                print("  the bridge will not connect to \(entry.url): \(reason)")
            }
        }
    }

    /// A CSV's bytes (bounded one byte past the import limit, so an oversized file is reported as such),
    /// its file name and its SHA-256.
    private static func readCSV(_ path: String) throws(CommandExit) -> ([UInt8], String, String) {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.read(path, maxBytes: RelayDirectory.CSVLimits.maxFileBytes + 1)
        } catch {
            throw .failure("cannot read \(path): \(error)")
        }
        return (bytes, path.split(separator: "/").last.map(String.init) ?? path, Hex.encode(SHA256.hash(bytes)))
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
