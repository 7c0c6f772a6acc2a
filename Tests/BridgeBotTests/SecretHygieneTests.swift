import BotCrypto
import BotSupport
import Bridge
import BridgeTestSupport
import Foundation
import Testing
import BridgeCore

/// Hardening evidence: the data directory is 0700, every file in it 0600, and no secret (the key file's
/// seeds, nor the Nostr secret keys derived from them) appears in anything the commands print, at the
/// most verbose log level.
@Suite("Secrets stay in the key file")
struct SecretHygieneTests {
    /// Runs the bridge with stdin text; returns everything it printed (stdout and stderr).
    func run(_ arguments: [String], stdin: String? = nil, environment: [String: String]) async throws -> (Int32, String) {
        let child = try ChildProcess(TestEnvironment.bridgeExecutable, arguments, environment: environment)
        if let stdin { child.write(stdin) }
        child.closeStdin()
        let status = try await child.waitForExit(timeout: .seconds(60))
        try await Task.sleep(for: .milliseconds(50))  // let the pipe handlers drain
        return (status, (child.stdoutLines + child.stderrLines).joined(separator: "\n"))
    }

    @Test("every command's output at log level trace is free of secrets; modes 0700/0600")
    func noSecretsInOutput() async throws {
        let data = TestEnvironment.temporaryDirectory("secrets") + "/data"
        let environment = ["BRIDGE_DATA_DIR": data, "BRIDGE_LOG_LEVEL": "trace"]
        var transcript = ""
        func record(_ result: (Int32, String), _ what: String) {
            #expect(result.0 == 0, "\(what): \(result.1)")
            transcript += "\n--- \(what)\n" + result.1
        }
        record(try await run(["keys", "--geohash", "u4pruyd"], environment: environment), "keys")
        record(try await run(["keys", "--geohash", "u4pruyd", "--json"], environment: environment), "keys --json")
        let unsigned = #"{"created_at":1750000000,"kind":20000,"tags":[["g","u4pruyd"],["n","x"]],"content":"hi"}"# + "\n"
        record(try await run(["nostr", "sign", "--geohash", "u4pruyd"], stdin: unsigned, environment: environment), "nostr sign")
        record(try await run(["identities", "stats"], environment: environment), "identities stats")
        record(try await run(["identities", "list"], environment: environment), "identities list")

        // A signed mesh message from the bridge identity, over a loopback radio hub.
        let hub = try ChildProcess(TestEnvironment.bridgeExecutable, ["radio-hub", "--listen", "127.0.0.1:0"], environment: environment)
        defer { hub.stop() }
        let listening = try await hub.waitForLine("hub listening") { $0.contains("\"listening\"") }
        let port = try #require(try JSONParser().parse(listening)["port"]?.integerValue)
        record(try await run(["mesh", "say", "--mesh", "tcp://127.0.0.1:\(port)", "hello"], environment: environment), "mesh say")
        hub.stop()
        transcript += "\n--- radio-hub\n" + hub.transcript

        // The secrets: the stored seeds, and the derived Nostr secret keys.
        let file = try JSONParser().parse(try FileIO.read(data + "/" + KeyStore.fileName))
        var secrets: [String] = []
        for field in ["nostr_seed", "noise_static_private", "ed25519_seed"] {
            secrets.append(try #require(file[field]?.stringValue))
        }
        let keys = try KeyStore(dataDirectory: data).loadOrCreate().keys
        secrets.append(Hex.encode(try keys.channelKey(geohash: "u4pruyd").bytes))
        secrets.append(Hex.encode(try keys.rendezvousKey(cell: "u4pruy").bytes))
        #expect(secrets.allSatisfy { $0.count == 64 })
        #expect(transcript.contains("npub1"), "the transcript is real output")
        for secret in secrets {
            #expect(!transcript.lowercased().contains(secret), "a secret appeared in the output")
            // Half a secret is still a leak (e.g. a truncated debug print).
            #expect(!transcript.lowercased().contains(String(secret.prefix(32))))
        }

        #expect(try FileIO.permissions(data) == 0o700)
        let entries = try FileManager.default.contentsOfDirectory(atPath: data)
        #expect(entries.contains(KeyStore.fileName))
        #expect(entries.contains { $0.hasSuffix(".sqlite3") }, "\(entries)")
        for entry in entries {
            #expect(try FileIO.permissions(data + "/" + entry) == 0o600, "\(entry)")
        }
    }
}
