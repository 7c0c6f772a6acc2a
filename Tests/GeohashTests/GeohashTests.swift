import Geohash
import Testing

/// Vectors of NOSTR-GEO §13.1 (upstream tests) and §13.2 (computed with the app's own algorithm).
@Suite("Geohash")
struct GeohashTests {
    @Test("encode: Statue of Liberty prefixes, San Francisco, origin, clamping (§13.2)")
    func encode() {
        let liberty = ["dr", "dr5r", "dr5r7", "dr5r7p", "dr5r7p4", "dr5r7p4r"]
        for (precision, expected) in zip([2, 4, 5, 6, 7, 8], liberty) {
            #expect(GeohashCell.encode(latitude: 40.6892, longitude: -74.0445, precision: precision).string == expected)
        }
        #expect(GeohashCell.encode(latitude: 37.78, longitude: -122.41, precision: 6).string == "9q8yym")
        #expect(GeohashCell.encode(latitude: 0, longitude: 0, precision: 6).string == "s00000")
        #expect(GeohashCell.encode(latitude: 100, longitude: 200, precision: 4).string == "zzzz")
        #expect(GeohashCell.encode(latitude: 89.9999, longitude: 0, precision: 8).string == "upbpbpbp")
        #expect(GeohashCell.encode(latitude: 0, longitude: 179.9999, precision: 5).string == "xbpbp")
        #expect(GeohashCell.encode(latitude: 1, longitude: 1, precision: 12).precision == 12)
    }

    @Test("centre and bounds of u4pruy (§13.2)")
    func decode() throws {
        let cell = try GeohashCell("u4pruy")
        #expect(cell.center.latitude == 57.64801025390625)
        #expect(cell.center.longitude == 10.4095458984375)
        #expect(cell.bounds == Bounds(minLatitude: 57.645263671875, maxLatitude: 57.6507568359375,
                                      minLongitude: 10.404052734375, maxLongitude: 10.4150390625))
        #expect(try GeohashCell("9q8yy").center == (37.77099609375, -122.40966796875))
        #expect(try GeohashCell("dr5reg").center == (40.71258544921875, -74.0093994140625))
        #expect(try GeohashCell("87yw7t").center == (22.22259521484375, -159.4500732421875))
        let b = try GeohashCell("u4pruy").bounds
        #expect(b.maxLatitude - b.minLatitude == 0.0054931640625)
        #expect(b.maxLongitude - b.minLongitude == 0.010986328125)
    }

    @Test(
        "neighbours in N, NE, E, SE, S, SW, W, NW order (§13.2)",
        arguments: [
            ("u4pruy", "u4pruz u4prvp u4prvn u4prvj u4pruv u4prut u4pruw u4prux"),
            ("u4pruydq", "u4pruydr u4pruydx u4pruydw u4pruydt u4pruydm u4pruydj u4pruydn u4pruydp"),
            ("9q8yy", "9q8zn 9q8zp 9q8yz 9q8yx 9q8yw 9q8yt 9q8yv 9q8zj"),
            ("dr5reg", "dr5reu dr5rsh dr5rs5 dr5rs4 dr5ref dr5red dr5ree dr5res"),
            ("87yw7t", "87yw7w 87yw7y 87yw7v 87yw7u 87yw7s 87yw7k 87yw7m 87yw7q"),
            // Antimeridian: longitudes wrap into [-180, 180].
            ("xbpbp", "xbpbr 80002 80000 2pbpb rzzzz rzzzy xbpbn xbpbq"),
        ])
    func neighbors(cell: String, expected: String) throws {
        let found = try GeohashCell(cell).neighbors.map(\.cell.string)
        #expect(found == expected.split(separator: " ").map(String.init))
    }

    @Test("a polar cell skips the directions across the pole (§13.2: E, SE, S, SW, W only)")
    func polar() throws {
        let neighbors = try GeohashCell("upbpbpbp").neighbors
        #expect(neighbors.map(\.cell.string) == ["upbpbpbr", "upbpbpbq", "upbpbpbn", "gzzzzzzy", "gzzzzzzz"])
        #expect(neighbors.map(\.direction) == [.east, .southEast, .south, .southWest, .west])
    }

    @Test("ring = cell + 8 neighbours, cell first (the 9-cell #r filter)")
    func ring() throws {
        let ring = try GeohashCell("u4pruy").ring.map(\.string)
        #expect(ring == ["u4pruy", "u4pruz", "u4prvp", "u4prvn", "u4prvj", "u4pruv", "u4prut", "u4pruw", "u4prux"])
    }

    @Test("validation: lowercase alphabet, 1–12 characters")
    func validation() {
        #expect(throws: GeohashCell.ValidationError.empty) { try GeohashCell("") }
        #expect(throws: GeohashCell.ValidationError.tooLong(13)) { try GeohashCell("u4pruyu4pruyu") }
        #expect((try? GeohashCell("u4pruyu4pruy")) != nil)
        #expect(throws: GeohashCell.ValidationError.invalidCharacter("U")) { try GeohashCell("U4PRUY") }
        for bad in ["u4pa", "u4pi", "u4pl", "u4po", "u4p-", "u4p é"] {
            #expect(throws: GeohashCell.ValidationError.self) { try GeohashCell(bad) }
        }
    }

    @Test("level precisions are prefixes of one another (87yw7tcx)")
    func levels() throws {
        let building = try GeohashCell("87yw7tcx")
        #expect([2, 4, 5, 6, 7].map { building.truncated(to: $0).string } == ["87", "87yw", "87yw7", "87yw7t", "87yw7tc"])
    }

    @Test("encode∘decode round-trips for random points at every precision")
    func roundTrip() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let lat = Double.random(in: -90...90, using: &rng)
            let lon = Double.random(in: -180...180, using: &rng)
            let precision = Int.random(in: 1...12, using: &rng)
            let cell = GeohashCell.encode(latitude: lat, longitude: lon, precision: precision)
            let b = cell.bounds
            #expect(b.minLatitude <= lat && lat <= b.maxLatitude && b.minLongitude <= lon && lon <= b.maxLongitude)
            let c = cell.center
            #expect(GeohashCell.encode(latitude: c.latitude, longitude: c.longitude, precision: precision) == cell)
        }
    }
}
