import BotSupport
public import BotCrypto
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Why the console token could not be read or made.
public enum ConsoleTokenError: Error, Equatable, Sendable, CustomStringConvertible {
    case file(path: String, detail: String)
    /// Others may read it: the token is a password.
    case tooOpen(path: String, mode: UInt32)
    /// Not 64 lowercase hex characters (edited by hand, or truncated).
    case malformed(path: String)

    public var description: String {
        switch self {
        case .file(let path, let detail): "console token \(path): \(detail)"
        case .tooOpen(let path, let mode):
            "console token \(path) has mode \(String(mode, radix: 8)); it must be 600 (chmod 600 \(path))"
        case .malformed(let path): "console token \(path) is not 64 hex characters (delete it and run bitchat-bridge console-token)"
        }
    }
}

/// The console's password: 32 random bytes as hex in `<data-dir>/console-token`, mode 0600. Made by
/// `bitchat-bridge console-token`; without it the console takes no action and `run` refuses a listener beyond
/// loopback. Never logged, never put in a page (the browser trades it once for a session cookie).
public enum ConsoleToken {
    public static let fileName = "console-token"

    public enum Limits {
        /// 256 bits: guessing is hopeless even for a listener on the open internet.
        public static let tokenBytes = 32
    }

    public static func path(dataDirectory: String) -> String { FileIO.join(dataDirectory, fileName) }

    /// The token, or nil when the file does not exist.
    public static func load(dataDirectory: String) throws(ConsoleTokenError) -> String? {
        let path = path(dataDirectory: dataDirectory)
        guard FileIO.exists(path) else { return nil }
        let mode: UInt32
        let bytes: [UInt8]
        do {
            mode = try FileIO.permissions(path)
            bytes = try FileIO.read(path, maxBytes: 1024)
        } catch {
            throw .file(path: path, detail: "\(error)")
        }
        guard mode & 0o077 == 0 else { throw .tooOpen(path: path, mode: mode) }
        let text = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
        guard text.utf8.count == Limits.tokenBytes * 2, text.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) else {
            throw .malformed(path: path)
        }
        return text
    }

    /// The token, made first when absent (or replaced when `rotate`); `random` gives `count` random bytes.
    public static func loadOrCreate(
        dataDirectory: String, rotate: Bool = false, random: (Int) -> [UInt8] = SecureRandom.bytes
    ) throws(ConsoleTokenError) -> (token: String, created: Bool) {
        if !rotate, let existing = try load(dataDirectory: dataDirectory) { return (existing, false) }
        let token = Hex.encode(random(Limits.tokenBytes))
        let path = path(dataDirectory: dataDirectory)
        do {
            try FileIO.makeDirectory(dataDirectory)
            try FileIO.writeAtomically(Array((token + "\n").utf8), to: path, mode: 0o600)
        } catch {
            throw .file(path: path, detail: "\(error)")
        }
        return (token, true)
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}

/// A file of the data directory followed while the bridge runs (issue 23 finding 2: the console token; issue 35: the
/// moderators): ``current()`` answers from memory while the file is unchanged (its inode, size and modification time,
/// one `stat`) and reads it again when it changed — made after start, rewritten atomically (`console-token --rotate`,
/// `moderators add`) or removed (then `absent`). A file that no longer reads (too open, malformed) keeps the last good
/// value and reports the error once to `problem`. Only console requests ask, so an idle bridge never looks.
public final class WatchedFile<Value: Sendable>: Sendable {
    private struct Seen: Equatable {
        var inode: UInt64
        var size: Int64
        var modified: Int64
    }

    private let path: String
    private let absent: Value
    private let load: @Sendable () throws -> Value
    private let problem: @Sendable (String) -> Void
    private let state: Mutex<(seen: Seen?, value: Value)>

    /// Starts from `value`, the file as `run` read it at start.
    public init(
        path: String, value: Value, absent: Value, load: @escaping @Sendable () throws -> Value,
        problem: @escaping @Sendable (String) -> Void
    ) {
        self.path = path
        self.absent = absent
        self.load = load
        self.problem = problem
        state = Mutex((Self.identity(path), value))
    }

    /// What the file holds now (`absent`: no file).
    public func current() -> Value {
        let seen = Self.identity(path)
        return state.withLock { (state: inout (seen: Seen?, value: Value)) -> Value in
            guard seen != state.seen else { return state.value }
            state.seen = seen
            guard seen != nil else {
                state.value = absent
                return absent
            }
            do {
                state.value = try load()
            } catch {
                problem("\(error)")
            }
            return state.value
        }
    }

    private static func identity(_ path: String) -> Seen? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Seen(
            inode: UInt64(info.st_ino), size: Int64(info.st_size),
            modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
    }
}

extension WatchedFile where Value == String? {
    /// `<data-dir>/console-token`, starting from `token` as `run` read it.
    public static func consoleToken(dataDirectory: String, token: String?, problem: @escaping @Sendable (String) -> Void) -> WatchedFile<String?> {
        WatchedFile(
            path: ConsoleToken.path(dataDirectory: dataDirectory), value: token, absent: nil,
            load: { try ConsoleToken.load(dataDirectory: dataDirectory) }, problem: problem)
    }
}

extension WatchedFile where Value == Moderators {
    /// `<data-dir>/moderators.json`, read now.
    public static func moderators(dataDirectory: String, problem: @escaping @Sendable (String) -> Void) -> WatchedFile<Moderators> {
        let load: @Sendable () throws -> Moderators = { try Moderators.load(dataDirectory: dataDirectory) }
        let initial: Moderators
        do {
            initial = try load()
        } catch {
            problem("\(error)")
            initial = Moderators()
        }
        return WatchedFile(path: Moderators.path(dataDirectory: dataDirectory), value: initial, absent: Moderators(), load: load, problem: problem)
    }
}
