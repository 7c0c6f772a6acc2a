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

    @Test("is exactly what `relays import` makes of the reviewed CSV (source hash and counts recorded)")
    func matchesCSV() throws {
        let url = Bundle.module.url(forResource: "online_relays_gps", withExtension: "csv", subdirectory: "Fixtures")!
        let bytes = Array(try Data(contentsOf: url))
        let imported = try RelayDirectory.importCSV(bytes, fileName: "online_relays_gps.csv", sha256: "811523100064820b024714eaf3bbe0a9ba99a3c257e453e01bc1bc0f3bf8401a")
        let file = try String(contentsOf: Self.root.appendingPathComponent("relays.json"), encoding: .utf8)
        #expect(JSONWriter.pretty(imported.jsonValue) + "\n" == file)
        let directory = try Self.committed()
        #expect(directory.entries.count == 326)
        #expect(directory.source == RelayDirectorySource(file: "online_relays_gps.csv",
            sha256: "811523100064820b024714eaf3bbe0a9ba99a3c257e453e01bc1bc0f3bf8401a", dataRows: 441, uniqueRelays: 326,
            mergedDuplicates: 115))
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
