import BitchatWire
import BlueZ
import BotCrypto
import BotStorage
import BotSupport
import Bridge
import Geohash
import IdentityCache
import Mesh
import ModerationLog
import Nostr
import NostrRelay
import RelayDirectory
import SpamFilter
import VirtualRadio
import Synchronization
import WebSocketRuntime

#if canImport(Glibc)
import Glibc
#endif

/// `bitchat-bridge run`: the bridge itself.
enum RunCommand {
    static let spec = CommandSpec(
        path: "run",
        summary: "Run the bridge: carry public chat between the geohash channel on Nostr and the bitchat mesh.",
        usage: ["[--config FILE] [--print-config]"],
        options: [
            .value("--config", "FILE", "JSON configuration file (every field optional but geohash; env overrides)."),
            .flag("--print-config", "Print the effective configuration with each value's source, then exit."),
        ],
        details: "Configuration fields and their environment variables:\n"
            + BridgeConfiguration.fields.map { "  \($0.key.padding(toLength: 16)) \($0.environment.padding(toLength: 24)) \($0.help)" }
            .joined(separator: "\n")
    )

    static func run(_ arguments: [String]) throws(CommandExit) {
        let args = try ParsedArguments.parse(arguments, spec: spec)
        _ = try args.requirePositionals([])
        let config = try loadConfiguration(path: args.value("--config"))
        if args.has("--print-config") {
            printJSON(config.described)
            return
        }
        let logger = Logger(label: "bridge", level: config.logLevel)
        let bridge = try BridgeRuntime.start(config: config, logger: logger, configPath: args.value("--config"))
        let code = try runBlocking { () async throws(CommandExit) -> Int32 in
            await bridge.runUntilStopped()
        }
        guard code == 0 else { throw .failure("bridge stopped after an error (see the log)") }
    }

    static func loadConfiguration(path: String?) throws(CommandExit) -> BridgeConfiguration {
        var text: String?
        if let path {
            do {
                text = String(decoding: try FileIO.read(path, maxBytes: BridgeConfiguration.Limits.maxFileBytes), as: UTF8.self)
            } catch {
                throw .usage("configuration file \(path): \(error)")
            }
        }
        do {
            return try BridgeConfiguration.resolve(
                fileText: text, filePath: path ?? "config", environment: ProcessEnvironment.variables(withPrefix: "BRIDGE_"))
        } catch {
            throw .usage(error.description)
        }
    }
}

/// Everything a running bridge holds, wired from the configuration.
struct BridgeRuntime: Sendable {
    let pool: RelayPool
    let node: MeshNode
    let transport: any MeshTransport
    let coordinator: BridgeCoordinator
    let logger: Logger
    let status: StatusBoard
    let server: LoopbackHTTPServer?
    let startedAt: ContinuousClock.Instant
    /// `<data-dir>/policy.json`, read again on SIGHUP.
    let policyPath: String
    let databasePath: String
    /// The `--config` file, read again (with the `BRIDGE_*` environment) for the relay list on SIGHUP.
    let configPath: String?

    enum Limits {
        /// How long the signed leave may take to reach the mesh before the link closes (one radio frame
        /// round; the 5 s stop budget of the operations issue has room for it).
        static let leaveGrace: Duration = .milliseconds(200)
        /// Operations issue: SIGTERM/SIGINT stop within 5 s. Past this the process logs and exits 1 rather
        /// than hang under a supervisor that would SIGKILL it mid-write.
        static let stopDeadline: Duration = .seconds(5)
    }

    static func start(config: BridgeConfiguration, logger: Logger, configPath: String?) throws(CommandExit) -> BridgeRuntime {
        let dataDirectory = Paths.dataDirectory(option: config.dataDirectory)
        let keys: BridgeKeys
        do {
            keys = try KeyStore(dataDirectory: dataDirectory).loadOrCreate().keys
        } catch {
            throw .failure(error.description)
        }
        let databasePath = FileIO.join(dataDirectory, "bridge.sqlite3")
        let policyPath = FileIO.join(dataDirectory, "policy.json")
        let recent: RecentEventStore
        let identities: PeerIdentityCache
        let uplinkStore: UplinkStore
        do {
            recent = try RecentEventStore(database: SQLiteDatabase(path: databasePath))
            uplinkStore = try UplinkStore(database: SQLiteDatabase(path: databasePath))
            identities = PeerIdentityCache(
                store: try SQLiteIdentityStore(database: SQLiteDatabase(path: databasePath)), logger: logger.child("identities"))
        } catch {
            throw .failure("database \(databasePath): \(error)")
        }
        do {
            identities.setOperatorLists(try OperatorLists.load(path: policyPath))
        } catch {
            // Fail closed: retention passes wait until the policy can be read.
            logger.error("policy file unreadable; retention passes are held", [("error", .string(error.description))])
        }

        let channelKey: SchnorrSecretKey?
        let rendezvousKey: SchnorrSecretKey?
        do {
            channelKey = config.gateway ? try keys.channelKey(geohash: config.geohash.string) : nil
            rendezvousKey = try config.rendezvousCell.map { try keys.rendezvousKey(cell: $0.string) }
        } catch {
            throw .failure("cannot derive Nostr keys: \(error)")
        }
        let relayURLs = try relayURLs(config)
        let pool: RelayPool
        do {
            pool = try RelayPool(
                relayURLs: relayURLs, configuration: .init(authKey: nil, jitterUnit: { Double.random(in: 0..<1) }),
                webSocket: .init(caFile: nil, userAgent: "bitchat-bridge/\(BridgeCommandLine.version)"),
                logger: logger.child("relays"), unixNow: { Int64(WallClock.nowSeconds()) })
        } catch {
            throw .failure("relays: \(error)")
        }

        let transport: any MeshTransport
        switch config.mesh {
        case .tcp(let host, let port):
            do {
                transport = try RadioClientTransport.connect([RadioClientTransport.Endpoint(url: "tcp://\(host):\(port)")])
            } catch {
                throw .failure("cannot join the mesh at tcp://\(host):\(port): \(error)")
            }
        case .tcpSegments(let urls):
            do {
                transport = try RadioClientTransport.connect(try urls.map { try RadioClientTransport.Endpoint(url: $0) })
            } catch {
                throw .failure("cannot join the mesh at \(urls.joined(separator: ",")): \(error)")
            }
        case .bluez(let adapter):
            do {
                transport = try BlueZTransport.start(options: .init(adapter: adapter), logger: logger.child("bluez"))
            } catch {
                throw .failure(error.description)
            }
        }
        var capabilities = PeerCapabilities()
        if config.gateway { capabilities.insert(.gateway) }
        if config.rendezvous { capabilities.insert(.bridge) }
        let identity = MeshIdentity(
            noisePublicKey: keys.noiseKey.publicKey, signingKey: keys.signingKey, nickname: config.nickname,
            capabilities: capabilities, bridgeGeohash: config.rendezvousCell?.string)
        // The bridge relays a public message only once its judgement passed it (SPAM-FILTER §1).
        var meshConfiguration = MeshPeerEngine.Configuration()
        meshConfiguration.gatePublicRelays = true
        let node = MeshNode(
            engine: MeshPeerEngine(identity: identity, configuration: meshConfiguration), transport: transport, wallClock: { WallClock.nowMs() },
            seed: SecureRandom.bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })

        let remembered: (published: [EventID], rebroadcast: [EventID])
        do {
            let limit = RecentEventStore.Limits.maxRows
            remembered = (
                try recent.load(.published, limit: limit).compactMap(EventID.init(bytes:)),
                try recent.load(.rebroadcast, limit: limit).compactMap(EventID.init(bytes:))
            )
        } catch {
            throw .failure("database \(databasePath): \(error)")
        }
        let router = BridgeRouter(
            settings: .init(
                channel: config.gateway ? config.geohash : nil, rendezvousCell: config.rendezvous ? config.rendezvousCell : nil,
                mirrorDownlink: config.mirrorDownlink, mirrorUplink: config.mirrorUplink),
            ownKeys: Set([channelKey?.publicKey, rendezvousKey?.publicKey].compactMap { $0 }), rendezvousKey: rendezvousKey,
            remembered: remembered, channelKey: channelKey,
            presenceSeed: SecureRandom.bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        let spamConfig: SpamFilterConfig
        let modlogConfig: ModerationLogConfig
        do {
            spamConfig = try config.spam.map { try SpamFilterConfig(json: $0) } ?? SpamFilterConfig()
            modlogConfig = try config.modlog.map { try ModerationLogConfig(json: $0) } ?? ModerationLogConfig()
        } catch {
            throw .usage("configuration: \(error)")
        }
        var policy = AdmissionPolicy(
            config: spamConfig, exemptSenders: Set([channelKey?.publicKey.hex, rendezvousKey?.publicKey.hex].compactMap { $0 }))
        if config.shadow { policy.setShadowMode(true) }
        let moderationLog: ModerationLog
        do {
            moderationLog = try ModerationLog(path: databasePath, config: modlogConfig, logger: logger.child("modlog"))
        } catch {
            throw .failure("moderation log \(databasePath): \(error)")
        }
        let judgement = ModerationJudgement(
            identities: identities, policy: policy, moderationLog: moderationLog, channel: config.geohash.string,
            logText: modlogConfig.logText, logger: logger.child("judgement"))
        let coordinator = BridgeCoordinator(
            router: router, mesh: node, relays: PoolClient(pool: pool), recent: recent, identities: identities,
            judgement: judgement, keys: keys, powBits: config.powBits, logger: logger,
            dependencies: .init(unixNow: { WallClock.nowSeconds() }, unitRandom: { Double.random(in: 0..<1) }),
            uplinkStore: uplinkStore)

        let now = Int64(WallClock.nowSeconds())
        if config.gateway {
            pool.subscribe(id: "geo-\(config.geohash.string)", filters: [.geohashChannel(config.geohash.string, now: now)], lookback: 3600)
        }
        if let cell = config.rendezvousCell, config.rendezvous {
            pool.subscribe(id: "bridge-rendezvous", filters: [.rendezvous(cells: cell.ring.map(\.string), now: now)], lookback: 900)
        }
        logger.notice("bridge starting", [
            ("bridge.geohash", .string(config.geohash.string)), ("mesh.peer", .string(identity.peerID.hex)),
            ("mesh.transport", .string(config.mesh.description)), ("relays", .array(relayURLs.map(JSONValue.string))),
            ("role.gateway", .bool(config.gateway)), ("role.rendezvous", .bool(config.rendezvous)),
            ("mirror.down", .bool(config.mirrorDownlink)), ("mirror.up", .bool(config.mirrorUplink)),
            ("channel.npub", channelKey.map { .string(NIP19.npub($0.publicKey)) } ?? .null),
        ])
        let status = StatusBoard(maxAge: .seconds(30), now: { .now })
        var server: LoopbackHTTPServer?
        if let listen = config.httpListen {
            do {
                let (host, port) = try LoopbackHTTPServer.parseListen(listen)
                let http = LoopbackHTTPServer(host: host, port: port) { method, path in status.response(method: method, path: path) }
                try http.start()
                server = http
            } catch {
                throw .failure("health/metrics listener \(listen): \(error)")
            }
        }
        return BridgeRuntime(
            pool: pool, node: node, transport: transport, coordinator: coordinator, logger: logger, status: status,
            server: server, startedAt: .now, policyPath: policyPath, databasePath: databasePath, configPath: configPath)
    }

    /// Operator relays plus, with the directory on, the 5 nearest to the channel and to each cell of the
    /// rendezvous ring (phones publish to their own cell's relays and subscribe on the ring), deduplicated.
    static func relayURLs(_ config: BridgeConfiguration) throws(CommandExit) -> [String] {
        var urls = config.relays
        if config.relayDirectory {
            let (directory, _) = try RelaysCommand.loadDirectory(option: config.relayFile)
            var places: [GeohashCell] = config.gateway ? [config.geohash] : []
            if config.rendezvous, let cell = config.rendezvousCell { places += cell.ring }
            for place in places {
                for selection in directory.closest(to: place, count: 5) where !urls.contains(selection.entry.url) {
                    urls.append(selection.entry.url)
                }
            }
        }
        return urls
    }

    /// Runs until SIGINT/SIGTERM: then stops intake, flushes the pending uplinks to the queue store
    /// (``BridgeCoordinator/flushUplinks()``), sends a signed leave, closes the relays and the mesh
    /// link, and checkpoints the database (the WAL folded into the main file and truncated), all within
    /// ``Limits/stopDeadline``. SIGHUP reloads the operator's policy lists (`policy.json`) and the relay list
    /// (``reloadRelays()``); every other setting needs a restart (documented in the README).
    func runUntilStopped() async -> Int32 {
        let (inputs, continuation) = AsyncStream.makeStream(of: BridgeRelayInput.self, bufferingPolicy: .bufferingNewest(1024))
        let stopped = AsyncStream.makeStream(of: Void.self)
        let stopWatch = StopWatch()
        let signals = SignalHandler(ProcessSignal.termination) { [logger] signal in
            logger.notice("stopping", [("signal", .string(signal.name))])
            stopWatch.begin(deadline: Limits.stopDeadline, logger: logger)
            stopped.continuation.finish()
        }
        defer { signals.cancel() }
        let hangups = SignalHandler([.hangup]) { [coordinator, policyPath, logger] _ in
            logger.notice("reloading the policy and the relay list", [("signal", .string("SIGHUP")), ("policy.path", .string(policyPath))])
            let result = Result { () throws(OperatorLists.LoadError) -> OperatorLists in try OperatorLists.load(path: policyPath) }
            Task { await coordinator.reloadPolicy(result) }
            reloadRelays()
        }
        defer { hangups.cancel() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await pool.run() }
            group.addTask { await node.run() }
            group.addTask { [pool] in
                for await event in pool.events {
                    switch event {
                    case .event(let e, _, _): continuation.yield(.event(e))
                    case .connected, .disconnected: continuation.yield(.connectedRelays(pool.connectedCount))
                    case .ok(_, let id, true, _):
                        if let id = try? EventID(hex: id) { continuation.yield(.accepted(id)) }
                    default: break
                    }
                }
                continuation.finish()
            }
            group.addTask { await coordinator.run(relayInputs: inputs) }
            group.addTask {
                for await _ in stopped.stream {}
            }
            group.addTask { await publishStatus() }
            // The first task to end (normally the stop signal) stops the rest.
            await group.next()
            // Stop intake, then flush the uplinks still held to the queue store before the relays close.
            continuation.finish()
            await coordinator.flushUplinks()
            await node.submit(.sendLeave)
            try? await Task.sleep(for: Limits.leaveGrace)
            transport.close()
            group.cancelAll()
        }
        server?.stop()
        checkpointDatabase()
        logger.notice("stopped", [("stop.ms", .integer(stopWatch.elapsedMilliseconds ?? 0))])
        return 0
    }

    /// SIGHUP: the relay list read again — the configuration file's `relays` and `BRIDGE_RELAYS` (which,
    /// as at start, overrides the file), plus the directory's nearest relays when `relay_directory` is on —
    /// and applied to the running pool (``RelayPool/setRelays(_:)``): added relays connect and get the
    /// subscriptions, removed ones are closed, the others keep their connections. A configuration that no
    /// longer reads (bad JSON, a bad URL, no relay left) keeps the current relays and logs one error; the
    /// next good reload applies. Only the relay list is taken from the new file: the other settings still
    /// need a restart (the reload logs none of them as changed).
    func reloadRelays() {
        let urls: [String]
        do {
            let config = try RunCommand.loadConfiguration(path: configPath)
            urls = try Self.relayURLs(config)
        } catch {
            let message: String
            switch error {
            case .usage(let text), .failure(let text): message = text
            case .clean: message = "no configuration"
            }
            logger.error("relay list reload failed; the current relays stay", [
                ("config.path", configPath.map(JSONValue.string) ?? .null), ("error", .string(message)),
            ])
            return
        }
        do {
            let change = try pool.setRelays(urls)
            logger.notice(change.isEmpty ? "relays reloaded; no change" : "relays reloaded", [
                ("relays.added", .array(change.added.map(JSONValue.string))),
                ("relays.removed", .array(change.removed.map(JSONValue.string))),
                ("relays", .array(pool.relayURLs.map(JSONValue.string))),
            ])
        } catch {
            logger.error("relay list reload failed; the current relays stay", [("error", .string("\(error)"))])
        }
    }

    /// Folds the WAL into the database file and truncates it, so the file alone is complete and a copy or a
    /// backup taken after the stop needs nothing else. Failure (disk full) is logged; SQLite's WAL keeps the
    /// data either way.
    func checkpointDatabase() {
        do {
            let database = try SQLiteDatabase(path: databasePath)
            try database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            database.close()
        } catch {
            logger.error("database checkpoint at stop failed (the WAL keeps the data)", [("error", .string(error.description))])
        }
    }
}

/// Times the graceful stop and enforces its deadline from a thread of its own (the cooperative pool may be
/// the thing that hangs).
final class StopWatch: Sendable {
    private let started = Mutex<ContinuousClock.Instant?>(nil)

    func begin(deadline: Duration, logger: Logger) {
        let first = started.withLock { started -> Bool in
            guard started == nil else { return false }
            started = .now
            return true
        }
        guard first else { return }
        _ = OwnerThread.detach {
            let (seconds, attoseconds) = deadline.components
            var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            var remaining = timespec()
            while nanosleep(&request, &remaining) != 0 { request = remaining }
            logger.error("graceful stop exceeded its deadline; exiting", [("deadline.ms", .integer(seconds * 1000))])
            exit(1)
        }
    }

    var elapsedMilliseconds: Int64? {
        started.withLock { started in
            started.map { let c = (ContinuousClock.now - $0).components; return c.seconds * 1000 + c.attoseconds / 1_000_000_000_000_000 }
        }
    }
}

extension BridgeRuntime {
    /// Publishes health and metrics for the loopback listener every 5 s until cancelled.
    func publishStatus() async {
        let health = BridgeHealth(startedAt: startedAt)
        while !Task.isCancelled {
            var metrics = await coordinator.metrics()
            let urls = pool.relayURLs
            for url in urls {
                let stats = pool.stats(url)
                metrics.relayReconnects[url] = max(0, (stats?.connects ?? 0) - 1)
                metrics.relayStates[url] = pool.state(url)?.name ?? "closed"
            }
            let verifier = pool.verifierCounters
            metrics.eventsVerified = verifier.verified
            metrics.eventsRejected = [
                "id_mismatch": verifier.idMismatch, "bad_signature": verifier.badSignature, "over_budget": verifier.overBudget,
                "invalid_pubkey": verifier.invalidPublicKey, "missing_id_or_signature": verifier.missingIDOrSignature,
            ]
            let links = await node.linkCount
            metrics.meshLinks = links
            let gatePrefix = "relay.gate."
            for (name, count) in await node.counters where name.hasPrefix(gatePrefix) {
                metrics.meshRelayGate[String(name.dropFirst(gatePrefix.count))] = count
            }
            metrics.uptimeSeconds = Double((ContinuousClock.now - startedAt).components.seconds)
            let report = health.evaluate(
                // The mesh node runs until its transport ends, and then the whole bridge stops (the task
                // group ends at its first finished task): while this loop runs, the transport is up.
                .init(connectedRelays: pool.connectedCount, configuredRelays: urls.count, meshUp: true,
                      meshDetail: "mesh transport open, \(links) link(s)"),
                now: .now)
            status.publish(health: report, metrics: metrics.snapshot())
            try? await Task.sleep(for: .seconds(5))
        }
    }
}

/// The live relay pool as the coordinator's publishing side.
struct PoolClient: BridgeRelayClient {
    let pool: RelayPool

    func publish(_ event: NostrEvent) { pool.publish(event) }
}
