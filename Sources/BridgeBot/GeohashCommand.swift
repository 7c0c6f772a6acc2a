import BridgeApp
import BotSupport
import Geohash

/// `bitchat-bridge geohash encode|decode|neighbors`: operator helpers printing JSON.
enum GeohashCommand {
    static let compactOption = OptionSpec.flag("--compact", "Print compact JSON on one line.")

    static let group = CommandGroup(
        name: "geohash",
        summary: "Geohash helpers for operators (JSON output).",
        subcommands: [
            Subcommand("encode", CommandSpec(
                path: "geohash encode", summary: "The geohash cell containing a point.",
                positionals: [PositionalSpec(name: "LAT"), PositionalSpec(name: "LON"), .optional("PRECISION")],
                options: [compactOption],
                note: "(precision 1–12, default 6; a negative LAT or LON is a number, not an option)"), run: encode),
            Subcommand("decode", CommandSpec(
                path: "geohash decode", summary: "A cell's precision, centre and bounds.",
                positionals: [PositionalSpec(name: "GH")], options: [compactOption])) { args throws(CommandExit) in
                    let cell = try parseCell(args.positionals[0])
                    printJSON(.object([("geohash", .string(cell.string))] + describe(cell)), compact: args.has("--compact"))
                },
            Subcommand("neighbors", CommandSpec(
                path: "geohash neighbors", summary: "A cell's neighbours (N, NE, E, SE, S, SW, W, NW).",
                positionals: [PositionalSpec(name: "GH")], options: [compactOption],
                details: "Directions that would cross a pole are left out."), aliases: ["neighbours"], run: neighbors),
        ])

    private static func encode(_ args: ParsedArguments) throws(CommandExit) {
        let p = args.positionals
        guard let lat = Double(p[0]), lat.isFinite, (-90...90).contains(lat) else {
            throw .usage("LAT '\(p[0])' must be a number from -90 to 90")
        }
        guard let lon = Double(p[1]), lon.isFinite, (-180...180).contains(lon) else {
            throw .usage("LON '\(p[1])' must be a number from -180 to 180")
        }
        var precision = 6
        if p.count == 3 {
            guard let n = Int(p[2]), (1...GeohashCell.Limits.maxPrecision).contains(n) else {
                throw .usage("PRECISION '\(p[2])' must be a whole number from 1 to 12")
            }
            precision = n
        }
        let cell = GeohashCell.encode(latitude: lat, longitude: lon, precision: precision)
        printJSON(.object([("geohash", .string(cell.string))] + describe(cell)), compact: args.has("--compact"))
    }

    private static func neighbors(_ args: ParsedArguments) throws(CommandExit) {
        let cell = try parseCell(args.positionals[0])
        printJSON(
            .object([
                ("geohash", .string(cell.string)),
                (
                    "neighbors",
                    .array(
                        cell.neighbors.map {
                            .object([("direction", .string($0.direction.rawValue)), ("geohash", .string($0.cell.string))])
                        })
                ),
            ]), compact: args.has("--compact"))
    }

    static func parseCell(_ text: String) throws(CommandExit) -> GeohashCell {
        do {
            return try GeohashCell(text)
        } catch {
            throw .usage("'\(text)' is not a lowercase geohash of 1–12 characters from 0-9 b-z without a i l o")
        }
    }

    private static func describe(_ cell: GeohashCell) -> [(String, JSONValue)] {
        let b = cell.bounds
        let c = cell.center
        return [
            ("precision", .integer(Int64(cell.precision))),
            ("center", .object([("lat", .double(c.latitude)), ("lon", .double(c.longitude))])),
            (
                "bounds",
                .object([
                    ("min_lat", .double(b.minLatitude)), ("max_lat", .double(b.maxLatitude)),
                    ("min_lon", .double(b.minLongitude)), ("max_lon", .double(b.maxLongitude)),
                ])
            ),
        ]
    }
}
