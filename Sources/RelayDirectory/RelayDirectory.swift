import BotSupport
public import Geohash

#if canImport(Glibc)
import Glibc
#endif

/// One relay of the directory: its stored address (`host` or `host:port`) and location.
public struct RelayEntry: Hashable, Sendable {
    public let address: String
    public let latitude: Double
    public let longitude: Double

    public init(address: String, latitude: Double, longitude: Double) {
        self.address = address
        self.latitude = latitude
        self.longitude = longitude
    }

    /// The relay's WebSocket URL (always `wss://`).
    public var url: String { "wss://" + address }
}

/// A relay chosen for a place, with its great-circle distance from the cell centre.
public struct RelaySelection: Equatable, Sendable {
    public let entry: RelayEntry
    public let distanceKilometres: Double
}

/// Where a directory came from, recorded in `relays.json` so a reader can check it against the CSV.
public struct RelayDirectorySource: Equatable, Sendable {
    public var file: String
    public var sha256: String
    public var dataRows: Int
    public var uniqueRelays: Int
    public var mergedDuplicates: Int

    public init(file: String, sha256: String, dataRows: Int, uniqueRelays: Int, mergedDuplicates: Int) {
        self.file = file
        self.sha256 = sha256
        self.dataRows = dataRows
        self.uniqueRelays = uniqueRelays
        self.mergedDuplicates = mergedDuplicates
    }
}

/// bitchat's reviewed geo-relay directory and the iOS selection rule: the N relays nearest the centre of
/// a geohash cell by haversine distance (R = 6371 km), ties broken by address so that every device with
/// the same file picks the same set (NOSTR-GEO §3.2). It also carries the Android app's own list
/// (``android``, §3.3), so the bridge can serve both apps' choices (``bridgeSelection(places:count:)``).
public struct RelayDirectory: Sendable {
    public enum Limits {
        /// Mean Earth radius the iOS app uses for haversine.
        public static let earthRadiusKilometres = 6371.0
        /// How many nearest relays both apps use per geohash (iOS `TransportConfig.nostrGeoRelayCount`,
        /// Android `nRelays = 5`) for channel chat, presence and the bridge.
        public static let phoneRelayCount = 5
    }

    /// The iOS list, sorted by address.
    public let entries: [RelayEntry]
    public let source: RelayDirectorySource?
    /// The Android app's list in file order, when the directory carries one.
    public let android: AndroidRelayList?

    public init(entries: [RelayEntry], source: RelayDirectorySource? = nil, android: AndroidRelayList? = nil) {
        self.entries = entries.sorted { $0.address < $1.address }
        self.source = source
        self.android = android
    }

    /// The `count` relays closest to the centre of `cell` by the iOS rule, nearest first.
    public func closest(to cell: GeohashCell, count: Int) -> [RelaySelection] {
        let (lat, lon) = cell.center
        return closest(latitude: lat, longitude: lon, count: count)
    }

    /// The `count` relays closest to a point, nearest first, ties by address.
    public func closest(latitude: Double, longitude: Double, count: Int) -> [RelaySelection] {
        let ranked = entries.map {
            RelaySelection(
                entry: $0,
                distanceKilometres: Self.haversineKilometres(latitude, longitude, $0.latitude, $0.longitude)
            )
        }
        .sorted {
            $0.distanceKilometres != $1.distanceKilometres
                ? $0.distanceKilometres < $1.distanceKilometres : $0.entry.address < $1.entry.address
        }
        return Array(ranked.prefix(max(0, count)))
    }

    /// Great-circle distance between two points in kilometres.
    public static func haversineKilometres(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let radians = Double.pi / 180
        let dLat = (lat2 - lat1) * radians
        let dLon = (lon2 - lon1) * radians
        let a = sin(dLat / 2) * sin(dLat / 2) + cos(lat1 * radians) * cos(lat2 * radians) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * Limits.earthRadiusKilometres * atan2(a.squareRoot(), (1 - a).squareRoot())
    }
}
