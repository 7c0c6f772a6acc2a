import BitchatWire
import BlueZ
import BotCrypto
import BotStorage
public import BotSupport
public import Bridge
import Console
import Geohash
import IdentityCache
import Mesh
import MeshRuntime
import MeshSync
import MeshSyncStorage
import ModerationLog
import Nostr
import NostrRelay
import RelayDirectory
import SpamFilter
import Synchronization
import VirtualRadio
import WebSocketRuntime

#if canImport(Glibc)
import Glibc
import Identity
import BridgeCore
#endif

/// Everything a running bridge holds, wired from the configuration.
///
/// One SQLite connection serves every store of `bridge.sqlite3` (event ids, pending uplinks, the stranger
/// cache, the moderation log, the external-change probe, the console's audit table and its reads and edits):
/// all of them are used only from the coordinator's actor (the console's through ``CoordinatorConsoleStores``),
/// and the stop's checkpoint runs on the same connection after every service has finished. (Several
/// connections in one process also shared POSIX locks in ways that made a stop's checkpoint fail now and
/// then; see ``SQLiteDatabase``.)
public struct BridgeRuntime: Sendable {
    let pool: RelayPool
    let node: MeshNode
    let transport: any MeshTransport
    let coordinator: BridgeCoordinator
    let intake: RelayIntake
    let logger: Logger
    let status: StatusBoard
    /// The listener thread's waits for the coordinator (`/healthz`, `/metrics`); stopped with the listener.
    let statusWaits: AwaitedTasks
    let metricsSource: MetricsSource
    let server: LoopbackHTTPServer?
    /// The console on the listener (nil without one); stopped with it.
    let console: ConsoleService?
    let consoleStores: CoordinatorConsoleStores?
    /// `<data-dir>/policy.json`, read again on SIGHUP.
    let policyPath: String
    nonisolated(unsafe) let database: SQLiteDatabase
    /// The `--config` file, read again (with the `BRIDGE_*` environment) for the relay list on SIGHUP.
    let configPath: String?
    /// `<data-dir>/control.sock`, the local control socket (``ControlSocket``).
    let controlPath: String
    /// The console's per-minute charts, fed by the status loop (``publishStatus()``).
    let charts: ConsoleCharts

    enum Limits {
        /// How long the mesh node's flush at stop may take to hand the signed leave (and any jittered transmit
        /// still waiting) to the transport before the link closes (one radio frame round; the 5 s stop budget
        /// of the operations issue has room for it). What still waits then is dropped and counted.
        static let leaveGraceMs: UInt64 = 200
        /// Operations issue: SIGTERM/SIGINT stop within 5 s. Past this the process logs and exits 1 rather
        /// than hang under a supervisor that would SIGKILL it mid-write.
        static let stopDeadline: Duration = .seconds(5)
        /// Each service's own share of the stop (the sum stays inside ``stopDeadline``).
        static let serviceStop: Duration = .seconds(1)
        /// How long `/healthz` and `/metrics` wait for the coordinator before answering that it did not answer.
        static let statusTimeout: Duration = .seconds(2)
        /// How often the console's charts are sampled (their buckets are minutes).
        static let chartSample: Duration = .seconds(15)
    }

    public static func start(config: BridgeConfiguration, logger: Logger, configPath: String?) throws(CommandExit) -> BridgeRuntime {
        let dataDirectory = Paths.dataDirectory(option: config.dataDirectory)
        let keys = try DataFiles.loadKeys(KeyStore(dataDirectory: dataDirectory)) { logger.notice($0) }.keys
        let databasePath = FileIO.join(dataDirectory, "bridge.sqlite3")
        let consoleToken = try checkConsoleToken(config: config, dataDirectory: dataDirectory)
        let fleet = try Self.fleetSettings(config, dataDirectory: dataDirectory)
        let policyPath = FileIO.join(dataDirectory, "policy.json")
        let spamConfig: SpamFilterConfig
        let modlogConfig: ModerationLogConfig
        do {
            spamConfig = try config.spam.map { try SpamFilterConfig(json: $0) } ?? SpamFilterConfig()
            modlogConfig = try config.modlog.map { try ModerationLogConfig(json: $0) } ?? ModerationLogConfig()
        } catch {
            throw .usage("configuration: \(error)")
        }
        let database: SQLiteDatabase
        let recent: RecentEventStore
        let identities: PeerIdentityCache
        let uplinkStore: UplinkStore
        let moderationLog: ModerationLog
        let syncJournal: SQLiteSyncJournal
        let boardLedger: BoardNostrLedger
        do {
            database = try SQLiteDatabase(path: databasePath)
            // Gossip sync and board stores (issue 17): restored as of now, so after a kill -9 the bridge still
            // answers sync with what it held.
            syncJournal = try SQLiteSyncJournal(database: database)
            boardLedger = try BoardNostrLedger(database: database)
            recent = try RecentEventStore(database: database)
            uplinkStore = try UplinkStore(database: database)
            identities = PeerIdentityCache(store: try SQLiteIdentityStore(database: database), logger: logger.child("identities"))
            moderationLog = try ModerationLog(database: database, config: modlogConfig, logger: logger.child("modlog"))
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
        if let caFile = config.relayCAFile {
            // Read once here so a missing or unreadable file is a configuration error naming the field, not a
            // certificate failure on every connection.
            do { _ = try FileIO.read(caFile, maxBytes: 4 << 20) } catch { throw .usage("relay_ca_file: \(error)") }
        }
        let pool: RelayPool
        do {
            pool = try RelayPool(
                relayURLs: relayURLs,
                // The bridge carries nothing outside ±900 s (EventRules): such events are dropped at intake,
                // before a Schnorr check, and counted by relay and reason (`stale` / `future`).
                configuration: .init(
                    authKey: nil, freshnessWindow: EventRules.Limits.maxEventAgeSeconds, jitterUnit: { Double.random(in: 0..<1) }),
                webSocket: .init(caFile: config.relayCAFile, userAgent: "bitchat-bridge/\(BridgeVersion.string)"),
                logger: logger.child("relays"), unixNow: { Int64(WallClock.nowSeconds()) })
        } catch {
            throw .failure("relays: \(error)")
        }

        let transport = try meshTransport(config, logger: logger)
        var capabilities = PeerCapabilities()
        if config.gateway { capabilities.insert(.gateway) }
        if config.rendezvous { capabilities.insert(.bridge) }
        // BOARD.md §1 "Ours": advertised once the bridge stores and serves posts (Android PR peers then include
        // it in board rounds; iOS ignores the bit).
        capabilities.insert(.board)
        let identity = MeshIdentity(
            noisePublicKey: keys.noiseKey.publicKey, signingKey: keys.signingKey, nickname: config.nickname,
            capabilities: capabilities, bridgeGeohash: config.rendezvousCell?.string)
        // The bridge relays a public message only once its judgement passed it (SPAM-FILTER §1).
        var meshConfiguration = MeshPeerEngine.Configuration()
        meshConfiguration.gatePublicRelays = true
        meshConfiguration.peerTimeoutMs = UInt64(config.meshPeerTimeoutSeconds) * 1_000
        // Gossip sync as iOS (BOARD.md §8–§9): answer REQUEST_SYNC from the durable stores, ask direct peers.
        meshConfiguration.sync = SyncRequester.Configuration()
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
        var policy = AdmissionPolicy(
            config: spamConfig, exemptSenders: Set([channelKey?.publicKey.hex, rendezvousKey?.publicKey.hex].compactMap { $0 }))
        if config.shadow { policy.setShadowMode(true) }
        var judge = BridgeJudge(settings: .init(channel: config.geohash.string, logText: modlogConfig.logText), policy: policy)
        // The console's denylist, kept across restarts.
        let denylistPath = FileIO.join(dataDirectory, "denylist.json")
        var denylist = Denylist.empty
        if FileIO.exists(denylistPath) {
            do {
                denylist = try Denylist(json: try JSONParser().parse(try FileIO.read(denylistPath, maxBytes: 1 << 20)))
            } catch {
                throw .usage("\(denylistPath): \(error)")
            }
            judge.setDenylist(denylist)
        }
        let router = BridgeRouter(
            settings: .init(
                channel: config.gateway ? config.geohash : nil, rendezvousCell: config.rendezvous ? config.rendezvousCell : nil,
                mirrorDownlink: config.mirrorDownlink, mirrorUplink: config.mirrorUplink,
                servedChannels: config.gateway ? config.servedChannels : nil),
            ownKeys: Set([channelKey?.publicKey, rendezvousKey?.publicKey].compactMap { $0 }), rendezvousKey: rendezvousKey,
            remembered: remembered, channelKey: channelKey,
            presenceSeed: SecureRandom.bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }, judge: judge,
            clockOrigin: .now)
        // The console's live view: every verdict and crossing, fed by the coordinator.
        let feed = ConsoleFeed()
        var activity: (@Sendable (BridgeActivity) -> Void)?
        if config.httpListen != nil {
            activity = { (item: BridgeActivity) in feed.publish(item.jsonValue) }
        }
        let stores = BridgeStores(
            recent: recent, identities: identities, uplinks: uplinkStore, moderationLog: moderationLog, externalChanges: database,
            syncJournal: syncJournal, boardLedger: config.gateway ? boardLedger : nil,
            fleetList: fleet.map { _ in FleetListFile(dataDirectory: dataDirectory) })
        let machine = BridgeMachine(router: router, configuration: .init(
            keys: keys, powBits: config.powBits, fleet: fleet,
            sync: SyncResponder.Configuration(airtime: AirtimeBudget.Configuration(bytesPerWindow: config.syncReplyBudgetBytes)),
            boardCopies: config.gateway, liveView: activity != nil,
            seed: SecureRandom.bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }))
        let coordinator = BridgeCoordinator(
            machine: machine, mesh: node, relays: PoolClient(pool: pool), stores: stores, logger: logger, time: SystemTime(),
            activity: activity)

        let now = Int64(WallClock.nowSeconds())
        if config.gateway {
            for (id, filter) in channelSubscriptions(config, now: now) { pool.subscribe(id: id, filters: [filter], lookback: 3600) }
            // Kind-1 notes and kind 5 of the served channels, 15 min back: whether a board post's author bridged it
            // already (BOARD.md §11), and other bridges' copies carrying their island's board packets (the
            // `bitchat-board` tag). Nothing is minted from a note.
            pool.subscribe(id: "board-\(config.geohash.string)", filters: [boardNotesFilter(config, now: now)], lookback: 900)
        }
        if let cell = config.rendezvousCell, config.rendezvous {
            pool.subscribe(id: "bridge-rendezvous", filters: [.rendezvous(cells: cell.ring.map(\.string), now: now)], lookback: 900)
        }
        var fleetMetadata: [(String, JSONValue)] = []
        var fleetChange: (@Sendable (FleetChange) -> Void)?
        if let fleet {
            pool.subscribe(id: "bridge-fleet", filters: [fleet.filter], lookback: nil)
            let publisher: JSONValue = fleet.publisher.map { .string(NIP19.npub($0.publicKey)) } ?? .null
            fleetMetadata = [("fleet.site", .string(fleet.site)), ("fleet.operators", .integer(Int64(fleet.operators.count))),
                             ("fleet.publisher", publisher)]
            if fleet.publisher != nil {
                fleetChange = { [coordinator] change in coordinator.submit(OperatorInput.fleetChange(change)) }
            }
        }
        logger.notice("bridge starting", [
            ("bridge.geohash", .string(config.geohash.string)), ("mesh.peer", .string(identity.peerID.hex)),
            ("mesh.transport", .string(config.mesh.description)), ("relays", .array(relayURLs.map(JSONValue.string))),
            ("role.gateway", .bool(config.gateway)), ("role.rendezvous", .bool(config.rendezvous)),
            ("channel.levels", .array(config.gateway ? config.servedChannels.map { .string($0.string) } : [])),
            ("mirror.down", .bool(config.mirrorDownlink)), ("mirror.up", .bool(config.mirrorUplink)),
            ("channel.npub", channelKey.map { .string(NIP19.npub($0.publicKey)) } ?? .null),
        ] + fleetMetadata)
        let startedAt = ContinuousClock.now
        let health = BridgeHealth(startedAt: startedAt)
        let intake = RelayIntake()
        let metricsSource = MetricsSource(
            pool: pool, node: node, transport: transport, coordinator: coordinator, intake: intake, startedAt: startedAt)
        // `/healthz` and `/metrics` are computed per request: health from the transport's and the pool's own state
        // (read under their locks), so a hub or a relay going away shows at once, plus the coordinator's answer
        // (its heartbeat); metrics gathered as of the scrape. The listener's thread waits at most the timeout.
        let statusWaits = AwaitedTasks()
        let status = StatusBoard(live: LiveStatus(
            health: { [pool, transport] in health.evaluate(Self.healthInputs(relays: pool.snapshot(), mesh: transport.status), now: .now) },
            ownerAnswers: { [coordinator] in statusWaits.run(timeout: Limits.statusTimeout) { await coordinator.heartbeat() } != nil },
            metrics: { statusWaits.run(timeout: Limits.statusTimeout) { await metricsSource.gather().snapshot() } },
            timeout: Limits.statusTimeout))
        var server: LoopbackHTTPServer?
        var console: ConsoleService?
        var consoleStores: CoordinatorConsoleStores?
        let charts = ConsoleCharts()
        if let listen = config.httpListen {
            let listenerConsole: ConsoleService
            do {
                let stores = CoordinatorConsoleStores(
                    coordinator: coordinator, stores: try ConsoleStores(database: database, identities: identities, moderationLog: moderationLog))
                consoleStores = stores
                listenerConsole = ConsoleService(
                    settings: .init(token: consoleToken, readsNeedAuth: config.httpListenBeyondLoopback), stores: stores,
                    dependencies: .init(
                        now: { WallClock.nowSeconds() }, random: { SecureRandom.bytes($0) },
                        fallback: { method, path in status.response(method: method, path: path) }, feed: feed,
                        setShadowMode: { [coordinator] on in coordinator.submit(OperatorInput.setShadowMode(on)) }, shadowAtStart: config.shadow,
                        setDenylist: { [coordinator] list in coordinator.submit(OperatorInput.setDenylist(list)) },
                        denylistPath: denylistPath, denylistAtStart: denylist,
                        setSpamLimits: { [coordinator] spam in coordinator.submit(OperatorInput.setSpamLimits(spam)) },
                        spamAtStart: spamConfig, fleetChange: fleetChange,
                        release: { [coordinator] id in
                            switch await coordinator.release(messageID: id) {
                            case .success: nil
                            case .failure(let error): error.description
                            }
                        }, charts: charts))
            } catch {
                throw .failure("console: database \(databasePath): \(error)")
            }
            console = listenerConsole
            do {
                let (host, port) = try LoopbackHTTPServer.parseListen(listen)
                var settings = LoopbackHTTPServer.Settings()
                settings.bindBeyondLoopback = config.httpListenBeyondLoopback && consoleToken != nil
                let http = LoopbackHTTPServer(host: host, port: port, settings: settings) { request in listenerConsole.handle(request) }
                try http.start()
                server = http
            } catch {
                throw .failure("health/metrics listener \(listen): \(error)")
            }
        }
        return BridgeRuntime(
            pool: pool, node: node, transport: transport, coordinator: coordinator, intake: intake, logger: logger,
            status: status, statusWaits: statusWaits, metricsSource: metricsSource, server: server, console: console,
            consoleStores: consoleStores, policyPath: policyPath, database: database, configPath: configPath,
            controlPath: FileIO.join(dataDirectory, "control.sock"), charts: charts)
    }

    /// The console token when it exists. A listener beyond loopback without it is refused before anything starts
    /// (exit 64 naming `http_listen`): the console would otherwise serve the moderation log to the network.
    static func checkConsoleToken(config: BridgeConfiguration, dataDirectory: String) throws(CommandExit) -> String? {
        let token: String?
        do {
            token = try ConsoleToken.load(dataDirectory: dataDirectory)
        } catch {
            throw .usage("http_listen: \(error)")
        }
        if config.httpListenBeyondLoopback, token == nil, let listen = config.httpListen {
            throw .usage(
                "http_listen '\(listen)' binds beyond loopback, which needs the console token: create it with "
                    + "bitchat-bridge console-token (it goes to \(ConsoleToken.path(dataDirectory: dataDirectory)), mode 0600), "
                    + "or listen on 127.0.0.1")
        }
        return token
    }

    private static func meshTransport(_ config: BridgeConfiguration, logger: Logger) throws(CommandExit) -> any MeshTransport {
        switch config.mesh {
        case .tcp:
            // The URL as configured, `?mtu=N` included, parsed as `mesh listen --mesh` parses it.
            do {
                return try RadioClientTransport.connect([RadioClientTransport.Endpoint(url: config.mesh.description)])
            } catch {
                throw .failure("cannot join the mesh at \(config.mesh): \(error)")
            }
        case .tcpSegments(let urls):
            do {
                return try RadioClientTransport.connect(try urls.map { try RadioClientTransport.Endpoint(url: $0) })
            } catch {
                throw .failure("cannot join the mesh at \(urls.joined(separator: ",")): \(error)")
            }
        case .bluez(let adapter):
            do {
                return try BlueZTransport.start(options: .init(adapter: adapter), logger: logger.child("bluez"))
            } catch {
                throw .failure(error.description)
            }
        }
    }

    /// Fleet moderation settings from `operator_keys` and `fleet_site`, with the operator secret key when the data
    /// dir holds one (``OperatorKeys/secretFileName``: 64 hex, mode 0600, its public key one of `operator_keys`).
    /// Nil when no operator key is configured. The secret is never logged.
    static func fleetSettings(_ config: BridgeConfiguration, dataDirectory: String) throws(CommandExit) -> FleetSettings? {
        guard !config.operatorKeys.isEmpty else { return nil }
        let path = FileIO.join(dataDirectory, OperatorKeys.secretFileName)
        var publisher: SchnorrSecretKey?
        if FileIO.exists(path) {
            let mode: UInt32
            let text: String
            do {
                mode = try FileIO.permissions(path)
                text = String(decoding: try FileIO.read(path, maxBytes: 256), as: UTF8.self)
            } catch {
                throw .failure("\(path): \(error)")
            }
            guard mode & 0o077 == 0 else {
                throw .usage("\(path) is readable by others (mode \(String(mode & 0o777, radix: 8))); chmod 600 it")
            }
            let hex = text.filter { !$0.isWhitespace }.lowercased()
            guard let bytes = try? Hex.decode(hex, expectedCount: 32), let key = try? SchnorrSecretKey(bytes: bytes) else {
                throw .usage("\(path) must hold a secret key as 64 hex characters")
            }
            guard config.operatorKeys.contains(key.publicKey) else {
                throw .usage("\(path): its public key \(key.publicKey.hex) is not one of operator_keys")
            }
            publisher = key
        }
        return FleetSettings(
            site: config.fleetSite, operators: Set(config.operatorKeys), publisher: publisher)
    }

    /// The channel subscriptions (NOSTR-GEO §5.4's filter, one hour back): `geo-<geohash>` for the geohash
    /// itself, as phones subscribe it; `geo-parents-<geohash>` for its served parents and
    /// `geo-blocks-<geohash>` for its served block children, each one filter over those geohashes. Three
    /// subscriptions rather than 36, because relays cap subscriptions per connection (commonly 10–20);
    /// the split keeps a busy region level from spending the smaller levels' share of the backfill limit.
    static func channelSubscriptions(_ config: BridgeConfiguration, now: Int64) -> [(id: String, filter: NostrFilter)] {
        let own = config.geohash
        var out: [(String, NostrFilter)] = [("geo-\(own.string)", .geohashChannel(own.string, now: now))]
        let others = config.servedChannels.dropFirst()
        let parents = others.filter { $0.precision < own.precision }.map(\.string)
        let children = others.filter { $0.precision > own.precision }.map(\.string)
        for (name, cells) in [("parents", parents), ("blocks", children)] where !cells.isEmpty {
            var filter = NostrFilter.geohashChannel(own.string, now: now)
            filter.tags = ["g": cells]
            out.append(("geo-\(name)-\(own.string)", filter))
        }
        return out
    }

    /// The served channels' kind-1 notes and kind 5 within §11's 15-min window (the author's copy of a board post;
    /// another island's board packets and tombstones).
    static func boardNotesFilter(_ config: BridgeConfiguration, now: Int64) -> NostrFilter {
        NostrFilter(
            kinds: [BoardNostrCopy.textNoteKind, BoardNostrCopy.deletionKind], tags: ["g": config.servedChannels.map(\.string)],
            since: now - RecentBoardNotes.Limits.windowSeconds, limit: 200)
    }

    /// Operator relays plus, with the directory on, the 5 nearest to the channel and to each cell of the
    /// rendezvous ring (phones publish to their own cell's relays and subscribe on the ring), deduplicated.
    static func relayURLs(_ config: BridgeConfiguration) throws(CommandExit) -> [String] {
        var urls = config.relays
        if config.relayDirectory {
            let (directory, _) = try DataFiles.loadRelayDirectory(option: config.relayFile, setting: "relay_file (BRIDGE_RELAY_FILE)")
            let places = RelayDirectory.bridgePlaces(
                channel: config.geohash, gateway: config.gateway, rendezvousCell: config.rendezvous ? config.rendezvousCell : nil)
            // Both apps' nearest relays for each place (iOS ∪ Android, NOSTR-GEO §3.5).
            urls += directory.bridgeSelection(places: places).urls.filter { !urls.contains($0) }
        }
        return urls
    }

    /// The services of a running bridge, in start order; they stop in reverse: the status publisher, the
    /// coordinator (intake stops, held uplinks are flushed to the store, the signed leave is the last mesh
    /// submission), the mesh (its flush hands the leave to the transport within ``Limits/leaveGraceMs``, then the link
    /// closes), the relay
    /// intake and the relay pool (connections closed), the HTTP listener. Each has ``Limits/serviceStop``.
    func services() -> [Service] {
        var services: [Service] = []
        if let server {
            let stopped = AsyncStream.makeStream(of: Void.self)
            services.append(Service(name: "http", deadline: Limits.serviceStop, run: {
                for await _ in stopped.stream {}
            }, stop: { [console, consoleStores, statusWaits] in
                server.stop()
                await statusWaits.stop()
                await console?.stop()
                await consoleStores?.stop()
                stopped.continuation.finish()
            }))
        }
        services.append(Service(name: "relays", deadline: Limits.serviceStop, run: { [pool] in try? await pool.run() }))
        services.append(Service(name: "relay-intake", deadline: Limits.serviceStop, run: { [pool, intake] in
            for await event in pool.events {
                switch event {
                case .event(let e, _, _): intake.yield(.event(e))
                case .connected, .disconnected: intake.yield(.connectedRelays(pool.connectedCount))
                case .ok(_, let id, true, _):
                    if let id = try? EventID(hex: id) { intake.yield(.accepted(id)) }
                default: break
                }
            }
        }))
        services.append(Service(name: "mesh", deadline: Limits.serviceStop, run: { [node] in await node.run() }, stop: { [node, transport, logger] in
            let flushed = await node.flush(timeoutMs: Limits.leaveGraceMs)
            if !flushed.completed {
                logger.warning("mesh transmits dropped at stop", [
                    ("transmits", .integer(Int64(flushed.abandonedTransmits))), ("limit.ms", .integer(Int64(Limits.leaveGraceMs))),
                ])
            }
            transport.close()
        }))
        services.append(Service(name: "coordinator", deadline: Limits.serviceStop, run: { [coordinator, intake] in
            await coordinator.run(relayInputs: intake.stream)
        }, stop: { [coordinator] in await coordinator.shutdown() }))
        if server != nil {
            services.append(Service(name: "charts", deadline: Limits.serviceStop, run: { await sampleCharts() }))
        }
        // The control socket: a failure to open it is logged and the bridge runs on without it.
        do {
            let control = try ControlSocket(path: controlPath, logger: logger.child("control")) { [coordinator, logger] request in
                await ControlCommands.answer(request, coordinator: coordinator, logger: logger.child("control"))
            }
            let stopped = AsyncStream.makeStream(of: Void.self)
            services.append(Service(name: "control", deadline: Limits.serviceStop, run: {
                control.start()
                for await _ in stopped.stream {}
            }, stop: {
                await control.stop()
                stopped.continuation.finish()
            }))
        } catch {
            logger.error("control socket not started", [("path", .string(controlPath)), ("error", .string(error.description))])
        }
        return services
    }

    /// Runs until SIGINT/SIGTERM, then stops the services in reverse order (``services()``) and checkpoints
    /// the database (the WAL folded into the main file and truncated), all within ``Limits/stopDeadline``.
    /// SIGHUP reloads the operator's policy lists (`policy.json`) and the relay list (``reloadRelays()``);
    /// every other setting needs a restart (documented in the README). Returns the exit code: 0 after a
    /// requested stop, 1 when a service ended on its own or failed to start (logged by the group).
    public func runUntilStopped() async -> Int32 {
        let group = ServiceGroup(services(), logger: logger)
        let stopWatch = StopWatch()
        let signals = SignalHandler(ProcessSignal.termination) { [logger] signal in
            logger.notice("stopping", [("signal", .string(signal.name))])
            stopWatch.begin(deadline: Limits.stopDeadline, logger: logger)
            group.requestStop(signal.name)
        }
        defer { signals.cancel() }
        let hangups = SignalHandler([.hangup]) { [coordinator, policyPath, logger] _ in
            logger.notice("reloading the policy and the relay list", [("signal", .string("SIGHUP")), ("policy.path", .string(policyPath))])
            let result = Result { () throws(OperatorLists.LoadError) -> OperatorLists in try OperatorLists.load(path: policyPath) }
            coordinator.submit(.reloadPolicy(result))
            reloadRelays()
        }
        defer { hangups.cancel() }
        let report = await group.run()
        checkpointDatabase()
        if !report.overran.isEmpty {
            logger.warning("services overran their stop deadline", [("services", .array(report.overran.map(JSONValue.string)))])
        }
        logger.notice("stopped", [("stop.ms", .integer(stopWatch.elapsedMilliseconds ?? 0))])
        if case .requested = report.reason { return 0 }
        return 1
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
            let config = try DataFiles.loadConfiguration(path: configPath)
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
    /// backup taken after the stop needs nothing else; then closes the one connection. Runs after every
    /// service has stopped (nobody else uses the connection any more). Failure (disk full) is logged;
    /// SQLite's WAL keeps the data either way.
    func checkpointDatabase() {
        do {
            try database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        } catch {
            logger.error("database checkpoint at stop failed (the WAL keeps the data)", [("error", .string(error.description))])
        }
        database.close()
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

/// The console's stores on the bridge's one connection, each call run on the coordinator (that connection's one
/// user) and awaited from the listener's thread for at most ``Limits/wait``; the block list is reloaded after a
/// change (``BridgeCoordinator/operatorStoreWork(reloadingBlocks:_:)``).
final class CoordinatorConsoleStores: ConsoleStoreAccess {
    enum Limits {
        /// Longest wait for the coordinator: one actor hop between two of its inputs, well under a browser's
        /// patience; past it the console answers 500 and the work is cancelled before it starts.
        static let wait: Duration = .seconds(2)
    }

    let coordinator: BridgeCoordinator
    let stores: ConsoleStores
    private let waits = AwaitedTasks()

    init(coordinator: BridgeCoordinator, stores: ConsoleStores) {
        self.coordinator = coordinator
        self.stores = stores
    }

    func withStores<T: Sendable>(changesBlocks: Bool, _ body: @escaping @Sendable (ConsoleStores) -> T) -> T? {
        waits.run(timeout: Limits.wait) { [coordinator, stores] in
            await coordinator.operatorStoreWork(reloadingBlocks: changesBlocks) { body(stores) }
        } ?? nil
    }

    /// Part of the listener's stop: no store work outlives it (the database closes after every service).
    func stop() async { await waits.stop() }
}

/// The live relay pool as the coordinator's publishing side.
struct PoolClient: BridgeRelayClient {
    let pool: RelayPool

    func publish(_ event: NostrEvent) { pool.publish(event) }

    func setPriorityAuthors(_ authors: Set<String>) { pool.setPriorityAuthors(authors) }
}
