public import BotSupport
public import Geohash

/// Where an effective configuration value came from (shown by `run --print-config`).
public enum ConfigurationSource: String, Sendable {
    case defaultValue = "default"
    case file
    case environment = "env"
}

/// Which mesh transport the bridge uses.
public enum MeshSetting: Equatable, Sendable, CustomStringConvertible {
    /// BlueZ over D-Bus; `adapter` nil = the first powered adapter.
    case bluez(adapter: String?)
    /// The loopback virtual radio (`radio-hub`), for demos and tests.
    case tcp(host: String, port: Int)
    /// Several `radio-hub` segments at once (`tcp://A:P1,tcp://B:P2`), one link each: the bridge relays
    /// between them as a phone in range of both would (tests where the bridge is the only path).
    case tcpSegments([String])

    public init(parsing text: String) throws(ConfigurationError) {
        if text.contains(",") {
            var urls: [String] = []
            for part in text.split(separator: ",", omittingEmptySubsequences: false) {
                guard case .tcp(let host, let port) = try MeshSetting(parsing: String(part)) else {
                    throw .invalid(field: "mesh", value: text, reason: "only tcp:// URLs can be combined")
                }
                urls.append("tcp://\(host):\(port)")
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
        } else if text.hasPrefix("tcp://") {
            let rest = text.dropFirst(6)
            guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]),
                (1...65535).contains(port), colon != rest.startIndex
            else { throw .invalid(field: "mesh", value: text, reason: "expected tcp://HOST:PORT") }
            self = .tcp(host: String(rest[..<colon]), port: port)
        } else {
            throw .invalid(field: "mesh", value: text, reason: "expected bluez, bluez:hciN or tcp://HOST:PORT")
        }
    }

    public var description: String {
        switch self {
        case .bluez(let adapter): adapter.map { "bluez:\($0)" } ?? "bluez"
        case .tcp(let host, let port): "tcp://\(host):\(port)"
        case .tcpSegments(let urls): urls.joined(separator: ",")
        }
    }
}

/// Why a configuration was rejected: one message naming the field (exit 64, nothing started).
public enum ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    case missing(field: String)
    case invalid(field: String, value: String, reason: String)
    case unknownField(String)
    case file(path: String, reason: String)

    public var description: String {
        switch self {
        case .missing(let field): "configuration field '\(field)' is required"
        case .invalid(let field, let value, let reason): "configuration field '\(field)' = '\(value)': \(reason)"
        case .unknownField(let field): "unknown configuration field '\(field)'"
        case .file(let path, let reason): "configuration file \(path): \(reason)"
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
    /// Plain-text mirror (off by default: mesh users did not consent to being published).
    public var mirrorDownlink: Bool
    public var mirrorUplink: Bool
    /// Spam filter shadow mode: log would-be-hidden messages, hide nothing.
    public var shadow: Bool
    /// Channel gateway role (directions 1/2).
    public var gateway: Bool
    /// Mesh-bridge rendezvous role (directions 3/4); only possible with a geohash of ≥ 6 characters.
    public var rendezvous: Bool
    /// Loopback HTTP listener for /healthz and /metrics (`host:port`), or nil when `off`.
    public var httpListen: String?
    /// NIP-13 target committed on our channel events.
    public var powBits: Int
    public var logLevel: LogLevel
    /// The spam filter's settings as given (validated by the filter when the bridge starts).
    public var spam: JSONValue?
    /// The moderation log's settings as given (validated by the log when the bridge starts).
    public var modlog: JSONValue?
    /// Where each field's value came from, by key.
    public var sources: [String: ConfigurationSource]

    public enum Limits {
        /// Longest nickname: Android's UI cap, so the name shows unchanged on every phone.
        public static let maxNicknameLength = 15
        /// Highest PoW target we will mine for (Android users can demand up to 32).
        public static let maxPowBits = 32
        /// Largest config file read.
        public static let maxFileBytes = 1 << 20
    }

    /// Every key the file may contain, with its environment variable.
    public static let fields: [(key: String, environment: String, help: String)] = [
        ("geohash", "BRIDGE_GEOHASH", "geohash channel to serve (required)"),
        ("nickname", "BRIDGE_NICKNAME", "nickname on both sides (default bridge)"),
        ("data_dir", "BRIDGE_DATA_DIR", "data directory (keys, database)"),
        ("relays", "BRIDGE_RELAYS", "operator relay URLs (env: comma-separated)"),
        ("relay_directory", "BRIDGE_RELAY_DIRECTORY", "also use the nearest directory relays (on/off, default on)"),
        ("relay_file", "BRIDGE_RELAY_FILE", "relays.json path"),
        ("mesh", "BRIDGE_MESH", "bluez, bluez:hciN or tcp://HOST:PORT[,tcp://HOST:PORT…] (default bluez)"),
        ("text_mirror", "BRIDGE_TEXT_MIRROR", "plain-text mirror: off, down, up or both (default off)"),
        ("shadow", "BRIDGE_SHADOW", "spam filter shadow mode (default off)"),
        ("gateway", "BRIDGE_GATEWAY", "channel gateway role (default on)"),
        ("rendezvous", "BRIDGE_RENDEZVOUS", "mesh-bridge rendezvous role (default on when geohash ≥ 6 chars)"),
        ("http_listen", "BRIDGE_HTTP_LISTEN", "health/metrics listener host:port or off (default 127.0.0.1:9477)"),
        ("pow_bits", "BRIDGE_POW_BITS", "NIP-13 target for our channel events (default 16)"),
        ("log_level", "BRIDGE_LOG_LEVEL", "trace, debug, info, notice, warning, error (default info)"),
        ("spam", "", "spam filter settings object (file only)"),
        ("modlog", "", "moderation log settings: log_text, retention_days, max_records (file only)"),
    ]

    /// Resolves the configuration from an optional config file's JSON text and the environment.
    public static func resolve(fileText: String?, filePath: String = "config", environment: [String: String])
        throws(ConfigurationError) -> BridgeConfiguration
    {
        var file: [(String, JSONValue)] = []
        if let fileText {
            do {
                guard let object = try JSONParser(limits: .init(maxBytes: Limits.maxFileBytes, maxDepth: 16))
                    .parse(fileText).objectValue
                else { throw ConfigurationError.file(path: filePath, reason: "must be a JSON object") }
                file = object
            } catch let error as ConfigurationError {
                throw error
            } catch {
                throw .file(path: filePath, reason: "not valid JSON (\(error))")
            }
        }
        for (key, _) in file where !fields.contains(where: { $0.key == key }) { throw .unknownField(key) }
        var sources: [String: ConfigurationSource] = [:]

        /// The raw value of `key`: environment text, file JSON, or nil.
        func raw(_ key: String) -> (text: String?, json: JSONValue?) {
            let variable = fields.first { $0.key == key }!.environment
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
        func string(_ key: String) throws(ConfigurationError) -> String? {
            let (text, json) = raw(key)
            if let text { return text }
            guard let json else { return nil }
            guard let s = json.stringValue else { throw .invalid(field: key, value: JSONWriter.compact(json), reason: "must be a string") }
            return s
        }
        func bool(_ key: String, default value: Bool) throws(ConfigurationError) -> Bool {
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

        guard let geohashText = try string("geohash") else { throw .missing(field: "geohash") }
        let geohash: GeohashCell
        do {
            geohash = try GeohashCell(geohashText)
        } catch {
            throw .invalid(field: "geohash", value: geohashText, reason: "must be a lowercase geohash of 1–12 characters")
        }
        let nickname = try string("nickname") ?? "bridge"
        guard !nickname.isEmpty, nickname.count <= Limits.maxNicknameLength, !nickname.contains("#"),
            nickname == nickname.trimmingSpaces
        else {
            throw .invalid(field: "nickname", value: nickname, reason: "must be 1–15 characters, no '#', no edge spaces")
        }
        let dataDirectory = try string("data_dir")

        var relays: [String] = []
        let relayRaw = raw("relays")
        if let text = relayRaw.text {
            relays = text.split(separator: ",").map { $0.trimmingSpaces }.filter { !$0.isEmpty }
        } else if let json = relayRaw.json {
            guard let array = json.arrayValue, array.allSatisfy({ $0.stringValue != nil }) else {
                throw .invalid(field: "relays", value: JSONWriter.compact(json), reason: "must be an array of URL strings")
            }
            relays = array.compactMap(\.stringValue)
        }
        for url in relays where !(url.hasPrefix("ws://") || url.hasPrefix("wss://")) || url.count <= 6 {
            throw .invalid(field: "relays", value: url, reason: "relay URLs start with ws:// or wss://")
        }
        let relayDirectory = try bool("relay_directory", default: true)
        if !relayDirectory && relays.isEmpty {
            throw .invalid(field: "relays", value: "", reason: "with relay_directory off, at least one relay is needed")
        }
        let relayFile = try string("relay_file")
        let mesh = try MeshSetting(parsing: try string("mesh") ?? "bluez")

        let mirrorText = try string("text_mirror") ?? "off"
        let mirror: (Bool, Bool)
        switch mirrorText {
        case "off": mirror = (false, false)
        case "down": mirror = (true, false)
        case "up": mirror = (false, true)
        case "both": mirror = (true, true)
        default: throw .invalid(field: "text_mirror", value: mirrorText, reason: "must be off, down, up or both")
        }
        let shadow = try bool("shadow", default: false)
        let gateway = try bool("gateway", default: true)
        let rendezvous = try bool("rendezvous", default: geohash.precision >= 6)
        if rendezvous && geohash.precision < 6 {
            throw .invalid(field: "rendezvous", value: "on", reason: "needs a geohash of at least 6 characters")
        }
        let listen = try string("http_listen") ?? "127.0.0.1:9477"
        let httpListen: String? = listen == "off" ? nil : listen
        if let httpListen {
            let parts = httpListen.split(separator: ":")
            guard parts.count == 2, let port = Int(parts[1]), (1...65535).contains(port),
                ["127.0.0.1", "localhost", "::1"].contains(String(parts[0]))
            else {
                throw .invalid(field: "http_listen", value: httpListen, reason: "must be a loopback host:port (127.0.0.1:PORT) or off")
            }
        }
        var powBits = 16
        let powRaw = raw("pow_bits")
        if let text = powRaw.text ?? powRaw.json.map({ JSONWriter.compact($0) }) {
            guard let n = Int(text), (0...Limits.maxPowBits).contains(n) else {
                throw .invalid(field: "pow_bits", value: text, reason: "must be a whole number from 0 to 32")
            }
            powBits = n
        }
        let levelText = try string("log_level") ?? "info"
        guard let logLevel = LogLevel(name: levelText) else {
            throw .invalid(field: "log_level", value: levelText, reason: "must be trace, debug, info, notice, warning or error")
        }
        let spam = raw("spam").json
        if let spam, spam.objectValue == nil {
            throw .invalid(field: "spam", value: JSONWriter.compact(spam), reason: "must be an object")
        }
        let modlog = raw("modlog").json
        if let modlog, modlog.objectValue == nil {
            throw .invalid(field: "modlog", value: JSONWriter.compact(modlog), reason: "must be an object")
        }
        return BridgeConfiguration(
            geohash: geohash, nickname: nickname, dataDirectory: dataDirectory, relays: relays,
            relayDirectory: relayDirectory, relayFile: relayFile, mesh: mesh, mirrorDownlink: mirror.0,
            mirrorUplink: mirror.1, shadow: shadow, gateway: gateway, rendezvous: rendezvous, httpListen: httpListen,
            powBits: powBits, logLevel: logLevel, spam: spam, modlog: modlog, sources: sources)
    }

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
            entry("mesh", .string(mesh.description)),
            entry("text_mirror", .string(mirror)),
            entry("shadow", .bool(shadow)),
            entry("gateway", .bool(gateway)),
            entry("rendezvous", .bool(rendezvous)),
            entry("http_listen", .string(httpListen ?? "off")),
            entry("pow_bits", .integer(Int64(powBits))),
            entry("log_level", .string(logLevel.name)),
            entry("spam", spam ?? .object([])),
            entry("modlog", modlog ?? .object([])),
        ])
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...lastIndex(where: { !isSpace($0) })!])
    }
}
