public import Geohash

/// The channel levels the apps compute from a GPS fix (NOSTR-GEO §5.1), by name and geohash length.
public enum ChannelLevel: Int, CaseIterable, Sendable, Comparable, CustomStringConvertible {
    case region = 2
    case province = 4
    case city = 5
    case neighborhood = 6
    case block = 7
    case building = 8

    public var name: String {
        switch self {
        case .region: "region"
        case .province: "province"
        case .city: "city"
        case .neighborhood: "neighborhood"
        case .block: "block"
        case .building: "building"
        }
    }

    public var description: String { name }

    /// `region` … `building`, or the length (`2`, `4`, …); nil for anything else.
    public init?(name: String) {
        if let level = Self.allCases.first(where: { $0.name == name }) {
            self = level
        } else if let length = Int(name), let level = ChannelLevel(rawValue: length) {
            self = level
        } else {
            return nil
        }
    }

    public static func < (a: ChannelLevel, b: ChannelLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Which geohash channels a bridge configured for one cell serves (issue 16 part 3).
///
/// People at one site view different levels: a phone computes all six from its GPS fix and iOS shows a
/// `fromGateway` message only on the exact level it is viewing (`GatewayService`). So the bridge serves,
/// by default, the configured cell, its **parents at the apps' levels** (for `u4pruy`: `u4`, `u4pr`,
/// `u4pru`) and — when the cell is a 6-character neighbourhood — its **32 block-level children**
/// (`u4pruy0` … `u4pruyz`). Deeper descendants are not served: a 5-character cell has 1,024 block cells,
/// and the building level is for location notes, not chat. Each level is subscribed and downlinked with its
/// own geohash; all of them share the one airtime budget (``AirtimeScheduler``).
public enum ChannelLevels {
    /// The levels served by default for `cell`: every app level with a parent or a block-level child.
    public static func defaultLevels(for cell: GeohashCell) -> Set<ChannelLevel> {
        var levels = Set(ChannelLevel.allCases.filter { $0.rawValue < cell.precision })
        if cell.precision == ChannelLevel.neighborhood.rawValue { levels.insert(.block) }
        return levels
    }

    /// The channels served for `cell` at `levels` (nil = ``defaultLevels(for:)``): the cell first, then the
    /// parents shortest first, then the children in alphabet order. Levels that are neither a parent's nor a
    /// block-level child's are ignored (the configuration refuses them first).
    public static func channels(for cell: GeohashCell, levels: Set<ChannelLevel>? = nil) -> [GeohashCell] {
        let chosen = (levels ?? defaultLevels(for: cell)).intersection(defaultLevels(for: cell))
        var out = [cell]
        for level in chosen.sorted() where level.rawValue < cell.precision {
            out.append(cell.truncated(to: level.rawValue))
        }
        if chosen.contains(.block), cell.precision == ChannelLevel.neighborhood.rawValue {
            for character in GeohashCell.alphabet {
                if let child = try? GeohashCell(cell.string + String(character)) { out.append(child) }
            }
        }
        return out
    }
}
