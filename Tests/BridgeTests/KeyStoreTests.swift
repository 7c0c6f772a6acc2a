import BotCrypto
import BotSupport
import Bridge
import Foundation
import Testing
import BridgeCore

@Suite("Key store")
struct KeyStoreTests {
    let directory = NSTemporaryDirectory() + "keys-\(UUID().uuidString)/data"

    @Test("first use creates 0700/0600 files; later loads return the same identity")
    func createThenLoad() throws {
        let store = KeyStore(dataDirectory: directory)
        let first = try store.loadOrCreate()
        let created = first.keys
        #expect(first.created && first.addedCheckValues.isEmpty)
        #expect(try FileIO.permissions(directory) == 0o700)
        #expect(try FileIO.permissions(store.path) == 0o600)
        let second = try store.loadOrCreate()
        let loaded = second.keys
        #expect(!second.created && second.addedCheckValues.isEmpty)
        #expect(loaded.peerID == created.peerID)
        #expect(loaded.nostrSeed == created.nostrSeed)
        #expect(loaded.signingKey.publicKey == created.signingKey.publicKey)
        #expect(try loaded.channelKey(geohash: "u4pruy").publicKey == created.channelKey(geohash: "u4pruy").publicKey)
    }

    @Test("peer ID is the first 8 bytes of SHA-256(Noise public key); fingerprint is all 32")
    func identity() throws {
        let keys = try BridgeKeys(
            nostrSeed: [UInt8](repeating: 1, count: 32),
            noiseKey: X25519PrivateKey(rawRepresentation: [UInt8](repeating: 2, count: 32)),
            signingKey: Ed25519PrivateKey(seed: [UInt8](repeating: 3, count: 32))
        )
        let digest = SHA256.hash(keys.noiseKey.publicKey)
        #expect(keys.fingerprint == digest)
        #expect(keys.peerID == Array(digest.prefix(8)))
    }

    @Test(
        "a corrupt key file is an error, never a silent new identity",
        arguments: [
            "not json", "{}", #"{"format":2}"#, "",
            #"{"format":1,"nostr_seed":"00","noise_static_private":"00","noise_static_public":"00","ed25519_seed":"00","ed25519_public":"00"}"#,
        ])
    func corrupt(content: String) throws {
        let store = KeyStore(dataDirectory: directory)
        try FileIO.makeDirectory(directory)
        try FileIO.writeAtomically(Array(content.utf8), to: store.path, mode: 0o600)
        #expect(throws: KeyStoreError.self) { try store.loadOrCreate() }
        #expect(try FileIO.read(store.path) == Array(content.utf8))
    }

    @Test("one flipped hex digit in a secret is detected by the stored public check value")
    func flippedSecret() throws {
        let store = KeyStore(dataDirectory: directory)
        _ = try store.loadOrCreate()
        var text = String(decoding: try FileIO.read(store.path), as: UTF8.self)
        for field in ["ed25519_seed", "noise_static_private"] {
            let original = text
            let range = text.range(of: "\"\(field)\": \"")!
            let digit = text[range.upperBound]
            text.replaceSubrange(range.upperBound...range.upperBound, with: digit == "0" ? "1" : "0")
            try FileIO.writeAtomically(Array(text.utf8), to: store.path, mode: 0o600)
            #expect(throws: KeyStoreError.self) { try store.load() }
            text = original
        }
    }

    @Test("one changed digit of nostr_seed is caught by its check value (it used to change every npub silently)")
    func flippedSeed() throws {
        let store = KeyStore(dataDirectory: directory)
        _ = try store.loadOrCreate()
        var text = String(decoding: try FileIO.read(store.path), as: UTF8.self)
        let range = try #require(text.range(of: "\"nostr_seed\": \""))
        let digit = text[range.upperBound]
        text.replaceSubrange(range.upperBound...range.upperBound, with: digit == "0" ? "1" : "0")
        try FileIO.writeAtomically(Array(text.utf8), to: store.path, mode: 0o600)
        #expect(throws: KeyStoreError.corrupt(path: store.path, reason: "Nostr seed does not match its check value")) {
            try store.loadOrCreate()
        }
        #expect(try FileIO.read(store.path) == Array(text.utf8))
    }

    @Test("a key file from before nostr_seed_check loads unchanged and gets the check value added once")
    func migratesSeedCheck() throws {
        let store = KeyStore(dataDirectory: directory)
        let original = try store.loadOrCreate().keys
        let file = try JSONParser().parse(try FileIO.read(store.path))
        let old = JSONValue.object(try #require(file.objectValue).filter { $0.0 != "nostr_seed_check" })
        try FileIO.writeAtomically(Array(JSONWriter.pretty(old).utf8), to: store.path, mode: 0o600)

        let migrated = try store.loadOrCreate()
        #expect(migrated.addedCheckValues == ["nostr_seed_check"] && !migrated.created)
        #expect(migrated.keys.nostrSeed == original.nostrSeed && migrated.keys.peerID == original.peerID)
        let rewritten = try JSONParser().parse(try FileIO.read(store.path))
        #expect(rewritten["nostr_seed_check"] == .string(Hex.encode(KeyStore.seedCheck(original.nostrSeed))))
        #expect(try FileIO.permissions(store.path) == 0o600)
        #expect(try store.loadOrCreate().addedCheckValues.isEmpty)
    }

    @Test("a data directory others can write to is refused, sticky bit or not; 0700 and 0755 are fine",
          arguments: [(0o777, false), (0o1777, false), (0o770, false), (0o702, false), (0o755, true), (0o700, true), (0o750, true)])
    func directoryMode(mode: Int, accepted: Bool) throws {
        try FileIO.makeDirectory(directory)
        chmod(directory, mode_t(mode))
        let store = KeyStore(dataDirectory: directory)
        if accepted {
            #expect(try store.loadOrCreate().created)
        } else {
            #expect {
                try store.loadOrCreate()
            } throws: { error in
                guard case .unsafeDirectory(let path, let found, _) = error as? KeyStoreError else { return false }
                return path == directory && found == UInt32(mode) && (error as? KeyStoreError)?.isPermissionProblem == true
            }
            #expect(!FileIO.exists(store.path))
        }
    }

    @Test("the advice fits the directory: chmod for one's own, a directory of one's own for a shared one like /tmp (never chmod /tmp)")
    func directoryAdvice() throws {
        try FileIO.makeDirectory(directory)
        chmod(directory, 0o777)
        let own = KeyStoreError.unsafeDirectory(path: directory, mode: 0o777, reason: "is writable by others").description
        #expect(own.contains("(chmod 700 \(directory))"), "\(own)")
        chmod(directory, 0o1777)
        let shared = KeyStoreError.unsafeDirectory(path: directory, mode: 0o1777, reason: "is writable by others").description
        #expect(!shared.contains("chmod") && shared.contains("--data-dir DIR, data_dir or BRIDGE_DATA_DIR"), "\(shared)")
    }

    @Test("a data directory owned by another user is refused", .enabled(if: geteuid() == 0, "chown to another uid needs root"))
    func directoryOwner() throws {
        try FileIO.makeDirectory(directory)
        chown(directory, 4242, 4242)
        #expect {
            try KeyStore(dataDirectory: directory).loadOrCreate()
        } throws: { error in
            guard case .unsafeDirectory(_, _, let reason) = error as? KeyStoreError else { return false }
            return reason.contains("uid 4242")
        }
    }

    @Test("a key file readable by others is refused with a chmod hint")
    func tooOpen() throws {
        let store = KeyStore(dataDirectory: directory)
        _ = try store.loadOrCreate()
        chmod(store.path, 0o644)
        #expect(throws: KeyStoreError.tooOpen(path: store.path, mode: 0o644)) { try store.load() }
        #expect(KeyStoreError.tooOpen(path: store.path, mode: 0o644).description.contains("chmod 600"))
    }

    @Test("key material never prints its secrets")
    func redaction() throws {
        let keys = BridgeKeys.generate()
        let text = "\(keys.signingKey) \(keys.noiseKey) \(String(reflecting: keys.signingKey))"
        #expect(!text.contains(Hex.encode(keys.signingKey.seed)))
        #expect(!text.contains(Hex.encode(keys.noiseKey.rawRepresentation)))
    }
}
