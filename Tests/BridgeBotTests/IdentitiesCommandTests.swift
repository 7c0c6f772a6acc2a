import BotStorage
import BotSupport
import Console
import BridgeTestSupport
import BridgeTesting
import Moderation
import ModerationLog
import SpamFilter
import Testing

/// `bitchat-bridge identities` marks against a data directory with and without a bridge running on it (issue 35).
@Suite("bitchat-bridge identities: the running bridge")
struct IdentitiesCommandTests {
    static let key = "nostr:" + String(repeating: "ab", count: 32)

    @Test("a block on a directory where no bridge runs is stored and warns that it takes effect only when one starts there; on a running bridge's directory it says nothing more")
    func warnsWithoutARunningBridge() async throws {
        let nobody = TestEnvironment.temporaryDirectory("identities-typo") + "/stage-b"
        let stored = try await runBridge(["identities", "block", Self.key, "--data-dir", nobody])
        #expect(stored.status == 0, "\(stored.stderr)")
        #expect(stored.stderr.contains("warning: no bridge runs on \(nobody)") && stored.stderr.contains("--data-dir"), "\(stored.stderr)")
        // The console's audit has the CLI's change, named by the local user (issue 35: CLI actions were missing from it).
        let database = try SQLiteDatabase(path: nobody + "/bridge.sqlite3")
        let rows = try ConsoleAudit(database: database).recent(limit: 10)
        database.close()
        #expect(rows.count == 1 && rows[0].action == "block" && rows[0].target == Self.key && rows[0].principal.hasPrefix("cli:"), "\(rows)")

        // An in-process bridge answering on its data directory's control socket, as `run` does.
        let site = Site(name: "identities-running")
        let bridge = try await site.bridge("stage-a", relays: [try site.relay()], segments: [site.segment()])
        let told = try await runBridge(["identities", "block", Self.key, "--data-dir", bridge.dataDirectory])
        #expect(told.status == 0 && !told.stderr.contains("no bridge runs"), "\(told.stderr)")
        await site.stop()
    }

    @Test("a key seen only in the moderation log (its cache row not written yet) is blocked by the 16 hex the log shows")
    func keyOnlyInTheModerationLog() async throws {
        let data = TestEnvironment.temporaryDirectory("identities-modlog")
        let sender = "c0ffee00" + String(repeating: "d", count: 56)
        let log = try ModerationLog(path: data + "/bridge.sqlite3", config: ModerationLogConfig(), logger: nil)
        try log.append(ModerationRecord(
            judgedAt: 1_750_000_000, direction: .nostrToMesh, channel: "u4pruy", senderKey: sender, displayName: nil, messageID: "m1",
            messageTimestamp: 0, rule: .spam(.messageRate), shadow: false, figures: .object([]), text: "x", textSHA256: "h"))
        let blocked = try await runBridge(["identities", "block", String(sender.prefix(16)), "--data-dir", data, "--json"])
        #expect(blocked.status == 0 && blocked.stdout.contains("nostr:" + sender), "\(blocked.stdout) \(blocked.stderr)")
    }
}
