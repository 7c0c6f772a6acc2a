import BotCrypto
import BotSupport
import BridgeApp
import BridgeCore
import BridgeTesting
import Nostr
import Testing

/// The operator's policy file in the in-process world (operations issue): what SIGHUP does (``BridgeRuntime/reload()``)
/// on a running bridge. The signal's own delivery to `run` is `RelayReloadTests`' (a process).
@Suite("World: the operator's policy file")
struct PolicyTests {
    @Test("a reload of policy.json: a newly blocked key stops crossing; a malformed file keeps the block; unblocking lets it cross again")
    func reloadPolicy() async throws {
        let site = Site(name: "policy")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("gateway", relays: [relay], segments: [air])
        let reader = await site.phone("reader", on: [air])
        #expect(await reader.meets(bridge))
        let policy = bridge.dataDirectory + "/policy.json"
        let mallory = site.poster("mallory"), organiser = site.poster("organiser")

        /// Writes the policy file, reloads, and returns the first line logged about it after `message`.
        func reload(_ text: String, until message: String) async throws -> LogRecord? {
            let mark = bridge.log.lines.all.count
            try FileIO.writeAtomically(Array(text.utf8), to: policy, mode: 0o600)
            bridge.runtime.reload()
            return await bridge.log.lines.first(after: mark) { $0.message.hasPrefix(message) }
        }

        let before = try mallory.post("hello before the block", to: relay)
        #expect(await bridge.verdict(on: before.id.hex)?.kind == .passed)
        #expect(await site.advance(until: { await reader.carrier(of: before.id, within: 0.05) != nil }), "mallory's first post crosses")

        let blocking = try await reload(#"{"block": ["nostr:\#(mallory.key.publicKey.hex)"]}"#, until: "policy reloaded")
        #expect(blocking?.jsonLine.contains("policy.block.added") == true && blocking?.jsonLine.contains(mallory.key.publicKey.hex) == true)
        let blocked = try mallory.post("hello while blocked", to: relay)
        #expect(await bridge.verdict(on: blocked.id.hex)?.rule == "blocked")

        // A malformed file: the reload fails closed, the block stays.
        #expect(try await reload(#"{"block": ["#, until: "policy reload failed") != nil)
        let stillBlocked = try mallory.post("hello after a bad edit", to: relay)
        #expect(await bridge.verdict(on: stillBlocked.id.hex)?.rule == "blocked")

        // Unblock: mallory crosses again.
        let unblocking = try await reload("{}", until: "policy reloaded")
        #expect(unblocking?.jsonLine.contains("policy.block.removed") == true)
        let after = try mallory.post("hello after the unblock", to: relay)
        let barrier = try organiser.post("the stage opens at eight", to: relay)
        #expect(await bridge.verdict(on: after.id.hex)?.kind == .passed)
        #expect(await bridge.verdict(on: barrier.id.hex)?.kind == .passed)
        #expect(await site.advance(until: { await reader.carrier(of: barrier.id, within: 0.05) != nil }))
        #expect(await site.advance(until: { await reader.carrier(of: after.id, within: 0.05) != nil }))
        await site.advance(by: 2_000)  // past the longest downlink hold: a late carrier of a blocked post would be here
        #expect(reader.carriers(of: blocked.id).isEmpty && reader.carriers(of: stillBlocked.id).isEmpty)
        #expect(reader.carriers(of: before.id).count == 1 && reader.carriers(of: after.id).count == 1)
        await site.stop()
    }
}
