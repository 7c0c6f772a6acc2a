import BotSupport
import Bridge
import BridgeCore
import Console
import Foundation
import Identity
import Nostr
import Testing
import WebSocketRuntime

/// The sender page says what the bridge does about a key now, and when that is the site's record, where it comes from
/// (issue 35: B's sender page said `blocked: false` for a key the fleet blocked).
@Suite("Console: a mark in force and its provenance on the sender page")
struct ConsoleSiteMarksTests {
    /// The console's own stores, with the bridge's answer about marks in force played by the test.
    final class StoresWithMarks: ConsoleStoreAccess {
        let local: LocalConsoleStores
        let marks: BridgeCoordinator.MarksInForce

        init(_ local: LocalConsoleStores, marks: BridgeCoordinator.MarksInForce) {
            self.local = local
            self.marks = marks
        }

        func withStores<T: Sendable>(changesBlocks: Bool, _ body: @escaping @Sendable (ConsoleStores) -> T) -> T? {
            local.withStores(changesBlocks: changesBlocks, body)
        }

        func marksInForce(_ key: IdentityKey) -> BridgeCoordinator.MarksInForce? { marks }
    }

    @Test("a key blocked by another stage's record: blocked now, with the stage, who and when; the local row says nothing")
    func provenance() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("console-site-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let local = try LocalConsoleStores(databasePath: directory.appendingPathComponent("bridge.sqlite3").path)
        let key = try IdentityKey(qualified: "nostr:" + String(repeating: "ab", count: 32))
        let id = try EventID(hex: String(repeating: "01", count: 32))
        let record = SiteRecord(target: .block(key), on: true, by: "session:ana", bridge: "stage-a", createdAt: 1_750_000_000, eventID: id)
        let console = ConsoleService(
            settings: .init(token: nil, readsNeedAuth: false), stores: StoresWithMarks(local, marks: .init(blocked: true, staff: false, siteBlock: record)),
            dependencies: .init(now: { 1_750_000_100 }, random: { [UInt8](repeating: 7, count: $0) },
                                fallback: { _, path in HTTPResponse(status: 404, json: .object([("fallback", .string(path))])) }))
        let page = try JSONParser().parse(console.handle(HTTPRequest(method: "GET", path: "/api/senders/\(key.qualified)")).body)
        #expect(page["known"] == .bool(false), "no identity row on this stage")
        #expect(page["blocked_now"] == .bool(true) && page["allowed_now"] == .bool(false))
        #expect(page["site"]?["block"]?["by"] == .string("session:ana") && page["site"]?["block"]?["stage"] == .string("stage-a"))
        #expect(page["site"]?["block"]?["at"] == .integer(1_750_000_000) && page["site"]?["block"]?["on"] == .bool(true))
        #expect(page["site"]?["allow"] == .null)
    }
}
