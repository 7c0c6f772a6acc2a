import BotSupport
import BridgeTestSupport
import BridgeTesting
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

        // An in-process bridge answering on its data directory's control socket, as `run` does.
        let site = Site(name: "identities-running")
        let bridge = try await site.bridge("stage-a", relays: [try site.relay()], segments: [site.segment()])
        let told = try await runBridge(["identities", "block", Self.key, "--data-dir", bridge.dataDirectory])
        #expect(told.status == 0 && !told.stderr.contains("no bridge runs"), "\(told.stderr)")
        await site.stop()
    }
}
