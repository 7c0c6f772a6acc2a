import BitchatWire
public import BotSupport
public import Bridge
public import BridgeCore
import Console
import Identity
import IdentityCache
public import MeshRuntime
import Nostr
import NostrRelay
import Synchronization
import WebSocketRuntime

#if canImport(Glibc)
import Glibc
import Geohash
import BotCrypto
#endif

/// What the host gives a bridge besides its configuration: the process gives the system's clock, the configured
/// transport and secure random seeds; an in-process test world gives a manual clock, in-process radio segments and
/// fixed seeds. Everything else is built the same way (``BridgeRuntime/start(config:logger:configPath:host:)``).
public struct BridgeHost: Sendable {
    /// Wall time of the coordinator, the mesh node and the relay pool's freshness window (the pool's connection
    /// timers keep the monotonic clock).
    public var time: any TimeSource
    /// The mesh transport; nil = from `mesh` in the configuration (radio hub segments, BlueZ).
    public var transport: (any MeshTransport)?
    /// Seeds the downlink holds, the presence intervals and the mesh node's jitter; nil = the system's secure random.
    public var seedValue: UInt64?
    /// Told every verdict and crossing, as the console's live view is (the test world's eyes); must not block.
    public var observer: (@Sendable (BridgeActivity) -> Void)?

    public init(
        time: any TimeSource = SystemTime(), transport: (any MeshTransport)? = nil, seed: UInt64? = nil,
        observer: (@Sendable (BridgeActivity) -> Void)? = nil
    ) {
        self.time = time
        self.transport = transport
        self.seedValue = seed
        self.observer = observer
    }

    /// The process: system time, the configured transport, secure random seeds.
    public static var process: BridgeHost { BridgeHost() }

    func seed() -> UInt64 { seedValue ?? SecureRandom.bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }

    /// The courier gateway's drop-key seed: 32 secret bytes (derived from ``seedValue`` when a test fixes it).
    func courierSeed() -> [UInt8] {
        guard let seedValue else { return SecureRandom.bytes(32) }
        return SHA256.hash(Array("courier".utf8) + (0..<8).map { UInt8(truncatingIfNeeded: seedValue >> (8 * $0)) })
    }
}

/// A running bridge's parts, wired from the configuration by one composition root (``start(config:logger:configPath:host:)``)
/// out of small builders: the data directory's stores and keys (``RuntimeStores``), the decisions
/// (``RuntimeCore``), the relay pool (``RuntimeRelays``), the mesh node (``RuntimeMesh``), the coordinator, and the
/// operator's HTTP side (``RuntimeListener``). ``runUntilStopped()`` runs it as the process does (signals);
/// ``launch()`` runs it in-process (tests).
public struct BridgeRuntime: Sendable {
    public let coordinator: BridgeCoordinator
    public let node: MeshNode
    let pool: RelayPool
    /// The courier relays' own pool (nil with the courier gateway off).
    let courierPool: RelayPool?
    let transport: any MeshTransport
    let stores: RuntimeStores
    let listener: RuntimeListener
    let metricsSource: MetricsSource
    let logger: Logger
    /// The `--config` file, read again (with the `BRIDGE_*` environment) for the relay list on SIGHUP.
    let configPath: String?
    /// Which bridge this is, for the control socket's `ping` (``name(_:)``, and where `status` reaches it).
    let bridge: ControlCommands.Bridge

    enum Limits {
        /// How long the mesh node's flush at stop may take to hand the signed leave (and any jittered transmit still
        /// waiting) to the transport before the link closes (one radio frame round; the 5 s stop budget of the
        /// operations issue has room for it). What still waits then is dropped and counted.
        static let leaveGraceMs: UInt64 = 200
        /// Operations issue: SIGTERM/SIGINT stop within 5 s. Past this the process logs and exits 1 rather than hang
        /// under a supervisor that would SIGKILL it mid-write.
        static let stopDeadline: Duration = .seconds(5)
        /// Each service's own share of the stop (the sum stays inside ``stopDeadline``).
        static let serviceStop: Duration = .seconds(1)
        /// How often the console's charts are sampled (their buckets are minutes).
        static let chartSample: Duration = .seconds(15)
    }

    /// The bridge as `status`, `/healthz` and the control socket name it: its nickname and the geohash it serves
    /// (`stage-a (u4pruy)`), so an operator with several stages sees which one answered.
    static func name(_ config: BridgeConfiguration) -> String { "\(config.nickname) (\(config.geohash.string))" }

    /// The composition root.
    public static func start(
        config: BridgeConfiguration, logger: Logger, configPath: String?, host: BridgeHost = .process
    ) throws(CommandExit) -> BridgeRuntime {
        let stores = try RuntimeStores.open(config, logger: logger)
        let token = try RuntimeListener.consoleToken(config, dataDirectory: stores.dataDirectory)
        // The console's live view: every verdict and crossing, fed by the coordinator.
        let feed = ConsoleFeed()
        var activity: (@Sendable (BridgeActivity) -> Void)?
        let console = config.httpListen != nil
        if console || host.observer != nil {
            activity = { [observer = host.observer] item in
                if console { feed.publish(item.jsonValue) }
                observer?(item)
            }
        }
        let (core, machine) = try RuntimeCore.build(config, stores: stores, host: host, liveView: activity != nil)
        let pool = try RuntimeRelays.pool(config, fleet: stores.fleet, host: host, logger: logger)
        let courierPool = config.courier ? try RuntimeRelays.courierPool(config, host: host, logger: logger) : nil
        let (node, transport) = try RuntimeMesh.node(config, keys: stores.keys, host: host, logger: logger)
        let coordinator = BridgeCoordinator(
            machine: machine, mesh: node, relays: PoolClient(pool: pool), courierRelays: courierPool.map(CourierPoolClient.init),
            stores: stores.stores, logger: logger, time: host.time, activity: activity)
        let source = MetricsSource(pool: pool, node: node, transport: transport, coordinator: coordinator, startedAt: .now)
        var fleetChange: (@Sendable (FleetChange) -> Void)?
        if stores.fleet?.publisher != nil { fleetChange = { change in coordinator.submit(OperatorInput.fleetChange(change)) } }
        let listener = try RuntimeListener.build(
            config, stores: stores, source: source, feed: feed, token: token, fleetChange: fleetChange, logger: logger.child("console"))
        logStart(config, stores: stores, core: core, node: node, pool: pool, logger: logger)
        return BridgeRuntime(
            coordinator: coordinator, node: node, pool: pool, courierPool: courierPool, transport: transport, stores: stores, listener: listener,
            metricsSource: source, logger: logger, configPath: configPath,
            bridge: ControlCommands.Bridge(name: name(config), httpListen: listener.address))
    }

    private static func logStart(
        _ config: BridgeConfiguration, stores: RuntimeStores, core: RuntimeCore, node: MeshNode, pool: RelayPool, logger: Logger
    ) {
        var fleetMetadata: [(String, JSONValue)] = []
        if let fleet = stores.fleet {
            let publisher: JSONValue = fleet.publisher.map { .string(NIP19.npub($0.publicKey)) } ?? .null
            fleetMetadata = [("fleet.site", .string(fleet.site)), ("fleet.operators", .integer(Int64(fleet.operators.count))),
                             ("fleet.publisher", publisher)]
        }
        logger.notice("bridge starting", [
            ("bridge.name", .string(config.nickname)), ("bridge.geohash", .string(config.geohash.string)),
            ("mesh.peer", .string(Hex.encode(stores.keys.peerID))),
            ("mesh.transport", .string(config.mesh.description)), ("relays", .array(pool.relayURLs.map(JSONValue.string))),
            ("role.gateway", .bool(config.gateway)), ("role.rendezvous", .bool(config.rendezvous)),
            ("channel.levels", .array(config.gateway ? config.servedChannels.map { .string($0.string) } : [])),
            ("mirror.down", .bool(config.mirrorDownlink)), ("mirror.up", .bool(config.mirrorUplink)),
            ("channel.npub", core.channelKey.map { .string(NIP19.npub($0.publicKey)) } ?? .null),
        ] + fleetMetadata)
    }

    /// The services of a running bridge, in start order; they stop in reverse: the control socket, the charts'
    /// sampler, the coordinator (intake stops, held uplinks go to the store, the signed leave is the last mesh
    /// input), the mesh (its flush hands the leave to the transport within ``Limits/leaveGraceMs``, then the link
    /// closes), the relay pool (connections closed), the HTTP listener. Each has ``Limits/serviceStop``.
    func services() -> [Service] {
        var services: [Service] = []
        if listener.server != nil { services.append(Self.waiting("http", stop: { await listener.stop() })) }
        services.append(Service(name: "relays", deadline: Limits.serviceStop, run: { [pool] in try? await pool.run() }))
        if let courierPool {
            services.append(Service(name: "courier relays", deadline: Limits.serviceStop, run: { try? await courierPool.run() }))
        }
        services.append(Service(name: "mesh", deadline: Limits.serviceStop, run: { [node] in await node.run() }, stop: { [node, transport, logger] in
            let flushed = await node.flush(timeoutMs: Limits.leaveGraceMs)
            if !flushed.completed {
                logger.warning("mesh transmits dropped at stop", [
                    ("transmits", .integer(Int64(flushed.abandonedTransmits))), ("limit.ms", .integer(Int64(Limits.leaveGraceMs))),
                ])
            }
            transport.close()
        }))
        services.append(Service(name: "coordinator", deadline: Limits.serviceStop, run: { [coordinator, pool, courierPool] in
            await coordinator.run(relayInputs: PoolInputs.relays(pool), courierInputs: courierPool.map(PoolInputs.courier))
        }, stop: { [coordinator] in await coordinator.shutdown() }))
        if listener.server != nil {
            services.append(Service(name: "charts", deadline: Limits.serviceStop, run: { await sampleCharts() }))
        }
        // The control socket: a failure to open it is logged and the bridge runs on without it.
        let controlPath = FileIO.join(stores.dataDirectory, "control.sock")
        do {
            let control = try ControlSocket(path: controlPath, logger: logger.child("control")) { [coordinator, logger] request in
                await ControlCommands.answer(request, coordinator: coordinator, bridge: bridge, logger: logger.child("control"))
            }
            services.append(Self.waiting("control", start: { control.start() }, stop: { await control.stop() }))
        } catch {
            logger.error("control socket not started", [("path", .string(controlPath)), ("error", .string(error.description))])
        }
        return services
    }

    /// A service that owns threads of its own: it runs until its stop, which stops them.
    private static func waiting(_ name: String, start: @escaping @Sendable () -> Void = {}, stop: @escaping @Sendable () async -> Void) -> Service {
        let stopped = AsyncStream.makeStream(of: Void.self)
        return Service(name: name, deadline: Limits.serviceStop, run: {
            start()
            for await _ in stopped.stream {}
        }, stop: {
            await stop()
            stopped.continuation.finish()
        })
    }

    /// Samples the figures for the console's charts every ``Limits/chartSample`` until cancelled (only with the
    /// console on: the charts are history, so something must look while nobody does; `/metrics` itself is
    /// computed per scrape).
    func sampleCharts() async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: Limits.chartSample) } catch { return }
            listener.charts.record(await metricsSource.gather(), at: WallClock.nowSeconds())
        }
    }

    /// What SIGHUP does: the operator's policy lists (`policy.json`) read again — a malformed file keeps the lists in
    /// force, logged — and the relay list (``reloadRelays()``).
    public func reload() {
        logger.notice("reloading the policy and the relay list", [("signal", .string("SIGHUP")), ("policy.path", .string(stores.policyPath))])
        let result = Result { () throws(OperatorLists.LoadError) -> OperatorLists in try OperatorLists.load(path: stores.policyPath) }
        coordinator.submit(.reloadPolicy(result))
        reloadRelays()
    }

    /// Runs until SIGINT/SIGTERM, then stops the services in reverse order (``services()``) and checkpoints the
    /// database (the WAL folded into the main file and truncated), all within ``Limits/stopDeadline``. SIGHUP
    /// reloads the operator's policy lists (`policy.json`) and the relay list (``reloadRelays()``); every other
    /// setting needs a restart (documented in the README). Returns the exit code: 0 after a requested stop, 1 when a
    /// service ended on its own or failed to start (logged by the group).
    public func runUntilStopped() async -> Int32 {
        let group = ServiceGroup(services(), logger: logger)
        let stopWatch = StopWatch()
        let signals = SignalHandler(ProcessSignal.termination) { [logger] signal in
            logger.notice("stopping", [("signal", .string(signal.name))])
            stopWatch.begin(deadline: Limits.stopDeadline, logger: logger)
            group.requestStop(signal.name)
        }
        defer { signals.cancel() }
        let hangups = SignalHandler([.hangup]) { _ in self.reload() }
        defer { hangups.cancel() }
        let report = await group.run()
        stores.close(logger: logger)
        if !report.overran.isEmpty {
            logger.warning("services overran their stop deadline", [("services", .array(report.overran.map(JSONValue.string)))])
        }
        logger.notice("stopped", [("stop.ms", .integer(stopWatch.elapsedMilliseconds ?? 0))])
        if case .requested = report.reason { return 0 }
        return 1
    }

    /// What `/metrics` would answer now (the same figures, rendered the same way), without the HTTP listener.
    public func metricsText() async -> String { PrometheusText.render(await metricsSource.gather().snapshot()) }

    /// What `/healthz` would report now, without the HTTP listener (the coordinator answered: it was asked here).
    public func health() async -> HealthReport {
        await coordinator.heartbeat()
        return BridgeHealth(startedAt: metricsSource.startedAt).evaluate(
            MetricsSource.healthInputs(relays: pool.snapshot(), mesh: transport.status), now: .now)
    }

    /// Runs the bridge in this process (an in-process test world): the services start now; ``RunningBridge/stop()``
    /// stops them as a SIGTERM would and checkpoints the database.
    public func launch() -> RunningBridge {
        let group = ServiceGroup(services(), logger: logger)
        let running = Task { [stores, logger] in
            let report = await group.run()
            stores.close(logger: logger)
            return report
        }
        return RunningBridge(group: group, running: running)
    }

    /// SIGHUP: the relay list read again — the configuration file's `relays` and `BRIDGE_RELAYS` (which, as at start,
    /// overrides the file), plus the directory's nearest relays when `relay_directory` is on — and applied to the
    /// running pool (``RelayPool/setRelays(_:)``): added relays connect and get the subscriptions, removed ones are
    /// closed, the others keep their connections. A configuration that no longer reads (bad JSON, a bad URL, no
    /// relay left) keeps the current relays and logs one error; the next good reload applies. Only the relay list
    /// is taken from the new file: the other settings still need a restart (the reload logs none of them as changed).
    func reloadRelays() {
        let urls: [String]
        do {
            urls = try RuntimeRelays.relayURLs(try DataFiles.loadConfiguration(path: configPath))
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
}

/// A bridge running in this process (``BridgeRuntime/launch()``).
public struct RunningBridge: Sendable {
    let group: ServiceGroup
    let running: Task<ServiceGroup.Report, Never>

    /// Stops the services in reverse order, as a SIGTERM does, and waits for the database's checkpoint.
    @discardableResult
    public func stop() async -> ServiceGroup.Report {
        group.requestStop("test")
        return await running.value
    }
}

/// Times the graceful stop and enforces its deadline from a thread of its own (the cooperative pool may be the
/// thing that hangs).
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
            started.map { (ContinuousClock.now - $0).milliseconds }
        }
    }
}
