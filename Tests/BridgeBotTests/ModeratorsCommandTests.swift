import BotStorage
import BotSupport
import BridgeTestSupport
import Console
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `bitchat-bridge moderators` (issue 35: one console token shared by everyone).
@Suite("bitchat-bridge moderators")
struct ModeratorsCommandTests {
    @Test("add prints a token of the person's own (the file 0600), list shows names and never tokens, remove takes one person out; a bad, taken or unknown name exits 64; each change is in the audit")
    func addListRemove() async throws {
        let data = TestEnvironment.temporaryDirectory("moderators")
        let ana = try await runBridge(["moderators", "add", "ana", "--data-dir", data])
        #expect(ana.status == 0, "\(ana.stderr)")
        let token = ana.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.count == 64 && token.allSatisfy(\.isHexDigit), "\(ana.stdout)")
        #expect(try await runBridge(["moderators", "add", "ben", "--data-dir", data]).status == 0)
        var info = stat()
        #expect(stat(data + "/moderators.json", &info) == 0 && info.st_mode & 0o077 == 0, "the file holds passwords: mode 0600")
        let listed = try await runBridge(["moderators", "list", "--data-dir", data])
        #expect(listed.stdout.contains("ana") && listed.stdout.contains("ben") && !listed.stdout.contains(token), "\(listed.stdout)")
        #expect(try await runBridge(["moderators", "add", "ana", "--data-dir", data]).status == 64, "taken")
        #expect(try await runBridge(["moderators", "add", "operator", "--data-dir", data]).status == 64, "the console-token's name")
        #expect(try await runBridge(["moderators", "add", "a b", "--data-dir", data]).status == 64, "not a name")
        #expect(try await runBridge(["moderators", "remove", "ana", "--data-dir", data]).status == 0)
        #expect(try await runBridge(["moderators", "remove", "ana", "--data-dir", data]).status == 64, "gone")
        let moderators = try Moderators.load(dataDirectory: data)
        #expect(moderators.list.map(\.name) == ["ben"])
        let database = try SQLiteDatabase(path: data + "/bridge.sqlite3")
        let audit = try ConsoleAudit(database: database).recent(limit: 10).map { "\($0.action) \($0.target)" }
        database.close()
        #expect(audit == ["moderator remove ana", "moderator add ben", "moderator add ana"], "\(audit)")
    }
}
