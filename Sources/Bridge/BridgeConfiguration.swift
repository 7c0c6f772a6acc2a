public import BotCrypto
public import BotSupport
public import Geohash
import MeshSync
import Nostr
public import BridgeCore

/// Where an effective configuration value came from (shown by `run --print-config`).
public enum ConfigurationSource: String, Sendable {
    case defaultValue = "default"
    case file
    case environment = "env"
    /// A command-line option of `run` (`--data-dir`), which wins over both.
    case option
}

/// Which mesh transport the bridge uses.
public enum MeshSetting: Equatable, Sendable, CustomStringConvertible {
    /// BlueZ over D-Bus; `adapter` nil = the first powered adapter.
    case bluez(adapter: String?)
    /// The loopback virtual radio (`radio-hub`), for demos and tests; `mtu` nil = the link default (512).
    case tcp(host: String, port: Int, mtu: Int? = nil)
    /// Several `radio-hub` segments at once (`tcp://A:P1,tcp://B:P2`), one link each: the bridge relays
    /// between them as a phone in range of both would (tests where the bridge is the only path).
    case tcpSegments([String])

    public enum Limits {
        /// The link MTUs a `tcp://…?mtu=N` URL may name: what `RadioClientTransport.Endpoint` (and so
        /// `mesh listen`) accepts — 23 is BLE's smallest ATT MTU; a frame length is a u16 on the socket.
        public static let mtuRange = 23...65_535
    }

    public init(parsing text: String) throws(ConfigurationError) {
        if text.contains(",") {
            var urls: [String] = []
            for part in text.split(separator: ",", omittingEmptySubsequences: false) {
                let segment = try MeshSetting(parsing: String(part))
                guard case .tcp = segment else {
                    throw .invalid(field: "mesh", value: text, reason: "only tcp:// URLs can be combined")
                }
                urls.append(segment.description)
            }
            self = .tcpSegments(urls)
        } else if text == "bluez" {
            self = .bluez(adapter: nil)
        } else if text.hasPrefix("bluez:") {
            let adapter = String(text.dropFirst(6))
            guard adapter.hasPrefix("hci"), adapter.count > 3, adapter.dropFirst(3).allSatisfy(\.isNumber) else {
                throw .invalid(field: "mesh", value: text, reason: "adapter must look like hci0")
            }
            self = .bluez(adapter: adapter)
        } else if text.lowercased().hasPrefix("tcp://") {
            self = try Self.parseTCP(text)
        } else {
            throw .invalid(field: "mesh", value: text, reason: "expected bluez, bluez:hciN or tcp://HOST:PORT[?mtu=N]")
        }
    }

    /// `tcp://IPV4:PORT[?mtu=N]`, the form `mesh listen --mesh` takes (the virtual radio connects to IPv4
    /// loopback literals only).
    private static func parseTCP(_ text: String) throws(ConfigurationError) -> MeshSetting {
        func invalid(_ reason: String) -> ConfigurationError {
            .invalid(field: "mesh", value: text, reason: reason + " (expected tcp://HOST:PORT[?mtu=N])")
        }
        let url: NetworkURL
        do {
            url = try NetworkURL.parse(text, schemes: ["tcp"])
        } catch {
            throw invalid(error.description)
        }
        guard let port = url.port else { throw invalid("no port") }
        let octets = url.host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets.allSatisfy({ $0.count <= 3 && UInt8($0) != nil }) else {
            throw invalid("host '\(url.host)' is not an IPv4 address")
        }
        var mtu: Int?
        if !url.pathAndQuery.isEmpty {
            guard url.pathAndQuery.hasPrefix("?") else { throw invalid("no path allowed ('\(url.pathAndQuery)')") }
            for pair in url.pathAndQuery.dropFirst().split(separator: "&", omittingEmptySubsequences: false) {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, parts[0] == "mtu" else { throw invalid("unknown parameter '\(pair)' (only mtu=N)") }
                guard let value = Int(parts[1]), Limits.mtuRange.contains(value) else {
                    throw invalid("mtu '\(parts[1])' is not a whole number from \(Limits.mtuRange.lowerBound) to \(Limits.mtuRange.upperBound)")
                }
                mtu = value
            }
        }
        return .tcp(host: url.host, port: port, mtu: mtu)
    }

    public var description: String {
        switch self {
        case .bluez(let adapter): adapter.map { "bluez:\($0)" } ?? "bluez"
        case .tcp(let host, let port, let mtu): "tcp://\(host):\(port)" + (mtu.map { "?mtu=\($0)" } ?? "")
        case .tcpSegments(let urls): urls.joined(separator: ",")
        }
    }
}

/// A `BRIDGE_*` environment variable that is no setting, with the known variable nearest to it.
public struct ConfigurationWarning: Sendable, Equatable, CustomStringConvertible {
    public let variable: String
    public let nearest: String
    /// Edit distance between the two names.
    public let distance: Int

    public var description: String {
        let hint = distance <= BridgeConfiguration.Limits.misspellingDistance
            ? "did you mean \(nearest)?" : "the nearest known variable is \(nearest)"
        return "environment variable \(variable) is not a bridge setting and is ignored; \(hint)"
    }
}

/// Why a configuration was rejected: one message naming the field (exit 64, nothing started).
public enum ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    case missing(field: String)
    case invalid(field: String, value: String, reason: String)
    case unknownField(String)
    case file(path: String, reason: String)
    /// Another error, with the misspelt `BRIDGE_*` variables of the environment: a typo is often its cause
    /// (`BRIDGE_GEOHSAH` leaves `geohash` unset), so its hint comes with the error, not only with a valid configuration.
    indirect case withTypos(ConfigurationError, [ConfigurationWarning])

    public var description: String {
        switch self {
        case .missing(let field): "configuration field '\(field)' is required"
        case .invalid(let field, let value, let reason): "configuration field '\(field)' = '\(value)': \(reason)"
        case .unknownField(let field):
            "unknown configuration field '\(field)'"
                + (BridgeConfiguration.nearestField(to: field).map { "; did you mean '\($0)'?" } ?? "")
        case .file(let path, let reason): "configuration file \(path): \(reason)"
        case .withTypos(let error, let typos): ([error.description] + typos.map(\.description)).joined(separator: "; ")
        }
    }
}

/// The bridge's operator-facing settings. Every field has a default (except the geohash), can be set in
/// the JSON config file under its key, and can be overridden by its environment variable (for Docker).
/// Precedence: environment > file > default.
public struct BridgeConfiguration: Sendable {
    /// The festival geohash channel (1–12 lowercase characters). The rendezvous cell is its 6-char prefix.
    public var geohash: GeohashCell
    /// Nickname on both sides (`n` tag, mesh announce); ≤ 15 characters, no `#` (Android UI caps at 15).
    public var nickname: String
    public var dataDirectory: String?
    /// Operator relays (`ws://` or `wss://` URLs), always used.
    public var relays: [String]
    /// Also use the nearest relays from the directory (off in the demo and tests: loopback only).
    public var relayDirectory: Bool
    /// relays.json to read when the directory is on (nil = the usual search path).
    public var relayFile: String?
    public var mesh: MeshSetting
    /// Plain-text mirror: down (channel → mesh, per-author personas) by default; up (mesh → channel) only
    /// when asked, as mesh users did not consent to being published.
    public var mirrorDownlink: Bool
    public var mirrorUplink: Bool
    /// Spam filter shadow mode: log would-be-hidden messages, hide nothing.
    public var shadow: Bool
    /// Channel gateway role (directions 1/2).
    public var gateway: Bool
    /// The other channel levels served beside the geohash itself (``ChannelLevels``); by default all of
    /// them: its parents at the apps' levels and, for a 6-character geohash, its 32 block children.
    public var channelLevels: Set<ChannelLevel>
    /// Mesh-bridge rendezvous role (directions 3/4); only possible with a geohash of ≥ 6 characters.
    public var rendezvous: Bool
    /// Loopback HTTP listener for /healthz and /metrics (`host:port`), or nil when `off`.
    public var httpListen: String?

    /// True when `http_listen` binds beyond loopback (then `run` needs the console token).
    public var httpListenBeyondLoopback: Bool {
        guard let httpListen, let host = try? NetworkURL.hostAndPort(httpListen, allowPortZero: true, requirePort: true).host else {
            return false
        }
        return !Limits.loopbackHosts.contains(host)
    }

    /// A dotted-quad IPv4 or a colon-hex IPv6 address (brackets already removed), without resolving anything.
    static func isIPAddress(_ host: String) -> Bool {
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        if octets.count == 4, octets.allSatisfy({ $0.count <= 3 && UInt8($0) != nil }) { return true }
        guard host.contains(":"), host.count <= 45 else { return false }
        return host.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." } && host.split(separator: ":", omittingEmptySubsequences: false).count <= 9
    }
    /// NIP-13 target committed on our channel events.
    public var powBits: Int
    public var logLevel: LogLevel
    /// The spam filter's settings as given (validated by the filter when the bridge starts).
    public var spam: JSONValue?
    /// The moderation log's settings as given (validated by the log when the bridge starts).
    public var modlog: JSONValue?
    /// Where each field's value came from, by key.
    public var sources: [String: ConfigurationSource]
    /// How long a verified mesh peer stays in the live table without traffic. Decision (reach issue): 180 s,
    /// Android's own peer keep, where the phone engine uses iOS's 60 s — Android announces every 30 s in the
    /// foreground and up to every 300 s on low battery, so after 60 s a quiet phone dropped out. A peer that
    /// falls out is still verified against its pin (``MeshPin``); the table decides direct-range standing
    /// and relay degree.
    public var meshPeerTimeoutSeconds = Limits.defaultMeshPeerTimeout
    /// The sync replies' airtime budget (issue 17): reply bytes in any 60 s, shared by every requester
    /// (``AirtimeBudget``). Default 256 KiB: a full answer of the default stores fits once, a small fraction of
    /// what one BLE link carries.
    public var syncReplyBudgetBytes = Limits.defaultSyncReplyBudget
    /// Operator keys (issue 18, fleet moderation): the Nostr keys whose signed fleet lists (``FleetList``) this
    /// bridge subscribes to and applies. Empty = no fleet list.
    public var operatorKeys: [XOnlyPublicKey] = []
    /// The fleet list's `d` tag: bridges sharing a site share a list. By default the geohash.
    public var fleetSite: String = ""
    /// PEM certificates to trust for `wss://` relays instead of the system store (a site's own relays behind a
    /// private CA); nil = the system store.
    public var relayCAFile: String?
    public enum Defaults {
        /// Where the apps park and watch courier drops: iOS's default DM relays (`NostrRelayManager.builtInRelays`) and
        /// the Android PR's (`NostrRelayManager.DEFAULT_RELAYS`), COURIER.md §0.5 and §4.2.
        public static let courierRelays = [
            "wss://relay.damus.io", "wss://nos.lol", "wss://relay.primal.net", "wss://offchain.pub", "wss://nostr21.com",
        ]
    }

    /// The courier gateway for private mail (issue 24): on by default with the gateway role.
    public var courier = true
    /// Where courier drops are published and watched: `courier_relays` (default ``Defaults/courierRelays``) plus the
    /// operator's `relays`, each once. Kept apart from the geohash relays (COURIER.md §4.2).
    public var courierRelays: [String] = []
    /// `BRIDGE_*` variables in the environment that are no setting (most likely misspelt): `run` and
    /// `--print-config` print each on stderr, naming the nearest known variable. Never fatal: the value was
    /// only ignored, and a container may carry variables meant for other tools.
    public var warnings: [ConfigurationWarning] = []

    public enum Limits {
        /// Longest nickname: Android's UI cap, so the name shows unchanged on every phone.
        public static let maxNicknameLength = PersonaBook.Limits.maxNicknameLength
        /// Highest PoW target we will mine for (Android users can demand up to 32).
        public static let maxPowBits = 32
        /// Largest config file read.
        public static let maxFileBytes = 1 << 20
        /// See ``BridgeConfiguration/meshPeerTimeoutSeconds``. An hour at most: a table of silent strangers
        /// kept longer only costs memory and relay-degree accuracy. 5 s at least, so tests can show a peer
        /// outside the table in seconds; below iOS's 60 s an operator only loses direct-range standing
        /// sooner (pins still verify the peer's messages).
        public static let defaultMeshPeerTimeout = 180
        public static let meshPeerTimeoutRange = 5...3_600
        /// See ``BridgeConfiguration/syncReplyBudgetBytes`` (``AirtimeBudget/Configuration`` per 60 s).
        public static let defaultSyncReplyBudget = AirtimeBudget.Configuration().bytesPerWindow
        /// 4 KiB at least: a reply frame is up to ~1 KB (a full board post), so less would answer a board round
        /// a few posts a minute. 4 MiB at most (≈ 70 kB/s): about all one BLE link carries — above it the
        /// budget no longer bounds what a request storm costs.
        public static let syncReplyBudgetRange = 4_096...4_194_304
        /// Hosts `http_listen` binds without the console token. Any other must be an IP address (not a name), and
        /// `run` starts with it only when the console token exists (the console authenticates beyond loopback).
        public static let loopbackHosts: Set<String> = ["127.0.0.1", "localhost", "::1"]
        /// Largest edit distance at which an unknown `BRIDGE_*` variable is called a misspelling of a known
        /// one ("did you mean"); farther ones are still warned about, naming the nearest.
        public static let misspellingDistance = 3
    }

    /// `BRIDGE_*` variables the project's own tools read (test runner, BLE testbed, image check): a shell that
    /// exported them for those starts the bridge without a warning.
    public static let toolVariables: Set<String> = ["BRIDGE_TEST_VENV", "BRIDGE_REQUIRE_BLE", "BRIDGE_SKIP_BLE", "BRIDGE_DEBIAN_MIRROR", "BRIDGE_TEST_ARTEFACTS"]

    /// One warning per `BRIDGE_*` variable of `environment` that is neither a field's variable nor a tool's,
    /// sorted by name.
    public static func unknownVariables(in environment: [String: String]) -> [ConfigurationWarning] {
        let known = fields.map(\.environment).filter { !$0.isEmpty }
        return environment.keys.filter { $0.hasPrefix("BRIDGE_") && !known.contains($0) && !toolVariables.contains($0) }.sorted()
            .map { variable in
                let ranked = known.map { (name: $0, distance: editDistance(variable, $0)) }
                let nearest = ranked.min { $0.distance < $1.distance || $0.distance == $1.distance && $0.name < $1.name }!
                return ConfigurationWarning(variable: variable, nearest: nearest.name, distance: nearest.distance)
            }
    }

    /// Levenshtein distance (insertions, deletions, substitutions) over the names' bytes.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let b = Array(b.utf8)
        var row = Array(0...b.count)
        for (i, x) in a.utf8.enumerated() {
            var diagonal = row[0]
            row[0] = i + 1
            for (j, y) in b.enumerated() {
                let above = row[j + 1]
                row[j + 1] = min(above + 1, row[j] + 1, diagonal + (x == y ? 0 : 1))
                diagonal = above
            }
        }
        return row[b.count]
    }

    /// Every key the file may contain, with its environment variable.
    public static let fields: [(key: String, environment: String, help: String)] = [
        ("geohash", "BRIDGE_GEOHASH", "geohash channel to serve (required)"),
        ("nickname", "BRIDGE_NICKNAME", "nickname on both sides (default bridge)"),
        ("data_dir", "BRIDGE_DATA_DIR", "data directory (keys, database)"),
        ("relays", "BRIDGE_RELAYS", "operator relay URLs (env: comma-separated)"),
        ("relay_directory", "BRIDGE_RELAY_DIRECTORY", "also use the nearest directory relays (on/off, default on)"),
        ("relay_file", "BRIDGE_RELAY_FILE", "relays.json path"),
        ("relay_ca_file", "BRIDGE_RELAY_CA_FILE", "PEM certificates trusted for wss:// relays instead of the system store"),
        ("mesh", "BRIDGE_MESH", "bluez, bluez:hciN or tcp://HOST:PORT[?mtu=N][,tcp://…] (default bluez)"),
        ("text_mirror", "BRIDGE_TEXT_MIRROR", "plain-text mirror: off, down, up or both (default down)"),
        ("shadow", "BRIDGE_SHADOW", "spam filter shadow mode (default off)"),
        ("gateway", "BRIDGE_GATEWAY", "channel gateway role (default on)"),
        ("channel_levels", "BRIDGE_CHANNEL_LEVELS",
         "other channel levels served: region, province, city, neighborhood, block (or lengths; env: comma-separated), none; default all parents + block children"),
        ("rendezvous", "BRIDGE_RENDEZVOUS", "mesh-bridge rendezvous role (default on when geohash ≥ 6 chars)"),
        ("http_listen", "BRIDGE_HTTP_LISTEN", "health/metrics listener HOST:PORT ([::1]:PORT for IPv6) or off (default 127.0.0.1:9477)"),
        ("pow_bits", "BRIDGE_POW_BITS", "NIP-13 target for our channel events (default 16)"),
        ("mesh_peer_timeout", "BRIDGE_MESH_PEER_TIMEOUT", "seconds a silent mesh peer stays in the live table (5–3600, default 180)"),
        ("sync_reply_budget", "BRIDGE_SYNC_REPLY_BUDGET", "sync reply bytes per 60 s, shared by all requesters (4096–4194304, default 262144)"),
        ("operator_keys", "BRIDGE_OPERATOR_KEYS", "operator Nostr keys (hex or npub) whose fleet lists apply (env: comma-separated)"),
        ("fleet_site", "BRIDGE_FLEET_SITE", "the fleet list's d tag: bridges of one site share it (default the geohash)"),
        ("courier", "BRIDGE_COURIER", "courier gateway for private mail between mesh phones and relays (on/off, default on with gateway)"),
        ("courier_relays", "BRIDGE_COURIER_RELAYS",
         "relays for courier drops besides relays (env: comma-separated; none; default both apps' DM relays, none with relay_directory off)"),
        ("log_level", "BRIDGE_LOG_LEVEL", "trace, debug, info, notice, warning, error (default info)"),
        ("spam", "", "spam filter settings object (file only)"),
        ("modlog", "", "moderation log settings: log_text, retention_days, max_records (file only)"),
    ]

    /// Resolves the configuration from an optional config file's JSON text and the environment. An error comes
    /// with the hints for misspelt `BRIDGE_*` variables (``ConfigurationError/withTypos(_:_:)``).
    public static func resolve(fileText: String?, filePath: String = "config", environment: [String: String])
        throws(ConfigurationError) -> BridgeConfiguration
    {
        do {
            return try resolveSettings(fileText: fileText, filePath: filePath, environment: environment)
        } catch {
            let typos = unknownVariables(in: environment)
            throw typos.isEmpty ? error : .withTypos(error, typos)
        }
    }

    /// The file field nearest to an unknown one, when it is close enough to be a misspelling.
    static func nearestField(to name: String) -> String? {
        let nearest = fields.map { (key: $0.key, distance: editDistance(name, $0.key)) }
            .min { $0.distance < $1.distance || $0.distance == $1.distance && $0.key < $1.key }
        guard let nearest, nearest.distance <= Limits.misspellingDistance else { return nil }
        return nearest.key
    }

    private static func resolveSettings(fileText: String?, filePath: String, environment: [String: String])
        throws(ConfigurationError) -> BridgeConfiguration
    {
        let file = try parseFile(fileText, path: filePath)
        for (key, _) in file where !fields.contains(where: { $0.key == key }) { throw .unknownField(key) }
        var settings = SettingsReader(file: file, environment: environment)

        guard let geohashText = try settings.string("geohash") else { throw .missing(field: "geohash") }
        let geohash: GeohashCell
        do {
            geohash = try GeohashCell(geohashText)
        } catch {
            throw .invalid(field: "geohash", value: geohashText, reason: "must be a lowercase geohash of 1–12 characters")
        }
        let nickname = try settings.string("nickname") ?? "bridge"
        guard !nickname.isEmpty, nickname.count <= Limits.maxNicknameLength, !nickname.contains("#"),
            nickname == nickname.trimmingSpaces
        else {
            throw .invalid(field: "nickname", value: nickname, reason: "must be 1–15 characters, no '#', no edge spaces")
        }
        let dataDirectory = try settings.string("data_dir")
        let (relays, relayDirectory) = try resolveRelays(&settings)
        let relayFile = try settings.string("relay_file")
        let relayCAFile = try settings.string("relay_ca_file")
        if let relayCAFile, relayCAFile.isEmpty {
            throw .invalid(field: "relay_ca_file", value: "", reason: "must be a file path (leave it out for the system store)")
        }
        let mesh = try MeshSetting(parsing: try settings.string("mesh") ?? "bluez")
        let mirror = try resolveMirror(&settings)
        let shadow = try settings.bool("shadow", default: false)
        let gateway = try settings.bool("gateway", default: true)
        let channelLevels = try parseChannelLevels(settings.raw("channel_levels"), geohash: geohash)
        let rendezvous = try settings.bool("rendezvous", default: geohash.precision >= 6)
        if rendezvous && geohash.precision < 6 {
            throw .invalid(field: "rendezvous", value: "on", reason: "needs a geohash of at least 6 characters")
        }
        let httpListen = try resolveHTTPListen(&settings)
        let powBits = try settings.integer("pow_bits", default: 16, in: 0...Limits.maxPowBits, reason: "must be a whole number from 0 to 32")
        let meshPeerTimeout = try settings.integer(
            "mesh_peer_timeout", default: Limits.defaultMeshPeerTimeout, in: Limits.meshPeerTimeoutRange,
            reason: "must be a whole number of seconds from 5 to 3600")
        let syncReplyBudget = try settings.integer(
            "sync_reply_budget", default: Limits.defaultSyncReplyBudget, in: Limits.syncReplyBudgetRange,
            reason: "must be a whole number of bytes per 60 s from 4096 to 4194304")
        let operatorKeys = try resolveOperatorKeys(&settings)
        let fleetSite = try settings.string("fleet_site") ?? geohash.string
        guard !fleetSite.isEmpty, fleetSite.utf8.count <= UnverifiedEvent.Limits.maxTagElementBytes else {
            throw .invalid(field: "fleet_site", value: fleetSite, reason: "must be 1–\(UnverifiedEvent.Limits.maxTagElementBytes) bytes")
        }
        let courier = try settings.bool("courier", default: gateway)
        let courierRelaysSet = settings.raw("courier_relays")
        // Unset: both apps' DM relays — unless relay_directory is off, where the operator chose every relay the bridge
        // reaches (a closed or offline site): then only the operator's relays.
        var courierRelays = courierRelaysSet.text == nil && courierRelaysSet.json == nil
            ? (relayDirectory ? Defaults.courierRelays : []) : try settings.strings("courier_relays", what: "URL strings")
        if courierRelays == ["none"] { courierRelays = [] }
        for url in courierRelays {
            do {
                _ = try NetworkURL.parse(url, schemes: ["ws", "wss"])
            } catch {
                throw .invalid(field: "courier_relays", value: url, reason: error.description)
            }
        }
        let levelText = try settings.string("log_level") ?? "info"
        guard let logLevel = LogLevel(name: levelText) else {
            throw .invalid(field: "log_level", value: levelText, reason: "must be trace, debug, info, notice, warning or error")
        }
        let spam = try settings.object("spam")
        let modlog = try settings.object("modlog")
        var configuration = BridgeConfiguration(
            geohash: geohash, nickname: nickname, dataDirectory: dataDirectory, relays: relays,
            relayDirectory: relayDirectory, relayFile: relayFile, mesh: mesh, mirrorDownlink: mirror.down,
            mirrorUplink: mirror.up, shadow: shadow, gateway: gateway, channelLevels: channelLevels, rendezvous: rendezvous,
            httpListen: httpListen, powBits: powBits, logLevel: logLevel, spam: spam, modlog: modlog, sources: settings.sources)
        configuration.meshPeerTimeoutSeconds = meshPeerTimeout
        configuration.syncReplyBudgetBytes = syncReplyBudget
        configuration.operatorKeys = operatorKeys
        configuration.fleetSite = fleetSite
        configuration.relayCAFile = relayCAFile
        configuration.courier = courier
        configuration.courierRelays = courierRelays + relays.filter { !courierRelays.contains($0) }
        configuration.warnings = unknownVariables(in: environment)
        return configuration
    }

    /// The file's text with every whole line that starts with `//` (after spaces) blanked, so a sample file can say
    /// what each setting does (`contrib/config.example.json`). Only whole lines: `//` inside a value (a URL) stays.
    /// Blanked, not removed, so a JSON error still names the right line.
    static func withoutCommentLines(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingSpaces.hasPrefix("//") ? "" : String($0) }
            .joined(separator: "\n")
    }

    /// The config file's top-level object (none without a file).
    private static func parseFile(_ text: String?, path: String) throws(ConfigurationError) -> [(String, JSONValue)] {
        guard let text else { return [] }
        do {
            let json = withoutCommentLines(text)
            guard let object = try JSONParser(limits: .init(maxBytes: Limits.maxFileBytes, maxDepth: 16)).parse(json).objectValue else {
                throw ConfigurationError.file(path: path, reason: "must be a JSON object")
            }
            return object
        } catch let error as ConfigurationError {
            throw error
        } catch {
            throw .file(path: path, reason: "not valid JSON (\(error))")
        }
    }

    /// `relays` (each a ws/wss URL) and `relay_directory` (off needs at least one relay).
    private static func resolveRelays(_ settings: inout SettingsReader) throws(ConfigurationError) -> ([String], Bool) {
        let relays = try settings.strings("relays", what: "URL strings")
        for url in relays {
            do {
                _ = try NetworkURL.parse(url, schemes: ["ws", "wss"])
            } catch {
                throw .invalid(field: "relays", value: url, reason: error.description)
            }
        }
        let relayDirectory = try settings.bool("relay_directory", default: true)
        if !relayDirectory && relays.isEmpty {
            throw .invalid(field: "relays", value: "", reason: "with relay_directory off, at least one relay is needed")
        }
        return (relays, relayDirectory)
    }

    /// `text_mirror`: down by default (reach issue): the channel is public on Nostr already, so no consent question
    /// arises, and it is the only way Android phones (no carrier type 0x28) see it. Up stays opt-in.
    private static func resolveMirror(_ settings: inout SettingsReader) throws(ConfigurationError) -> (down: Bool, up: Bool) {
        let text = try settings.string("text_mirror") ?? "down"
        switch text {
        case "off": return (false, false)
        case "down": return (true, false)
        case "up": return (false, true)
        case "both": return (true, true)
        default: throw .invalid(field: "text_mirror", value: text, reason: "must be off, down, up or both")
        }
    }

    /// `http_listen`: HOST:PORT on a loopback host or an IP address, or off (nil).
    private static func resolveHTTPListen(_ settings: inout SettingsReader) throws(ConfigurationError) -> String? {
        let listen = try settings.string("http_listen") ?? "127.0.0.1:9477"
        guard listen != "off" else { return nil }
        let reason = "must be HOST:PORT with a loopback host (127.0.0.1, localhost, [::1]) or, with the console token, an IP address (0.0.0.0, [::], 192.0.2.7), or off"
        let host: String
        do {
            host = try NetworkURL.hostAndPort(listen, allowPortZero: false, requirePort: true).host
        } catch {
            throw .invalid(field: "http_listen", value: listen, reason: "\(error); " + reason)
        }
        guard Limits.loopbackHosts.contains(host) || Self.isIPAddress(host) else {
            throw .invalid(field: "http_listen", value: listen, reason: "'\(host)' is neither loopback nor an IP address; " + reason)
        }
        return listen
    }

    /// `operator_keys`: hex or npub, each once.
    private static func resolveOperatorKeys(_ settings: inout SettingsReader) throws(ConfigurationError) -> [XOnlyPublicKey] {
        var keys: [XOnlyPublicKey] = []
        for text in try settings.strings("operator_keys", what: "hex or npub strings") {
            do {
                let key = try OperatorKeys.parse(text)
                if !keys.contains(key) { keys.append(key) }
            } catch {
                throw .invalid(field: "operator_keys", value: text, reason: error.description)
            }
        }
        return keys
    }

    /// Reads settings by key from the environment (its `BRIDGE_*` variable wins) or the file, noting where each came
    /// from.
    struct SettingsReader {
        let file: [(String, JSONValue)]
        let environment: [String: String]
        var sources: [String: ConfigurationSource] = [:]

        /// The raw value of `key`: environment text, file JSON, or nil.
        mutating func raw(_ key: String) -> (text: String?, json: JSONValue?) {
            let variable = BridgeConfiguration.fields.first { $0.key == key }!.environment
            if !variable.isEmpty, let text = environment[variable] {
                sources[key] = .environment
                return (text, nil)
            }
            if let value = file.first(where: { $0.0 == key })?.1 {
                sources[key] = .file
                return (nil, value)
            }
            sources[key] = .defaultValue
            return (nil, nil)
        }

        mutating func string(_ key: String) throws(ConfigurationError) -> String? {
            let (text, json) = raw(key)
            if let text { return text }
            guard let json else { return nil }
            guard let s = json.stringValue else { throw .invalid(field: key, value: JSONWriter.compact(json), reason: "must be a string") }
            return s
        }

        /// A list setting: comma-separated in the environment, an array of strings in the file (`what` names the
        /// strings in the error).
        mutating func strings(_ key: String, what: String) throws(ConfigurationError) -> [String] {
            let (text, json) = raw(key)
            if let text { return commaSeparated(text) }
            guard let json else { return [] }
            guard let array = json.arrayValue, array.allSatisfy({ $0.stringValue != nil }) else {
                throw .invalid(field: key, value: JSONWriter.compact(json), reason: "must be an array of \(what)")
            }
            return array.compactMap(\.stringValue)
        }

        /// A whole number in `range` (env text or file number, as written), or `value` when unset.
        mutating func integer(_ key: String, default value: Int, in range: ClosedRange<Int>, reason: String) throws(ConfigurationError) -> Int {
            let (text, json) = raw(key)
            guard let text = text ?? json.map({ JSONWriter.compact($0) }) else { return value }
            guard let n = Int(text), range.contains(n) else { throw .invalid(field: key, value: text, reason: reason) }
            return n
        }

        mutating func bool(_ key: String, default value: Bool) throws(ConfigurationError) -> Bool {
            let (text, json) = raw(key)
            if let text {
                switch text.lowercased() {
                case "1", "true", "on", "yes": return true
                case "0", "false", "off", "no": return false
                default: throw .invalid(field: key, value: text, reason: "must be on or off")
                }
            }
            guard let json else { return value }
            guard let b = json.boolValue else { throw .invalid(field: key, value: JSONWriter.compact(json), reason: "must be true or false") }
            return b
        }

        /// A settings object (file only): nil when unset.
        mutating func object(_ key: String) throws(ConfigurationError) -> JSONValue? {
            guard let value = raw(key).json else { return nil }
            guard value.objectValue != nil else { throw .invalid(field: key, value: JSONWriter.compact(value), reason: "must be an object") }
            return value
        }
    }

    /// `run --data-dir DIR`: the option wins over the file and `BRIDGE_DATA_DIR`, as for every other command.
    public mutating func overrideDataDirectory(_ path: String) {
        dataDirectory = path
        sources["data_dir"] = .option
    }

    /// The non-empty, trimmed items of a comma-separated environment value.
    static func commaSeparated(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingSpaces }.filter { !$0.isEmpty }
    }

    /// `channel_levels`: a comma-separated list (env) or an array of names or lengths (file); `none` (or an
    /// empty list) serves the geohash alone. Each level must be one the geohash has (a parent at an app
    /// level, or `block` under a 6-character geohash); its own level is always served and may be listed.
    static func parseChannelLevels(_ raw: (text: String?, json: JSONValue?), geohash: GeohashCell)
        throws(ConfigurationError) -> Set<ChannelLevel>
    {
        let available = ChannelLevels.defaultLevels(for: geohash)
        var names: [String]
        let shown: String
        if let text = raw.text {
            names = commaSeparated(text)
            shown = text
        } else if let json = raw.json {
            shown = JSONWriter.compact(json)
            if let text = json.stringValue {
                names = commaSeparated(text)
            } else if let array = json.arrayValue {
                names = []
                for element in array {
                    if let text = element.stringValue {
                        names.append(text)
                    } else if let number = element.integerValue {
                        names.append(String(number))
                    } else {
                        throw .invalid(field: "channel_levels", value: shown, reason: "must be level names or lengths")
                    }
                }
            } else {
                throw .invalid(field: "channel_levels", value: shown, reason: "must be a list of level names or lengths")
            }
        } else {
            return available
        }
        if names == ["none"] { names = [] }
        let offered = (available.sorted().map(\.name) + ["none"]).joined(separator: ", ")
        var levels: Set<ChannelLevel> = []
        for name in names {
            guard let level = ChannelLevel(name: name) else {
                throw .invalid(field: "channel_levels", value: shown, reason: "'\(name)' is no channel level (\(offered))")
            }
            if level.rawValue == geohash.precision { continue }
            guard available.contains(level) else {
                throw .invalid(
                    field: "channel_levels", value: shown,
                    reason: "'\(name)' is neither a parent nor the block level of \(geohash) (\(offered))")
            }
            levels.insert(level)
        }
        return levels
    }

    /// Every channel the gateway serves, the geohash first (``ChannelLevels/channels(for:levels:)``).
    public var servedChannels: [GeohashCell] { ChannelLevels.channels(for: geohash, levels: channelLevels) }

    /// The 6-character rendezvous cell, when the geohash is precise enough.
    public var rendezvousCell: GeohashCell? { geohash.precision >= 6 ? geohash.truncated(to: 6) : nil }

    /// The effective configuration with each value's source, for `--print-config`.
    public var described: JSONValue {
        func entry(_ key: String, _ value: JSONValue) -> (String, JSONValue) {
            (key, .object([("value", value), ("source", .string((sources[key] ?? .defaultValue).rawValue))]))
        }
        let mirror = mirrorDownlink ? (mirrorUplink ? "both" : "down") : (mirrorUplink ? "up" : "off")
        return .object([
            entry("geohash", .string(geohash.string)),
            entry("nickname", .string(nickname)),
            entry("data_dir", dataDirectory.map(JSONValue.string) ?? .null),
            entry("relays", .array(relays.map(JSONValue.string))),
            entry("relay_directory", .bool(relayDirectory)),
            entry("relay_file", relayFile.map(JSONValue.string) ?? .null),
            entry("relay_ca_file", relayCAFile.map(JSONValue.string) ?? .null),
            entry("mesh", .string(mesh.description)),
            entry("text_mirror", .string(mirror)),
            entry("shadow", .bool(shadow)),
            entry("gateway", .bool(gateway)),
            entry("channel_levels", .array(channelLevels.sorted().map { .string($0.name) })),
            entry("rendezvous", .bool(rendezvous)),
            entry("http_listen", .string(httpListen ?? "off")),
            entry("pow_bits", .integer(Int64(powBits))),
            entry("mesh_peer_timeout", .integer(Int64(meshPeerTimeoutSeconds))),
            entry("sync_reply_budget", .integer(Int64(syncReplyBudgetBytes))),
            entry("operator_keys", .array(operatorKeys.map { .string($0.hex) })),
            entry("fleet_site", .string(fleetSite)),
            entry("courier", .bool(courier)),
            entry("courier_relays", .array(courierRelays.map(JSONValue.string))),
            entry("log_level", .string(logLevel.name)),
            entry("spam", spam ?? .object([])),
            entry("modlog", modlog ?? .object([])),
        ])
    }
}
