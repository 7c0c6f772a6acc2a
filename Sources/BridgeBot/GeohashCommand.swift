import BotSupport
import Geohash

/// `bitchat-bridge geohash encode|decode|neighbors`: operator helpers printing JSON.
enum GeohashCommand {
    static let spec = CommandSpec(
        path: "geohash",
        summary: "Geohash helpers for operators (JSON output).",
        usage: ["encode LAT LON [PRECISION]   (precision 1–12, default 6)", "decode GH", "neighbors GH"],
        options: [.flag("--compact", "Print compact JSON on one line.")],
        details: "Neighbours are listed N, NE, E, SE, S, SW, W, NW; directions that would cross a pole are left out."
    )

    static func run(_ arguments: [String]) throws(CommandExit) {
        let args = try ParsedArguments.parse(arguments, spec: spec)
        guard let action = args.positionals.first else { throw .usage("missing action: encode, decode or neighbors") }
        var rest = args
        rest.positionals.removeFirst()
        let value: JSONValue
        switch action {
        case "encode":
            let p = try rest.requirePositionals(["lat", "lon", "precision"], optional: 1)
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
            value = .object([("geohash", .string(cell.string))] + describe(cell))
        case "decode":
            let cell = try parseCell(try rest.requirePositionals(["gh"])[0])
            value = .object([("geohash", .string(cell.string))] + describe(cell))
        case "neighbors", "neighbours":
            let cell = try parseCell(try rest.requirePositionals(["gh"])[0])
            value = .object([
                ("geohash", .string(cell.string)),
                (
                    "neighbors",
                    .array(
                        cell.neighbors.map {
                            .object([("direction", .string($0.direction.rawValue)), ("geohash", .string($0.cell.string))])
                        })
                ),
            ])
        default:
            throw .usage("unknown action '\(action)': use encode, decode or neighbors")
        }
        printJSON(value, compact: args.has("--compact"))
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
