public import BitchatWire
public import BotCrypto
public import BotSupport
public import Bridge
public import BridgeApp
public import BridgeCore
import BotStorage
public import Identity
public import IdentityCache
import Mesh
import MeshRuntime
public import Moderation
import ModerationLog
import Nostr
import Synchronization

/// A bridge of the in-process world, built and run as `bitchat-bridge run` builds and runs one
/// (``BridgeRuntime/start(config:logger:configPath:host:)``, ``BridgeRuntime/launch()``), on the site's clock and
/// segments. What it did is kept for the test: every verdict and crossing (``activity``), every log line (``log``).
public final class TestBridge: @unchecked Sendable {
    public let name: String
    public let environment: [String: String]
    public let activity = Recorder<BridgeActivity>()
    public let log = RecordingLogSink()
    let segments: [Segment]
    let relays: [LoopbackRelay]
    let site: Site
    private let state = Mutex<(runtime: BridgeRuntime?, running: RunningBridge?, transport: SegmentTransport?)>((nil, nil, nil))
    /// The log's length when the bridge last started: what this run logged comes after it.
    private let started = Mutex(0)

    init(name: String, environment: [String: String], segments: [Segment], relays: [LoopbackRelay], site: Site) throws {
        self.name = name
        self.environment = environment
        self.segments = segments
        self.relays = relays
        self.site = site
    }

    public var dataDirectory: String { environment["BRIDGE_DATA_DIR"] ?? "" }

    /// The running bridge's parts (it must be running).
    public var runtime: BridgeRuntime { state.withLock { $0.runtime }! }
    public var coordinator: BridgeCoordinator { runtime.coordinator }
    public var peerID: MeshPeerID { get async { await runtime.node.identity.peerID } }
    /// The running bridge's radio: its links to the segments.
    public var transport: SegmentTransport { state.withLock { $0.transport }! }

    /// Builds and launches the bridge; returns once every relay has its subscriptions.
    func start() async throws {
        started.withLock { $0 = log.lines.all.count }
        let config = try BridgeConfiguration.resolve(fileText: nil, filePath: "config", environment: environment)
        let transport = SegmentTransport(segments)
        let host = BridgeHost(
            time: site.time, transport: transport, seed: site.nextSeed(),
            observer: { [activity] item in activity.append(item) })
        let runtime: BridgeRuntime
        do {
            runtime = try BridgeRuntime.start(config: config, logger: Logger(label: name, level: .debug, sink: log), configPath: nil, host: host)
        } catch {
            throw WorldError.start(name, "\(error)")
        }
        let before = relays.map { $0.subscriptions.all.count }
        let running = runtime.launch()
        state.withLock { $0 = (runtime, running, transport) }
        for (relay, count) in zip(relays, before) where await relay.subscription(after: count, within: 30) == nil {
            throw WorldError.start(name, "\(relay.url) never got a subscription")
        }
    }

    /// Stops the bridge as a SIGTERM does (intake stops, held uplinks go to the store, the leave goes out, the
    /// database is checkpointed).
    public func stop() async {
        let running = state.withLock { state in
            defer { state.running = nil }
            return state.running
        }
        await running?.stop()
    }

    /// Stops the bridge gracefully and starts it again on the same data directory.
    public func restart() async throws {
        await stop()
        try await start()
    }

    public func snapshot() async -> BridgeCoordinator.Snapshot { await coordinator.snapshot() }

    /// The bridge's keys, from its key file.
    public func keys() throws -> BridgeKeys { try KeyStore(dataDirectory: dataDirectory).loadOrCreate().keys }

    /// The Nostr key the bridge signs `geohash`'s channel events with (presence, board copies).
    public func channelKey(geohash: String = "u4pruy") throws -> SchnorrSecretKey { try keys().channelKey(geohash: geohash) }

    /// The bridge's moderation log, newest first, read from its database as `bitchat-bridge modlog` reads it.
    public func moderationLog() throws -> [ModerationRecord] {
        let database = try SQLiteDatabase(path: "\(dataDirectory)/bridge.sqlite3")
        defer { database.close() }
        return try ModerationLog(database: database, config: ModerationLogConfig(), logger: nil).records(ModerationQuery(limit: 10_000))
    }

    /// `/metrics` as a scrape reads it: the runtime's page, parsed by the project's Prometheus parser (a malformed
    /// page fails the test).
    public func metrics() async throws -> MetricsSnapshot { try PrometheusText.parse(await runtime.metricsText()) }

    /// Marks `key` allowed (staff) as `bitchat-bridge identities allow` does on a running bridge: the row in its
    /// database, then the bridge told on its control socket; returns once the bridge has read the marks again.
    public func allow(_ key: IdentityKey) async throws {
        let before = log.lines.all.count
        do {
            let cache = PeerIdentityCache(
                store: try SQLiteIdentityStore(path: "\(dataDirectory)/bridge.sqlite3"), logger: Logger(label: "identities", level: .warning))
            _ = try cache.annotate(key) { annotations in
                annotations.allowed = true
                annotations.blocked = false
            }
        }
        _ = await offPool { [dataDirectory] in ControlSocket.notifyStoresChanged(dataDirectory: dataDirectory) }
        guard await log.lines.first(after: before, where: { $0.message == "block list loaded" }) != nil else {
            throw WorldError.start(name, "never read the marks again after identities allow \(key.qualified)")
        }
    }

    /// The bridge's stranger-cache record of `key`, read from its database as `bitchat-bridge identities` reads it.
    public func identity(_ key: IdentityKey) throws -> IdentityRecord? {
        let database = try SQLiteDatabase(path: "\(dataDirectory)/bridge.sqlite3")
        defer { database.close() }
        return try SQLiteIdentityStore(database: database).record(key)
    }

    /// Waits until the bridge has written `count` rows to its moderation log (each write logs `spam hidden`, or in
    /// shadow mode `spam would be hidden (shadow mode)`).
    @discardableResult
    public func moderationLog(count: Int, within seconds: Double = 20) async throws -> [ModerationRecord] {
        _ = await log.lines.count(count, within: seconds) { $0.message.hasPrefix("spam ") && $0.jsonLine.contains("modlog.id") }
        return try moderationLog()
    }

    /// Waits for the verdict the bridge gave `messageID` (the event id hex, or the mesh stable ID).
    @discardableResult
    public func verdict(on messageID: String, within seconds: Double = 20) async -> BridgeActivity? {
        await activity.first(within: seconds) { item in
            item.messageID == messageID && [.passed, .hidden, .wouldHide].contains(item.kind)
        }
    }

    /// Whether the bridge, since it last started, verified `phone`'s announce (at once if it did already): wait on it
    /// before advancing to a round that needs the bridge to know the phone (sync answers only direct peers it verified).
    public func knows(_ phone: MeshPeerID, within seconds: Double = 20) async -> Bool {
        await log.lines.first(after: started.withLock { $0 }, within: seconds) {
            $0.message == "peer verified" && $0.jsonLine.contains("\"\(phone.hex)\"")
        } != nil
    }

    /// Waits for a log line `message`.
    @discardableResult
    public func logLine(_ message: String, within seconds: Double = 20, where match: @escaping @Sendable (LogRecord) -> Bool = { _ in true }) async -> LogRecord? {
        await log.lines.first(within: seconds) { $0.message == message && match($0) }
    }
}

public enum WorldError: Error, CustomStringConvertible {
    case start(String, String)

    public var description: String {
        switch self {
        case .start(let name, let detail): "bridge \(name) did not start: \(detail)"
        }
    }
}

extension MetricsSnapshot {
    /// The sum of `family`'s samples whose labels match (all of them by default; 0 when it has none): a plain
    /// counter or gauge, or a labelled family added up.
    public func total(_ family: String, where match: ([String: String]) -> Bool = { _ in true }) -> Double {
        (self.family(family)?.samples ?? [])
            .filter { sample in match(Dictionary(sample.labels.map { ($0.name, $0.value) }, uniquingKeysWith: { $1 })) }
            .reduce(0) { $0 + $1.value }
    }
}
