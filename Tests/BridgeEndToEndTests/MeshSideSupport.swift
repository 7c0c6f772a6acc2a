import BotSupport
import BridgeTestSupport
import Foundation
import Testing

extension World {
    /// A Nostr listener on the channel (kinds 20000/20001, `#g`), subscribed before it returns.
    func startChannelListener() async throws -> ChildProcess {
        let listener = try spawn(["nostr", "listen", "--geohash", "u4pruy", "--relay", relayURL], name: "listener")
        _ = try await listener.waitForLine("listener subscribed") { $0.contains("\"eose\"") }
        return listener
    }

    /// Makes `reader` know the mesh identity kept in `phone-<name>` (a verified announce relayed to it), so
    /// that every later message of that identity is shown by the reader if it reaches it at all: without
    /// this, a message relayed ahead of its sender's announce would be silently dropped by the reader and a
    /// test that expects it *not* to arrive could not fail.
    func introduce(_ name: String, island: Int, to reader: ChildProcess) async throws {
        let phone = try spawn(
            ["mesh", "listen", "--mesh", "tcp://127.0.0.1:\(island)", "--data-dir", "\(directory)/phone-\(name)", "--nickname", name],
            name: "intro-\(name)")
        _ = try await reader.waitForLine("\(name) known to the reader") {
            $0.contains("\"peer\"") && $0.contains("\"nickname\":\"\(name)\"")
        }
        // No signed leave: the reader keeps the peer (60 s timeout).
        phone.stop(signal: SIGKILL)
    }

    /// One signed public message from the identity in `phone-<name>`; returns its stable message ID.
    func say(_ text: String, as name: String, island: Int) async throws -> String {
        let phone = try spawn(
            ["mesh", "say", "--mesh", "tcp://127.0.0.1:\(island)", "--data-dir", "\(directory)/phone-\(name)", "--nickname", name, text],
            name: "say-\(name)")
        let line = try await phone.waitForLine("\(name) sent") { $0.contains("\"sent\"") }
        _ = try await phone.waitForExit()
        return try #require(try JSONParser().parse(line)["stableID"]?.stringValue)
    }
}

extension World {
    /// The moderation log of `bridge` as JSON records, read again (bounded, 30 s) until it holds `atLeast`.
    func moderationLog(_ bridge: String, atLeast: Int) async throws -> [JSONValue] {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let modlog = try spawn(["modlog", "--json", "--data-dir", "\(directory)/\(bridge)"], name: "modlog")
            #expect(try await modlog.waitForExit() == 0)
            let records = modlog.stdoutLines.compactMap { try? JSONParser().parse($0) }
            if records.count >= atLeast || ContinuousClock.now > deadline { return records }
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}

/// Stable IDs of the public messages `reader` printed.
func meshMessages(_ reader: ChildProcess) -> [String] {
    reader.stdoutLines.compactMap { try? JSONParser().parse($0) }.filter { $0["event"] == .string("message") }
        .compactMap { $0["stableID"]?.stringValue }
}

/// Contents of the channel messages (kind 20000) `listener` printed.
func channelTexts(_ listener: ChildProcess) -> [String] {
    listener.stdoutLines.compactMap { try? JSONParser().parse($0)["event"] }.filter { $0["kind"] == .integer(20000) }
        .compactMap { $0["content"]?.stringValue }
}
