import BotCrypto
public import BotSupport
import Nostr

#if canImport(Glibc)
import Glibc
public import BridgeCore
#endif

/// Why the key file could not be used. The bridge never replaces an unreadable key file with a new
/// identity: phones pin the old one, so silently changing it would look like an impersonation.
public enum KeyStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    case corrupt(path: String, reason: String)
    case tooOpen(path: String, mode: UInt32)
    /// The data directory could be changed by someone else (see ``KeyStore/checkDirectory(_:)``).
    case unsafeDirectory(path: String, mode: UInt32, reason: String)
    case io(FileError)

    public var description: String {
        switch self {
        case .corrupt(let path, let reason):
            "key file \(path) is corrupt (\(reason)); restore it from a backup, or move it away to create a new identity"
        case .tooOpen(let path, let mode):
            "key file \(path) has mode \(String(mode, radix: 8)); it holds secrets and must be 600 (chmod 600 \(path))"
        case .unsafeDirectory(let path, let mode, let reason):
            "data directory \(path) has mode \(String(mode, radix: 8)) and \(reason): whoever can write it can replace the "
                + "identity, the policy file or the database; refusing to use it (\(Self.advice(path: path, mode: mode)))"
        case .io(let error): "key file: \(error)"
        }
    }

    /// What fixes an unsafe data directory: a shared one (sticky, as `/tmp`, or another user's) is not this bridge's
    /// to chmod, so the advice is a directory of its own; a directory of this user's just loses the others' write bit.
    static func advice(path: String, mode: UInt32) -> String {
        var info = stat()
        let shared = mode & UInt32(S_ISVTX) != 0 || (stat(path, &info) == 0 && info.st_uid != geteuid())
        return shared
            ? "use a data directory of your own: --data-dir DIR, data_dir or BRIDGE_DATA_DIR"
            : "chmod 700 \(path)"
    }

    /// A setup mistake the operator fixes with chmod/chown (exit 64), not damaged data (exit 1).
    public var isPermissionProblem: Bool {
        switch self {
        case .tooOpen, .unsafeDirectory: true
        case .corrupt, .io: false
        }
    }
}

/// Loads or creates `keys.json` in the data directory (directory 0700, file 0600, written atomically).
///
/// File layout: `{"format":1,"nostr_seed":hex,"nostr_seed_check":hex,"noise_static_private":hex,
/// "noise_static_public":hex,"ed25519_seed":hex,"ed25519_public":hex}`. Every secret has a check value: the
/// public halves for the two key pairs, and for the Nostr seed (which has no public half) ``seedCheck(_:)``,
/// a keyed hash of it. On load each must match what its secret derives, so a damaged secret is reported
/// instead of becoming a new, silently different identity. Files written before `nostr_seed_check` existed
/// load as they are and get the check value added at once (``Loaded/addedCheckValues``; the caller logs it).
///
/// The data directory must not be writable by anyone but its owner, and be owned by the user running the
/// bridge or root (the rule of OpenSSH's `StrictModes` for `~/.ssh`): otherwise another local user could swap
/// `keys.json`, `policy.json` or the database under the bridge. No exception for the sticky bit: in a
/// sticky world-writable directory others can still create the files the bridge opens later (a
/// `policy.json`, the database's `-wal`).
public struct KeyStore: Sendable {
    public static let fileName = "keys.json"
    public static let fileFormat: Int64 = 1

    /// What ``loadOrCreate(generate:)`` found.
    public struct Loaded: Sendable {
        public let keys: BridgeKeys
        /// No key file existed: a new identity was generated and written.
        public let created: Bool
        /// Check values missing from an older file and written into it by this load (e.g. `nostr_seed_check`).
        public let addedCheckValues: [String]
    }

    public let dataDirectory: String

    public init(dataDirectory: String) {
        self.dataDirectory = dataDirectory
    }

    public var path: String { FileIO.join(dataDirectory, Self.fileName) }

    /// The stored keys, or newly generated ones (written before they are returned) when there is no file.
    /// The data directory is checked first (``checkDirectory(_:)``) and created 0700 when missing.
    public func loadOrCreate(generate: () -> BridgeKeys = BridgeKeys.generate) throws(KeyStoreError) -> Loaded {
        try Self.checkDirectory(dataDirectory)
        if FileIO.exists(path) {
            let (keys, missing) = try loadChecked()
            guard !missing.isEmpty else { return Loaded(keys: keys, created: false, addedCheckValues: []) }
            try write(keys)
            return Loaded(keys: keys, created: false, addedCheckValues: missing)
        }
        do {
            try FileIO.makeDirectory(dataDirectory, mode: 0o700)
        } catch {
            throw .io(error)
        }
        let keys = generate()
        try write(keys)
        return Loaded(keys: keys, created: true, addedCheckValues: [])
    }

    /// Reads and checks an existing key file (without adding missing check values).
    public func load() throws(KeyStoreError) -> BridgeKeys {
        try loadChecked().keys
    }

    /// Refuses a data directory that others could write to (mode `g+w` or `o+w`) or that belongs to another
    /// user than this process's (root excepted). A directory that does not exist yet passes: it is created 0700.
    public static func checkDirectory(_ path: String) throws(KeyStoreError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return }
            throw .io(FileError(operation: "stat", path: path, code: errno))
        }
        let mode = UInt32(info.st_mode) & 0o7777
        if mode & 0o022 != 0 {
            throw .unsafeDirectory(path: path, mode: mode, reason: "is writable by \(mode & 0o020 != 0 ? "its group" : "others")")
        }
        let owner = info.st_uid
        if owner != geteuid() && owner != 0 {
            throw .unsafeDirectory(path: path, mode: mode, reason: "belongs to uid \(owner), not to this user (uid \(geteuid())) or root")
        }
    }

    /// The check value stored beside the Nostr seed: HMAC-SHA256 keyed by the seed over a fixed label. It
    /// reveals nothing about the seed and any changed bit of the seed changes it.
    public static func seedCheck(_ seed: [UInt8]) -> [UInt8] {
        HMACSHA256.authenticationCode(key: seed, message: Array("bitchat-bridge keys.json nostr_seed check v1".utf8))
    }

    private func loadChecked() throws(KeyStoreError) -> (keys: BridgeKeys, missingCheckValues: [String]) {
        let bytes: [UInt8]
        let mode: UInt32
        do {
            mode = try FileIO.permissions(path)
            bytes = try FileIO.read(path, maxBytes: 64 << 10)
        } catch {
            throw .io(error)
        }
        guard mode & 0o077 == 0 else { throw .tooOpen(path: path, mode: mode) }
        return try Self.decode(bytes, path: path)
    }

    private func write(_ keys: BridgeKeys) throws(KeyStoreError) {
        do {
            try FileIO.writeAtomically(Array((JSONWriter.pretty(Self.encode(keys)) + "\n").utf8), to: path, mode: 0o600)
        } catch {
            throw .io(error)
        }
    }

    static func encode(_ keys: BridgeKeys) -> JSONValue {
        .object([
            ("format", .integer(fileFormat)),
            ("nostr_seed", .string(Hex.encode(keys.nostrSeed))),
            ("nostr_seed_check", .string(Hex.encode(seedCheck(keys.nostrSeed)))),
            ("noise_static_private", .string(Hex.encode(keys.noiseKey.rawRepresentation))),
            ("noise_static_public", .string(Hex.encode(keys.noiseKey.publicKey))),
            ("ed25519_seed", .string(Hex.encode(keys.signingKey.seed))),
            ("ed25519_public", .string(Hex.encode(keys.signingKey.publicKey.rawRepresentation))),
        ])
    }

    static func decode(_ bytes: [UInt8], path: String) throws(KeyStoreError) -> (keys: BridgeKeys, missingCheckValues: [String]) {
        let root: JSONValue
        do {
            root = try JSONParser().parse(bytes)
        } catch {
            throw .corrupt(path: path, reason: "not valid JSON")
        }
        guard root["format"]?.integerValue == fileFormat else {
            throw .corrupt(path: path, reason: "unknown or missing format")
        }
        func field(_ name: String) throws(KeyStoreError) -> [UInt8] {
            guard let text = root[name]?.stringValue, let bytes = try? Hex.decode(text, expectedCount: 32) else {
                throw .corrupt(path: path, reason: "field \(name) is missing or not 32 bytes of hex")
            }
            return bytes
        }
        let seed = try field("nostr_seed")
        let noisePrivate = try field("noise_static_private")
        let noisePublic = try field("noise_static_public")
        let edSeed = try field("ed25519_seed")
        let edPublic = try field("ed25519_public")
        var missing: [String] = []
        if root["nostr_seed_check"] == nil {
            missing.append("nostr_seed_check")
        } else if try field("nostr_seed_check") != seedCheck(seed) {
            throw .corrupt(path: path, reason: "Nostr seed does not match its check value")
        }
        guard let noise = try? X25519PrivateKey(rawRepresentation: noisePrivate), noise.publicKey == noisePublic else {
            throw .corrupt(path: path, reason: "Noise private key does not match its public key")
        }
        guard let signing = try? Ed25519PrivateKey(seed: edSeed), signing.publicKey.rawRepresentation == edPublic else {
            throw .corrupt(path: path, reason: "Ed25519 seed does not match its public key")
        }
        guard let keys = try? BridgeKeys(nostrSeed: seed, noiseKey: noise, signingKey: signing) else {
            throw .corrupt(path: path, reason: "invalid key material")
        }
        return (keys, missing)
    }
}
