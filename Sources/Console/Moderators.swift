import BotSupport
public import BotCrypto

/// A name for every moderator (issue 35): each person gets a console token of their own in
/// `<data-dir>/moderators.json` (mode 0600, like `console-token`), made by `bitchat-bridge moderators add NAME`. The
/// console says who signed in, every audit row names the person, and `moderators remove NAME` ends only that person's
/// sessions. The operator's `console-token` stays, as the moderator `operator`.
public struct Moderators: Sendable, Equatable {
    public static let fileName = "moderators.json"
    /// The name the operator's `console-token` signs in as.
    public static let operatorName = "operator"

    public enum Limits {
        /// Names are short words people read in the audit: letters, digits, `.`, `_`, `-`.
        public static let maxNameLength = 32
        /// Moderators one bridge keeps (a festival's crew, many times over).
        public static let maxModerators = 200
    }

    public struct Moderator: Sendable, Equatable {
        public let name: String
        public let token: String
        /// When it was added (Unix seconds).
        public let added: Double
    }

    public private(set) var list: [Moderator] = []

    public init(_ list: [Moderator] = []) { self.list = list }

    public static func path(dataDirectory: String) -> String { FileIO.join(dataDirectory, fileName) }

    /// Name → token, for ``ConsoleAccess``.
    public var tokens: [String: String] { Dictionary(list.map { ($0.name, $0.token) }, uniquingKeysWith: { $1 }) }

    /// Whether `name` may be a moderator's name.
    public static func validate(_ name: String) throws(ModeratorsError) {
        guard !name.isEmpty, name.count <= Limits.maxNameLength, name != operatorName,
            name.unicodeScalars.allSatisfy({ ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || ".-_".unicodeScalars.contains($0) })
        else { throw .badName(name) }
    }

    /// Adds `name` with a new token (32 random bytes as hex); returns the token.
    public mutating func add(_ name: String, now: Double, random: (Int) -> [UInt8] = SecureRandom.bytes) throws(ModeratorsError) -> String {
        try Self.validate(name)
        guard !list.contains(where: { $0.name == name }) else { throw .exists(name) }
        guard list.count < Limits.maxModerators else { throw .full }
        let token = Hex.encode(random(ConsoleToken.Limits.tokenBytes))
        list.append(Moderator(name: name, token: token, added: now))
        return token
    }

    /// Removes `name`; whether it was there.
    public mutating func remove(_ name: String) -> Bool {
        let before = list.count
        list.removeAll { $0.name == name }
        return list.count != before
    }

    // MARK: The file

    /// The moderators in `dataDirectory` (none when the file does not exist).
    public static func load(dataDirectory: String) throws(ModeratorsError) -> Moderators {
        let path = path(dataDirectory: dataDirectory)
        guard FileIO.exists(path) else { return Moderators() }
        let bytes: [UInt8]
        do {
            guard try FileIO.permissions(path) & 0o077 == 0 else { throw ModeratorsError.tooOpen(path) }
            bytes = try FileIO.read(path, maxBytes: 1 << 20)
        } catch let error as ModeratorsError {
            throw error
        } catch {
            throw .file(path: path, detail: "\(error)")
        }
        guard let json = try? JSONParser().parse(String(decoding: bytes, as: UTF8.self)), let rows = json["moderators"]?.arrayValue else {
            throw .malformed(path)
        }
        var list: [Moderator] = []
        for row in rows {
            guard let name = row["name"]?.stringValue, let token = row["token"]?.stringValue, token.utf8.count == 64 else {
                throw .malformed(path)
            }
            list.append(Moderator(name: name, token: token, added: row["added"]?.numberValue ?? 0))
        }
        return Moderators(list)
    }

    /// Writes the file atomically, mode 0600.
    public func save(dataDirectory: String) throws(ModeratorsError) {
        let path = Self.path(dataDirectory: dataDirectory)
        let json = JSONValue.object([("moderators", .array(list.map { m in
            .object([("name", .string(m.name)), ("token", .string(m.token)), ("added", .double(m.added))])
        }))])
        do {
            try FileIO.makeDirectory(dataDirectory)
            try FileIO.writeAtomically(Array((JSONWriter.pretty(json) + "\n").utf8), to: path, mode: 0o600)
        } catch {
            throw .file(path: path, detail: "\(error)")
        }
    }
}

public enum ModeratorsError: Error, Equatable, Sendable, CustomStringConvertible {
    case badName(String)
    case exists(String)
    case full
    case tooOpen(String)
    case malformed(String)
    case file(path: String, detail: String)

    public var description: String {
        switch self {
        case .badName(let name):
            "'\(name)' cannot be a moderator's name: 1–\(Moderators.Limits.maxNameLength) letters, digits, '.', '_' or '-', "
                + "and not '\(Moderators.operatorName)' (the console-token's)"
        case .exists(let name): "a moderator named '\(name)' exists already (moderators remove \(name) first)"
        case .full: "\(Moderators.Limits.maxModerators) moderators already"
        case .tooOpen(let path): "\(path) can be read by others; it holds passwords (chmod 600 \(path))"
        case .malformed(let path): "\(path) is not a moderators file (edit it with bitchat-bridge moderators)"
        case .file(let path, let detail): "\(path): \(detail)"
        }
    }
}
