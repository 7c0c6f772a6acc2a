import BridgeApp
import BotSupport
import Bridge
import Geohash
import Nostr
import BotCrypto
import BridgeCore

/// `bitchat-bridge keys`: creates the identity on first use and shows its public parts (never secrets).
enum KeysCommand {
    static let spec = CommandSpec(
        path: "keys",
        summary: "Create on first use, then show, the bridge's identity. Secrets stay in the key file (mode 0600).",
        options: [
            .value("--data-dir", "DIR", "Data directory (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge)."),
            .value("--geohash", "GH", "Also show the Nostr identities for this geohash channel (and its 6-char cell)."),
            .flag("--json", "Print one JSON object."),
        ]
    )

    static func run(_ args: ParsedArguments) throws(CommandExit) {
        let geohash: GeohashCell?
        if let text = args.value("--geohash") {
            do {
                geohash = try GeohashCell(text)
            } catch {
                throw .usage("--geohash '\(text)' is not a lowercase geohash of 1–12 characters (\(error))")
            }
        } else {
            geohash = nil
        }
        let store = KeyStore(dataDirectory: Paths.dataDirectory(option: args.value("--data-dir")))
        let loaded = try load(store)
        let keys = loaded.keys
        var identities: [(String, JSONValue)] = []
        if let geohash {
            identities.append(try nostrIdentity(role: "channel", label: geohash.string, keys: keys, derive: {
                try keys.channelKey(geohash: geohash.string)
            }))
            if geohash.precision >= 6 {
                let cell = geohash.truncated(to: 6).string
                identities.append(try nostrIdentity(role: "rendezvous", label: "bridge|" + cell, keys: keys, derive: {
                    try keys.rendezvousKey(cell: cell)
                }))
            }
        }
        let value: JSONValue = .object(
            [
                ("key_file", .string(store.path)),
                ("created", .bool(loaded.created)),
                ("peer_id", .string(Hex.encode(keys.peerID))),
                ("fingerprint", .string(Hex.encode(keys.fingerprint))),
                ("noise_public_key", .string(Hex.encode(keys.noiseKey.publicKey))),
                ("signing_public_key", .string(Hex.encode(keys.signingKey.publicKey.rawRepresentation))),
            ] + (identities.isEmpty ? [] : [("nostr", .object(identities))])
        )
        if args.has("--json") {
            printJSON(value)
            return
        }
        print(loaded.created ? "Created a new identity in \(store.path)" : "Identity from \(store.path)")
        print("  mesh peer ID:      \(Hex.encode(keys.peerID))")
        print("  fingerprint:       \(Hex.encode(keys.fingerprint))")
        print("  noise public key:  \(Hex.encode(keys.noiseKey.publicKey))")
        print("  signing key:       \(Hex.encode(keys.signingKey.publicKey.rawRepresentation))")
        for (role, identity) in identities {
            let npub = identity["npub"]?.stringValue ?? ""
            let label = identity["label"]?.stringValue ?? ""
            print("  nostr \(role) (\(label)): \(npub)  #\(identity["suffix"]?.stringValue ?? "")")
        }
    }

    /// The identity for any command (keys, run, mesh, nostr): a directory or key file with unsafe permissions
    /// is a setup error (exit 64), a damaged key file a failure (exit 1). A check value added to an older file is
    /// reported through `note` (default: stderr; `run` logs it).
    static func load(_ store: KeyStore, note: (String) -> Void = { printError("note: \($0)") }) throws(CommandExit) -> KeyStore.Loaded {
        try DataFiles.loadKeys(store, note: note)
    }

    /// For commands that use the data directory without the key file (identities, modlog): exit 64 on a
    /// permission problem.
    static func checkDataDirectory(_ path: String) throws(CommandExit) { try DataFiles.checkDataDirectory(path) }

    private static func nostrIdentity(
        role: String,
        label: String,
        keys: BridgeKeys,
        derive: () throws -> SchnorrSecretKey
    ) throws(CommandExit) -> (String, JSONValue) {
        let key: SchnorrSecretKey
        do {
            key = try derive()
        } catch {
            throw .failure("cannot derive the \(role) key: \(error)")
        }
        let pubkey = key.publicKey
        return (
            role,
            .object([
                ("label", .string(label)),
                ("pubkey", .string(pubkey.hex)),
                ("npub", .string(NIP19.npub(pubkey))),
                // Phones show `<nickname>#<last 4 hex of pubkey>`.
                ("suffix", .string(String(pubkey.hex.suffix(4)))),
            ])
        )
    }
}
