import BotSupport
import Foundation
import Geohash
import RelayDirectory
import Testing

private func csv(_ rows: [String], header: String = "Relay URL,Latitude,Longitude") -> [UInt8] {
    Array(([header] + rows).joined(separator: "\r\n").utf8) + [0x0d, 0x0a]
}

private func load(_ rows: [String]) throws -> RelayDirectory {
    try RelayDirectory.importCSV(csv(rows), fileName: "t.csv", sha256: "")
}

@Suite("Relay directory import (NOSTR-GEO §3.2, §12)")
struct RelayImportTests {
    @Test("URL forms normalise to one entry per host; :443 dropped; identical duplicates merge (§13.1)")
    func normalisation() throws {
        let directory = try load([
            "wss://one.example/,10,20", "https://one.example,10,20", "wss://one.example:443/,10,20",
            "two.example,11,21", "wss://two.example:443,11,21",
        ])
        #expect(directory.entries == [
            RelayEntry(address: "one.example", latitude: 10, longitude: 20),
            RelayEntry(address: "two.example", latitude: 11, longitude: 21),
        ])
        #expect(directory.source?.dataRows == 5)
        #expect(directory.source?.mergedDuplicates == 3)
        #expect(try load(["Chorus.Mikedilger.com:444,1,2"]).entries.first?.address == "chorus.mikedilger.com:444")
    }

    @Test(
        "one bad row rejects the whole file, naming the line (§13.1 rejected CSVs)",
        arguments: [
            "http://bad.example,1,2", "wss://user:pw@bad.example,1,2", "wss://bad.example/path,1,2",
            "wss://bad.example/?,1,2", "wss://bad.example/#,1,2", "bad.example:0,1,2", "bad.example:99999,1,2",
            "localhost,1,2", "relay.localhost,1,2", "box.local,1,2", "svc.internal,1,2", "bücher.example,1,2",
            "bad.example,NaN,2", "bad.example,1_0,2", "bad.example,١٠,2", "bad.example,１０,2",
            "bad.example,91,2", "bad.example,1,181", "bad.example,1", "bad.example,1,2,3", "1.2.3.4,1,2",
            "nodot,1,2", "-bad.example,1,2", "bad.example.,1,2", "bad\u{202E}.example,1,2", "bad.example,1.,2e",
        ])
    func rejectsRow(row: String) {
        #expect(throws: RelayDirectoryImportError.self) { try load(["good.example,1,2", row]) }
        do {
            _ = try load(["good.example,1,2", row])
        } catch let error as RelayDirectoryImportError {
            // Line 1 is the header, so the bad row is line 3.
            #expect(error.description.contains("line 3"))
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test("conflicting duplicate is rejected and names both lines")
    func conflict() {
        #expect(throws: RelayDirectoryImportError.conflictingDuplicate(line: 3, address: "a.example", firstLine: 2)) {
            try load(["a.example,1,2", "wss://a.example:443,1,3"])
        }
    }

    @Test("file-level rejections: header, BOM, size, quotes, empty")
    func fileLevel() {
        #expect(throws: RelayDirectoryImportError.self) { try RelayDirectory.importCSV(csv(["a.example,1,2"], header: "url,lat,lng"), fileName: "", sha256: "") }
        #expect(throws: RelayDirectoryImportError.byteOrderMark) {
            try RelayDirectory.importCSV([0xEF, 0xBB, 0xBF] + csv(["a.example,1,2"]), fileName: "", sha256: "")
        }
        #expect(throws: RelayDirectoryImportError.fileSize(0)) { try RelayDirectory.importCSV([], fileName: "", sha256: "") }
        let big = [UInt8](repeating: 0x41, count: RelayDirectory.CSVLimits.maxFileBytes + 1)
        #expect(throws: RelayDirectoryImportError.fileSize(big.count)) { try RelayDirectory.importCSV(big, fileName: "", sha256: "") }
        #expect(throws: RelayDirectoryImportError.quoteCharacter(line: 2)) { try load(["\"a.example\",1,2"]) }
        #expect(throws: RelayDirectoryImportError.empty) { try load([]) }
        #expect(throws: RelayDirectoryImportError.invalidUTF8) { try RelayDirectory.importCSV([0xff, 0xfe], fileName: "", sha256: "") }
        // The iOS header spelling is accepted too, case-insensitively.
        #expect((try? RelayDirectory.importCSV(csv(["a.example,1,2"], header: " RELAY URL,lat,LON "), fileName: "", sha256: "")) != nil)
    }

    @Test("row limit: 5,000 data rows accepted, 5,001 rejected")
    func rowLimit() throws {
        let rows = (0..<5000).map { "r\($0).example,1,2" }
        #expect(try load(rows).entries.count == 5000)
        #expect(throws: RelayDirectoryImportError.tooManyRows(5001)) { try load(rows + ["x.example,1,2"]) }
    }
}

@Suite("Relay selection (haversine, ties by host)")
struct RelaySelectionTests {
    @Test("count 2 → close, medium; count 10 → all three; via a precision-6 geohash too (§13.1)")
    func nearest() throws {
        let directory = try load(["far.example,40.7128,-74.0060", "close.example,37.7749,-122.4194",
                                   "medium.example,34.0522,-118.2437"])
        #expect(directory.closest(latitude: 37.78, longitude: -122.41, count: 2).map(\.entry.url)
            == ["wss://close.example", "wss://medium.example"])
        #expect(directory.closest(latitude: 37.78, longitude: -122.41, count: 10).map(\.entry.url)
            == ["wss://close.example", "wss://medium.example", "wss://far.example"])
        let cell = GeohashCell.encode(latitude: 37.78, longitude: -122.41, precision: 6)
        #expect(directory.closest(to: cell, count: 2).map(\.entry.url) == ["wss://close.example", "wss://medium.example"])
    }

    @Test("equal distances are ordered by host (alpha, mike before zeta)")
    func ties() throws {
        let directory = try load(["zeta.example,10,10", "mike.example,10,10", "alpha.example,10,10"])
        #expect(directory.closest(latitude: 10, longitude: 10, count: 2).map(\.entry.url)
            == ["wss://alpha.example", "wss://mike.example"])
    }

    @Test("haversine: one degree of latitude is about 111.19 km; antipodes about 20,015 km")
    func haversine() {
        #expect(abs(RelayDirectory.haversineKilometres(0, 0, 1, 0) - 111.195) < 0.01)
        #expect(abs(RelayDirectory.haversineKilometres(0, 0, 0, 180) - 20015.09) < 0.1)
    }
}

@Suite("The committed relays.json")
struct CommittedDirectoryTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func committed() throws -> RelayDirectory {
        try RelayDirectory(json: String(contentsOf: root.appendingPathComponent("relays.json"), encoding: .utf8))
    }

    static func fixture(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: Bundle.module.url(forResource: name, withExtension: "csv", subdirectory: "Fixtures")!))
    }

    static let androidSHA256 = "9986969f437c9a842f9f34a23f09bcfa552a56e70b1b1d86304d006dbb437377"

    @Test("is exactly what `relays import … --android …` makes of both CSVs (source hashes and counts recorded)")
    func matchesCSV() throws {
        let ios = try RelayDirectory.importCSV(try Self.fixture("online_relays_gps"), fileName: "online_relays_gps.csv", sha256: "811523100064820b024714eaf3bbe0a9ba99a3c257e453e01bc1bc0f3bf8401a")
        let android = try AndroidRelayList.importCSV(try Self.fixture("nostr_relays"), fileName: "nostr_relays.csv", sha256: Self.androidSHA256)
        #expect(android.skipped.isEmpty)
        let imported = RelayDirectory(entries: ios.entries, source: ios.source, android: android.list)
        let file = try String(contentsOf: Self.root.appendingPathComponent("relays.json"), encoding: .utf8)
        #expect(JSONWriter.pretty(imported.jsonValue) + "\n" == file)
        let directory = try Self.committed()
        #expect(directory.entries.count == 326)
        #expect(directory.source == RelayDirectorySource(file: "online_relays_gps.csv",
            sha256: "811523100064820b024714eaf3bbe0a9ba99a3c257e453e01bc1bc0f3bf8401a", dataRows: 441, uniqueRelays: 326,
            mergedDuplicates: 115))
        // NOSTR-GEO §3.3: 415 rows after the header, file order kept, `:443` and case kept; 326 relays once
        // the bridge normalises them, and every row is one the bridge can connect to.
        let list = try #require(directory.android)
        #expect(list.source == AndroidRelayListSource(file: "nostr_relays.csv", sha256: Self.androidSHA256, dataRows: 415, skippedRows: 0))
        #expect(list.entries == android.list.entries)
        #expect(list.entries.count == 415)
        #expect(list.entries.first == AndroidRelayEntry(url: "wss://nostr.bitcoiner.social", latitude: 40.7608, longitude: -111.891))
        #expect(list.entries[2].url == "wss://relay.veganostr.com:443")
        #expect(Set(list.entries.compactMap { try? $0.bridgeAddress.get() }).count == 326)
        #expect(list.entries.allSatisfy { (try? $0.bridgeAddress.get()) != nil })
    }

    @Test(
        "nearest five match NOSTR-GEO §13.3",
        arguments: [
            ("u4pruy", "aeon.libretechsystems.xyz weboftrust.libretechsystems.xyz nostr.nodesmap.com relay.endfiat.money relay.fckstate.net", "242.7 244.1 482.4 482.4 482.4"),
            ("9q8yy", "bucket.coracle.social kotukonostr.onrender.com nostr-kyomu-haskell.onrender.com nostr-rs-relay-qj1h.onrender.com 0x-nostr-relay.fly.dev", "1.3 1.3 1.3 1.3 2.1"),
            ("9q8yym", "bucket.coracle.social kotukonostr.onrender.com nostr-kyomu-haskell.onrender.com nostr-rs-relay-qj1h.onrender.com 0x-nostr-relay.fly.dev", "1.6 1.6 1.6 1.6 2.2"),
            ("dr5r7p", "bitchat.nostr1.com fanfares.nostr1.com relay.keykeeper.world relay-us.zombi.cloudrodion.com testr.nymble.world", ""),
            ("dr5reg", "bitchat.nostr1.com fanfares.nostr1.com relay.keykeeper.world relay-us.zombi.cloudrodion.com testr.nymble.world", ""),
            ("u33dc0", "nostr.mikoshi.de relay.agora.social cs-relay.nostrdev.com nos.lol nostr.data.haus", "0.4 228.5 238.2 238.2 238.2"),
            ("gcpvj0", "nostr.chaima.info relay.bornheimer.app relay.qstr.app relay.staging.plebeian.market relay.typedcypher.com", "0.1 0.1 0.1 0.1 0.1"),
            ("87yw7t", "0x-nostr-relay.fly.dev conduitl2.fly.dev nostrcity-club.fly.dev bucket.coracle.social kotukonostr.onrender.com", "3927.4 3927.4 3927.4 3930.8 3930.8"),
            ("s00000", "insta-relay.apps3.slidestr.net relay.nostu.be strfry.apps3.slidestr.net bitcoinostr.duckdns.org btc.klendazu.com", "4509.5 4509.5 4509.5 4582.0 4592.2"),
        ])
    func selection(geohash: String, hosts: String, distances: String) throws {
        let chosen = try Self.committed().closest(to: try GeohashCell(geohash), count: 5)
        #expect(chosen.map(\.entry.url) == hosts.split(separator: " ").map { "wss://\($0)" })
        if !distances.isEmpty {
            #expect(chosen.map { String(format: "%.1f", $0.distanceKilometres) } == distances.split(separator: " ").map(String.init))
        }
    }

    @Test(
        "Android's nearest five match NOSTR-GEO §13.3 (file-order ties, :443 rows kept)",
        arguments: [
            ("u4pruy", "nostr.mas-family.eu relay.endfiat.money relay.endfiat.money:443 nostr.nodesmap.com relay.fckstate.net", "428.3 482.4 482.4 482.4 482.4"),
            ("9q8yy", "nostr-rs-relay-qj1h.onrender.com nostr-kyomu-haskell.onrender.com bucket.coracle.social nostr.hekster.org:443 nostrride.io", "1.3 1.3 1.3 57.1 57.1"),
            ("dr5r7p", "budabit.nostr1.com auth.nostr1.com bitchat.nostr1.com fanfares.nostr1.com fanfares.nostr1.com:443", "2.9 2.9 2.9 2.9 2.9"),
        ])
    func androidSelection(geohash: String, urls: String, distances: String) throws {
        let chosen = try #require(try Self.committed().android).closest(to: try GeohashCell(geohash), count: 5)
        #expect(chosen.map(\.entry.url) == urls.split(separator: " ").map { "wss://\($0)" })
        #expect(chosen.map { String(format: "%.1f", $0.distanceMetres / 1000) } == distances.split(separator: " ").map(String.init))
    }

    /// 13 cells spread over the world: the seven of NOSTR-GEO §13.3, then Tokyo, Sydney, São Paulo, Mumbai,
    /// Nairobi and Mexico City.
    static let sampled = ["u4pruy", "9q8yy", "dr5r7p", "u33dc0", "gcpvj0", "87yw7t", "s00000",
                          "xn76ur", "r3gx2f", "6gyf4b", "te7ud2", "kzf0tu", "9g3w81"]

    @Test("on 13 sampled geohashes every one of Android's nearest five is in the bridge's union (§3.5)")
    func unionHoldsAndroid() throws {
        let directory = try Self.committed()
        let android = try #require(directory.android)
        var report: [String] = []
        var heldByIOSOnly: [Int] = []
        for geohash in Self.sampled {
            let cell = try GeohashCell(geohash)
            let androidURLs = try android.closest(to: cell, count: 5).map { "wss://" + (try $0.entry.bridgeAddress.get()) }
            let iosURLs = Set(directory.closest(to: cell, count: 5).map(\.entry.url))
            let union = directory.bridgeSelection(places: [cell])
            #expect(union.refused.isEmpty)
            #expect(Set(union.urls).isSuperset(of: androidURLs), "\(geohash)")
            #expect(Set(union.urls).isSuperset(of: iosURLs), "\(geohash)")
            #expect(Set(union.urls) == iosURLs.union(androidURLs), "\(geohash): nothing else")
            let held = androidURLs.filter(iosURLs.contains).count
            heldByIOSOnly.append(held)
            report.append("\(geohash) \(held)/5 (union \(union.urls.count))")
        }
        // The old iOS-only set missed some of Android's choices, so the union matters on this sample.
        #expect(heldByIOSOnly.contains { $0 < 5 })
        print("Android's nearest 5 held by the iOS-only set: " + report.joined(separator: ", "))
    }

    @Test("the bridge's places: the channel's parents at the phones' levels, the channel, the ring without repeats")
    func bridgePlaces() throws {
        let cell = try GeohashCell("u4pruy")
        let places = RelayDirectory.bridgePlaces(channel: cell, gateway: true, rendezvousCell: cell).map(\.string)
        #expect(places == ["u4", "u4pr", "u4pru", "u4pruy"] + cell.neighbors.map(\.cell.string))
        #expect(RelayDirectory.bridgePlaces(channel: cell, gateway: false, rendezvousCell: nil).isEmpty)
        #expect(RelayDirectory.bridgePlaces(channel: try GeohashCell("u4p"), gateway: true, rendezvousCell: nil).map(\.string)
                == ["u4", "u4p"])
    }

    /// The reach issue: iOS publishes a deposit for geohash G to the relays nearest G (NOSTR-GEO §8.9), and
    /// for a region-level G those can share none with the configured cell's. The pool holds both apps' nearest
    /// relays of every level a phone at the site can view, so a deposit for any of them reaches them.
    @Test("on 13 sampled sites the relays nearest each channel level are in the bridge's selection")
    func depositLevelsReachTheirNearestRelays() throws {
        let directory = try Self.committed()
        var differing: [String] = []
        for geohash in Self.sampled {
            let cell = try GeohashCell(geohash)
            let places = RelayDirectory.bridgePlaces(channel: cell, gateway: true, rendezvousCell: nil)
            let selection = Set(directory.bridgeSelection(places: places).urls)
            let cellNearest = Set(directory.closest(to: cell, count: 5).map(\.entry.url))
            for level in places.dropLast() {
                let nearest = directory.closest(to: level, count: 5).map(\.entry.url)
                #expect(selection.isSuperset(of: nearest), "\(level)")
                for chosen in directory.android!.closest(to: level, count: 5) {
                    #expect(selection.contains("wss://" + (try chosen.entry.bridgeAddress.get())), "\(level) android")
                }
                if Set(nearest) != cellNearest { differing.append(level.string) }
            }
        }
        // Some level's nearest relays are not the cell's: without the levels those deposits missed them.
        #expect(!differing.isEmpty)
        print("levels whose nearest 5 differ from the site cell's: \(differing.joined(separator: " "))")
    }

    @Test("a rendezvous ring: each cell's iOS and Android sets are in the union, each relay once")
    func ringUnion() throws {
        let directory = try Self.committed()
        let ring = try GeohashCell("u4pruy").ring
        let selection = directory.bridgeSelection(places: ring)
        #expect(Set(selection.urls).count == selection.urls.count)
        for cell in ring {
            for chosen in directory.closest(to: cell, count: 5) { #expect(selection.urls.contains(chosen.entry.url)) }
            for chosen in directory.android!.closest(to: cell, count: 5) {
                #expect(selection.urls.contains("wss://" + (try chosen.entry.bridgeAddress.get())))
            }
        }
        #expect(selection.relays.allSatisfy { !$0.apps.isEmpty })
    }

    @Test("a hand-edited Android section with a URL the app's reading cannot make is refused")
    func refusesAndroidEdits() {
        for url in [" wss://a.example", "a.example", "wss://a.example,b", ""] {
            let json = #"{"format":1,"relays":[],"android":{"relays":[{"url":"\#(url)","lat":1,"lon":2}]}}"#
            #expect(throws: RelayDirectoryFileError.self, "\(url)") { try RelayDirectory(json: json) }
        }
        #expect(throws: RelayDirectoryFileError.field("android.relays")) {
            try RelayDirectory(json: #"{"format":1,"relays":[],"android":{}}"#)
        }
        // A section the app could have read is accepted even if the bridge will not connect to it.
        let json = #"{"format":1,"relays":[],"android":{"relays":[{"url":"ws://box.local","lat":1,"lon":2}]}}"#
        #expect((try? RelayDirectory(json: json))?.android?.entries.count == 1)
    }

    @Test("a hand-edited relays.json with a local or malformed address is refused")
    func refusesEdits() {
        #expect(throws: RelayDirectoryFileError.self) {
            try RelayDirectory(json: #"{"format":1,"relays":[{"address":"localhost","lat":1,"lon":2}]}"#)
        }
        #expect(throws: RelayDirectoryFileError.self) {
            try RelayDirectory(json: #"{"format":1,"relays":[{"address":"A.example","lat":1,"lon":2}]}"#)
        }
        #expect(throws: RelayDirectoryFileError.self) { try RelayDirectory(json: #"{"format":2,"relays":[]}"#) }
    }
}

private func android(_ lines: [String], terminator: String = "\r\n") throws -> (list: AndroidRelayList, skipped: [AndroidSkippedRow]) {
    try AndroidRelayList.importCSV(Array(lines.joined(separator: terminator).utf8), fileName: "a.csv", sha256: "")
}

@Suite("Android relay list (bitchat-android RelayDirectory.kt, NOSTR-GEO §3.3)")
struct AndroidRelayListTests {
    @Test("lenient reading: headers, short rows and non-numeric coordinates skipped; wss:// prefixed; :443, case and duplicates kept")
    func lenient() throws {
        let (list, skipped) = try android([
            "Relay URL,Latitude,Longitude", "a.example,1,2", "wss://a.example:443,1,2", "a.example,1,2",
            "  relay url,lat,lon", "short.example,1", "", "   ", "bad.example,north,2", "bad2.example,1,",
            "https://B.example/,3,4,extra,fields", ",5,6", "ws://local.example,91,200",
        ])
        #expect(list.entries.map(\.url) == ["wss://a.example", "wss://a.example:443", "wss://a.example",
                                            "https://B.example/", "ws://local.example"])
        #expect(list.entries[3] == AndroidRelayEntry(url: "https://B.example/", latitude: 3, longitude: 4))
        // Out-of-range coordinates are kept: the app does not check them.
        #expect(list.entries[4].latitude == 91 && list.entries[4].longitude == 200)
        #expect(skipped == [
            AndroidSkippedRow(line: 6, reason: .fieldCount(2)), AndroidSkippedRow(line: 9, reason: .coordinate("north")),
            AndroidSkippedRow(line: 10, reason: .coordinate("")), AndroidSkippedRow(line: 12, reason: .emptyURL),
        ])
        #expect(list.source == AndroidRelayListSource(file: "a.csv", sha256: "", dataRows: 9, skippedRows: 4))
        #expect(skipped[0].description == "line 6: 2 fields, the app needs 3")
    }

    @Test("lines end at LF, CR or CRLF (BufferedReader.readLine)", arguments: ["\n", "\r", "\r\n"])
    func lineEndings(terminator: String) throws {
        let (list, skipped) = try android(["relay url,lat,lon", "a.example,1,2", "b.example,x,2", "c.example,3,4", ""],
                                          terminator: terminator)
        #expect(list.entries.map(\.url) == ["wss://a.example", "wss://c.example"])
        #expect(skipped.map(\.line) == [3])
    }

    @Test("fields are trimmed of Kotlin whitespace (NBSP, U+001F, U+2003) and coordinates of Java's ≤ U+0020")
    func trimming() throws {
        let (list, _) = try android(["\u{00A0}a.example\u{2003},\u{1F}1.5 ,\t-2e1\u{1}", "\u{1}b.example,1,2"])
        #expect(list.entries == [AndroidRelayEntry(url: "wss://a.example", latitude: 1.5, longitude: -20),
                                 AndroidRelayEntry(url: "wss://\u{1}b.example", latitude: 1, longitude: 2)])
        // The control character is kept in the URL, as the app keeps it; the bridge will not connect to it.
        #expect((try? list.entries[1].bridgeAddress.get()) == nil)
    }

    @Test(
        "a coordinate the app reads as a number but the bridge cannot place rejects the file, naming the line",
        arguments: ["NaN", "-Infinity", "1.5d", "2F", "0x1p3", "1e400"])
    func unrepresentable(coordinate: String) {
        #expect(throws: AndroidRelayImportError.coordinate(line: 2, coordinate)) {
            try android(["a.example,1,2", "b.example,1,\(coordinate)"])
        }
        // With an unreadable latitude the app skips the row before the longitude matters.
        #expect((try? android(["a.example,1,2", "b.example,x,\(coordinate)"]))?.skipped.count == 1)
    }

    @Test("file-level rejections: nothing usable, invalid UTF-8, size, row count")
    func fileLevel() {
        #expect(throws: AndroidRelayImportError.empty) { try android(["Relay URL,Latitude,Longitude", "x,y"]) }
        #expect(throws: AndroidRelayImportError.invalidUTF8) {
            try AndroidRelayList.importCSV([0x61, 0xff, 0x2c, 0x31, 0x2c, 0x32], fileName: "", sha256: "")
        }
        #expect(throws: AndroidRelayImportError.fileSize(0)) { try AndroidRelayList.importCSV([], fileName: "", sha256: "") }
        let rows = (0...RelayDirectory.CSVLimits.maxRows).map { "r\($0).example,1,2" }
        #expect(throws: AndroidRelayImportError.tooManyRows(RelayDirectory.CSVLimits.maxRows + 1)) { try android(rows) }
        #expect((try? android(Array(rows.dropLast())))?.list.entries.count == RelayDirectory.CSVLimits.maxRows)
    }

    @Test("equal distances keep file order (zeta before alpha), unlike iOS's host order")
    func fileOrderTies() throws {
        let (list, _) = try android(["zeta.example,10,10", "far.example,50,50", "mike.example,10,10", "alpha.example,10,10"])
        let cell = GeohashCell.encode(latitude: 10, longitude: 10, precision: 6)
        #expect(list.closest(to: cell, count: 3).map(\.entry.url) == ["wss://zeta.example", "wss://mike.example", "wss://alpha.example"])
        #expect(list.closest(to: cell, count: 0).isEmpty)
        #expect(list.closest(to: cell, count: 10).last?.entry.url == "wss://far.example")
    }

    @Test("haversine in metres: one degree of latitude is about 111 195 m")
    func haversine() {
        #expect(abs(AndroidRelayList.haversineMetres(0, 0, 1, 0) - 111_195) < 1)
        #expect(AndroidRelayList.haversineMetres(48.1, 11.5, 48.1, 11.5) == 0)
    }
}

@Suite("The bridge's relay union (NOSTR-GEO §3.5)")
struct BridgeSelectionTests {
    static func directory() throws -> RelayDirectory {
        let ios = try load(["shared.example,10,10", "ios-only.example,10.1,10", "far.example,60,60"])
        let (list, _) = try android([
            "android-only.example,10,10", "wss://shared.example:443,10,10", "Shared.example,10,10",
            "ws://plain.example,10.2,10", "far.example:443,60,60",
        ])
        return RelayDirectory(entries: ios.entries, source: ios.source, android: list)
    }

    @Test("iOS then Android per place; :443 and case normalised away, one entry per relay, with why")
    func union() throws {
        let here = GeohashCell.encode(latitude: 10, longitude: 10, precision: 6)
        let selection = try Self.directory().bridgeSelection(places: [here], count: 4)
        #expect(selection.urls == ["wss://shared.example", "wss://ios-only.example", "wss://far.example", "wss://android-only.example"])
        #expect(selection.relays[0].apps == [.ios, .android])
        #expect(selection.relays[0].description == "wss://shared.example (ios: \(here); android: \(here))")
        #expect(selection.relays[1].apps == [.ios])
        #expect(selection.relays[3].apps == [.android])
        // Android's fourth choice is a ws:// relay: the bridge does not connect to it, and says so.
        #expect(selection.refused.map(\.url) == ["ws://plain.example"])
        #expect(selection.refused.first?.reason == .scheme("ws"))
        #expect(selection.refused.first?.places == [here])
    }

    @Test("several places: a relay keeps its first position and lists every place once")
    func places() throws {
        let here = GeohashCell.encode(latitude: 10, longitude: 10, precision: 6)
        let there = GeohashCell.encode(latitude: 60, longitude: 60, precision: 6)
        let selection = try Self.directory().bridgeSelection(places: [here, there, here], count: 1)
        #expect(selection.urls == ["wss://shared.example", "wss://android-only.example", "wss://far.example"])
        #expect(selection.relays[0].ios == [here])
        #expect(selection.relays[2].ios == [there] && selection.relays[2].android == [there])
        #expect(selection.refused.isEmpty)
    }

    @Test("a directory without an Android list gives the iOS choice alone")
    func iosOnly() throws {
        let directory = try load(["a.example,1,1", "b.example,2,2"])
        let cell = GeohashCell.encode(latitude: 1, longitude: 1, precision: 5)
        #expect(directory.bridgeSelection(places: [cell]).urls == directory.closest(to: cell, count: 5).map(\.entry.url))
        #expect(directory.bridgeSelection(places: []).relays.isEmpty)
    }
}
