import BotSupport
import BridgeTesting
import Testing

/// Operator traps met running more than one stage (issue 35), each in the in-process world.
@Suite("World: operator traps")
struct OperatorTrapsTests {
    @Test("a data directory without keys.json makes a new bridge identity, said at notice level with the directory and what to check; a restart on the same directory says nothing of it")
    func newIdentityIsSaidLoudly() async throws {
        let site = Site(name: "traps-identity")
        let relay = try site.relay()
        let bridge = try await site.bridge("stage-a", relays: [relay], segments: [site.segment()])
        func announced() -> [LogRecord] { bridge.log.lines.all.filter { $0.message.hasPrefix("new bridge identity") } }
        let first = try #require(announced().first, "the first start says so")
        #expect(first.level == .notice && first.jsonLine.contains(bridge.dataDirectory) && first.message.contains("BRIDGE_DATA_DIR"))
        try await bridge.restart()
        #expect(announced().count == 1, "the same identity again: nothing new to say")
        await site.stop()
    }
}
