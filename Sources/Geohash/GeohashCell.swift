/// A geohash cell: a validated lowercase base32 geohash of 1–12 characters.
///
/// Encoding interleaves bits starting with longitude, comparing each coordinate with its interval's
/// midpoint (≥ midpoint → 1). Neighbours follow the iOS app exactly (NOSTR-GEO §7): centre ± one cell in
/// the order N, NE, E, SE, S, SW, W, NW, longitude wrapped into [−180, 180], and neighbours whose centre
/// latitude would leave [−90, 90] skipped — so a polar cell has fewer than eight.
public struct GeohashCell: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The lowercase geohash text.
    public let string: String

    public enum Limits {
        /// Longest geohash phones accept (`Geohash.isValidGeohash`); 12 characters is ~3.7 cm × 1.9 cm.
        public static let maxPrecision = 12
    }

    /// Why a string is not a geohash.
    public enum ValidationError: Error, Equatable, Sendable {
        case empty
        case tooLong(Int)
        /// Uppercase is rejected rather than folded: the gateway path (`GatewayService`) rejects it too.
        case invalidCharacter(Character)
    }

    /// The base32 alphabet (no a, i, l, o).
    public static let alphabet: [Character] = Array("0123456789bcdefghjkmnpqrstuvwxyz")

    private static let decodeTable: [Int8] = {
        var table = [Int8](repeating: -1, count: 128)
        for (i, c) in alphabet.enumerated() { table[Int(c.asciiValue!)] = Int8(i) }
        return table
    }()

    /// Validates `text` as a lowercase geohash of 1–12 characters.
    public init(_ text: String) throws(ValidationError) {
        guard !text.isEmpty else { throw .empty }
        let count = text.utf8.count
        guard count <= Limits.maxPrecision else { throw .tooLong(count) }
        for c in text {
            guard let ascii = c.asciiValue, ascii < 128, Self.decodeTable[Int(ascii)] >= 0 else {
                throw .invalidCharacter(c)
            }
        }
        string = text
    }

    private init(trusted: String) { string = trusted }

    /// Number of characters (1–12).
    public var precision: Int { string.utf8.count }

    public var description: String { string }

    public static func < (a: GeohashCell, b: GeohashCell) -> Bool { a.string < b.string }

    /// The cell of `precision` (1–12) containing the point; coordinates are clamped to the valid range.
    public static func encode(latitude: Double, longitude: Double, precision: Int) -> GeohashCell {
        precondition((1...Limits.maxPrecision).contains(precision), "geohash precision must be 1...12")
        let latitude = min(max(latitude, -90), 90)
        let longitude = min(max(longitude, -180), 180)
        var latInterval = (-90.0, 90.0)
        var lonInterval = (-180.0, 180.0)
        var out = ""
        out.reserveCapacity(precision)
        var isLongitude = true
        var bit = 0
        var value = 0
        while out.count < precision {
            if isLongitude {
                let mid = (lonInterval.0 + lonInterval.1) / 2
                if longitude >= mid {
                    value = value << 1 | 1
                    lonInterval.0 = mid
                } else {
                    value <<= 1
                    lonInterval.1 = mid
                }
            } else {
                let mid = (latInterval.0 + latInterval.1) / 2
                if latitude >= mid {
                    value = value << 1 | 1
                    latInterval.0 = mid
                } else {
                    value <<= 1
                    latInterval.1 = mid
                }
            }
            isLongitude.toggle()
            bit += 1
            if bit == 5 {
                out.append(alphabet[value])
                bit = 0
                value = 0
            }
        }
        return GeohashCell(trusted: out)
    }

    /// The cell's bounding box.
    public var bounds: Bounds {
        var lat = (-90.0, 90.0)
        var lon = (-180.0, 180.0)
        var isLongitude = true
        for unit in string.utf8 {
            let value = Int(Self.decodeTable[Int(unit)])
            for shift in stride(from: 4, through: 0, by: -1) {
                let bitSet = (value >> shift) & 1 == 1
                if isLongitude {
                    let mid = (lon.0 + lon.1) / 2
                    if bitSet { lon.0 = mid } else { lon.1 = mid }
                } else {
                    let mid = (lat.0 + lat.1) / 2
                    if bitSet { lat.0 = mid } else { lat.1 = mid }
                }
                isLongitude.toggle()
            }
        }
        return Bounds(minLatitude: lat.0, maxLatitude: lat.1, minLongitude: lon.0, maxLongitude: lon.1)
    }

    /// The centre of the bounding box (used for relay distances).
    public var center: (latitude: Double, longitude: Double) {
        let b = bounds
        return ((b.minLatitude + b.maxLatitude) / 2, (b.minLongitude + b.maxLongitude) / 2)
    }

    /// Compass directions in the order neighbours are returned.
    public enum Direction: String, CaseIterable, Sendable {
        case north = "N", northEast = "NE", east = "E", southEast = "SE"
        case south = "S", southWest = "SW", west = "W", northWest = "NW"

        var offset: (lat: Double, lon: Double) {
            switch self {
            case .north: (1, 0)
            case .northEast: (1, 1)
            case .east: (0, 1)
            case .southEast: (-1, 1)
            case .south: (-1, 0)
            case .southWest: (-1, -1)
            case .west: (0, -1)
            case .northWest: (1, -1)
            }
        }
    }

    /// The up-to-eight neighbouring cells of the same precision, in N, NE, E, SE, S, SW, W, NW order,
    /// with directions skipped where they would cross a pole.
    public var neighbors: [(direction: Direction, cell: GeohashCell)] {
        let b = bounds
        let height = b.maxLatitude - b.minLatitude
        let width = b.maxLongitude - b.minLongitude
        let (lat, lon) = center
        var out: [(Direction, GeohashCell)] = []
        for direction in Direction.allCases {
            let nLat = lat + direction.offset.lat * height
            var nLon = lon + direction.offset.lon * width
            guard nLat >= -90, nLat <= 90 else { continue }
            if nLon > 180 { nLon -= 360 }
            if nLon < -180 { nLon += 360 }
            out.append((direction, .encode(latitude: nLat, longitude: nLon, precision: precision)))
        }
        return out
    }

    /// This cell followed by its neighbours: the 9-cell ring phones subscribe to for the rendezvous.
    public var ring: [GeohashCell] { [self] + neighbors.map(\.cell) }

    /// The prefix of `precision` characters (a coarser cell containing this one).
    public func truncated(to precision: Int) -> GeohashCell {
        precondition(precision >= 1 && precision <= self.precision)
        return GeohashCell(trusted: String(string.prefix(precision)))
    }
}

/// A latitude/longitude box in degrees.
public struct Bounds: Equatable, Sendable {
    public let minLatitude: Double
    public let maxLatitude: Double
    public let minLongitude: Double
    public let maxLongitude: Double

    public init(minLatitude: Double, maxLatitude: Double, minLongitude: Double, maxLongitude: Double) {
        self.minLatitude = minLatitude
        self.maxLatitude = maxLatitude
        self.minLongitude = minLongitude
        self.maxLongitude = maxLongitude
    }
}
