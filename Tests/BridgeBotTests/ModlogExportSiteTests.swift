import BotCrypto
import BotSupport
import Bridge
import BridgeCore
import Foundation
import BridgeTestSupport
import BridgeTesting
import Identity
import Nostr
import Testing

/// `bitchat-bridge modlog export` on one stage of a site (issue 35): one report — its hidden messages and the site's
/// actions (its own, from the CLI, and another stage's, from that stage's site record), in time order, each row naming
/// the bridge it happened on and who acted.
@Suite("bitchat-bridge modlog export: one report for the site")
struct ModlogExportSiteTests {
    @Test("stage A's export has B's block (bridge stage-b, by session:ben), A's own CLI allow (bridge stage-a, by cli:), and the line A hid, in time order; CSV carries the same columns")
    func exportMergesTheSitesActions() async throws {
        let site = Site(name: "export-site")
        let relay = try site.relay()
        let secret = [UInt8](repeating: 73, count: 32)
        let a = try await site.stage("stage-a", relay: relay, operatorSecret: secret)
        let b = try await site.stage("stage-b", relay: relay, operatorSecret: secret)
        let mallory = site.poster("mallory"), steward = site.poster("steward")
        let malloryKey = try IdentityKey.nostr(pubkey: mallory.key.publicKey.bytes)
        let stewardKey = try IdentityKey.nostr(pubkey: steward.key.publicKey.bytes)

        b.coordinator.submit(OperatorInput.site(.block(malloryKey), on: true, by: "session:ben"))
        #expect(await a.logLine("site record applied") { $0.jsonLine.contains(malloryKey.qualified) } != nil)
        site.time.advance(by: 2_000)
        let allowed = try await runBridge(["identities", "allow", stewardKey.qualified, "--data-dir", a.dataDirectory])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        // The CLI's audit row is dated by the wall clock, the bridge's by the site's: the site's moves past it.
        site.time.advance(to: max(site.time.nowMs(), SystemTime.wallClockMs()) + 2_000)
        let line = try mallory.post("mallory while blocked", to: relay)
        #expect(await a.verdict(on: line.id.hex)?.rule == "blocked")

        let range = ["--since", "@0", "--until", "@4102444800", "--data-dir", a.dataDirectory]
        let jsonl = try await runBridge(["modlog", "export"] + range)
        #expect(jsonl.status == 0, "\(jsonl.stderr)")
        let rows = try jsonl.stdout.split(separator: "\n").map { try JSONParser().parse(String($0)) }
        let block = rows.firstIndex { $0["record"] == .string("action") && $0["action"] == .string("block") }
        let allow = rows.firstIndex { $0["record"] == .string("action") && $0["action"] == .string("allow") }
        let hidden = rows.firstIndex { $0["record"] == .string("hidden") && $0["message_id"] == .string(line.id.hex) }
        #expect(block != nil && allow != nil && hidden != nil, "\(jsonl.stdout)")
        guard let block, let allow, let hidden else { return }
        #expect(rows[block]["bridge"] == .string("stage-b") && rows[block]["by"] == .string("session:ben")
            && rows[block]["target"] == .string(malloryKey.qualified))
        #expect(rows[allow]["bridge"] == .string("stage-a") && rows[allow]["by"]?.stringValue?.hasPrefix("cli:") == true)
        #expect(rows[hidden]["bridge"] == .string("stage-a") && rows[hidden]["rule"] == .string("blocked"))
        #expect(block < allow && allow < hidden, "in time order: \(jsonl.stdout)")
        #expect(jsonl.stderr.contains("1 hidden record") && jsonl.stderr.contains("actions"), "\(jsonl.stderr)")

        let hiddenOnly = try await runBridge(["modlog", "export", "--no-actions"] + range)
        #expect(hiddenOnly.stdout.split(separator: "\n").count == rows.count(where: { $0["record"] == .string("hidden") }) && !hiddenOnly.stdout.contains("\"action\""))

        let csv = try await runBridge(["modlog", "export", "--format", "csv"] + range)
        let lines = csv.stdout.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(lines.first?.hasSuffix(",record,bridge,action,target,by") == true, "\(lines.first ?? "")")
        #expect(lines.contains { $0.hasSuffix(",action,stage-b,block,\(malloryKey.qualified),session:ben") }, "\(csv.stdout)")
        #expect(lines.contains { $0.contains(line.id.hex) && $0.contains(",hidden,stage-a,,,") }, "\(csv.stdout)")
        await site.stop()
    }
}
