import BotCrypto
import BotSupport
import Bridge
import BridgeTestSupport
import Foundation
import Nostr
import Testing
import BridgeCore

/// `run` with operator keys: the operator secret key file must be private and one of `operator_keys`; the
/// effective configuration shows the keys and the site.
@Suite("bitchat-bridge run: fleet moderation settings")
struct FleetRunTests {
    static let secret = [UInt8](repeating: 78, count: 32)

    @Test("operator.key readable by others, or not one of operator_keys, exits 64 naming the file; the secret is never printed")
    func operatorKeyFileIsChecked() async throws {
        let data = TestEnvironment.temporaryDirectory("fleet-run") + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let key = try SchnorrSecretKey(bytes: Self.secret)
        let path = data + "/" + OperatorKeys.secretFileName
        try FileIO.writeAtomically(Array(Hex.encode(Self.secret).utf8), to: path, mode: 0o644)
        let open = try await runBridge(["run"], environment: RunStartTests.environment(data, ["BRIDGE_OPERATOR_KEYS": key.publicKey.hex]))
        #expect(open.status == 64 && open.stderr.contains("mode 644"), "\(open.stderr)")
        chmod(path, 0o600)
        let other = try SchnorrSecretKey(bytes: [UInt8](repeating: 79, count: 32))
        let foreign = try await runBridge(["run"], environment: RunStartTests.environment(data, ["BRIDGE_OPERATOR_KEYS": other.publicKey.hex]))
        #expect(foreign.status == 64 && foreign.stderr.contains("is not one of operator_keys"), "\(foreign.stderr)")
        for result in [open, foreign] {
            #expect(!result.stderr.contains(Hex.encode(Self.secret)) && !result.stdout.contains(Hex.encode(Self.secret)))
        }
    }

    @Test("--print-config shows operator_keys as hex (npub accepted) and fleet_site; a bad key names the field")
    func printConfig() async throws {
        let key = try SchnorrSecretKey(bytes: Self.secret).publicKey
        let data = TestEnvironment.temporaryDirectory("fleet-config") + "/data"
        let shown = try await runBridge(["run", "--print-config"], environment: RunStartTests.environment(data, [
            "BRIDGE_OPERATOR_KEYS": "\(NIP19.npub(key)), \(key.hex)", "BRIDGE_FLEET_SITE": "festival-north",
        ]))
        #expect(shown.status == 0, "\(shown.stderr)")
        let config = try JSONParser().parse(shown.stdout)
        #expect(config["operator_keys"]?["value"] == .array([.string(key.hex)]), "one key, given twice")
        #expect(config["fleet_site"]?["value"] == .string("festival-north") && config["fleet_site"]?["source"] == .string("env"))
        let bad = try await runBridge(["run", "--print-config"], environment: RunStartTests.environment(data, ["BRIDGE_OPERATOR_KEYS": "npub1nope"]))
        #expect(bad.status == 64 && bad.stderr.contains("operator_keys"), "\(bad.stderr)")
    }
}
