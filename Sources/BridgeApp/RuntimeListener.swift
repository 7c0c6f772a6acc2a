import BotCrypto
import BotSupport
import Bridge
import BridgeCore
import Console
import Identity
import ModerationLog
import Nostr
import NostrRelay
import WebSocketRuntime
import MeshRuntime

/// The operator's HTTP side for a configuration: `/healthz` and `/metrics` computed per request, the moderation
/// console on the same listener, and the listener itself (`http_listen`). One builder of the composition root.
struct RuntimeListener {
    let status: StatusBoard
    /// The listener thread's waits for the coordinator (`/healthz`, `/metrics`); stopped with the listener.
    let statusWaits: AwaitedTasks
    let server: LoopbackHTTPServer?
    /// Where `status` reaches it (`host:port`, the port the kernel chose for `:0`); nil with http_listen off.
    let address: String?
    let console: ConsoleService?
    let consoleStores: CoordinatorConsoleStores?
    let charts: ConsoleCharts

    enum Limits {
        /// How long `/healthz` and `/metrics` wait for the coordinator before answering that it did not answer.
        static let statusTimeout: Duration = .seconds(2)
    }

    /// The console token when it exists. A listener beyond loopback without it is refused before anything starts
    /// (exit 64 naming `http_listen`): the console would otherwise serve the moderation log to the network.
    static func consoleToken(_ config: BridgeConfiguration, dataDirectory: String) throws(CommandExit) -> String? {
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

    /// `/healthz` from the transport's and the pool's own state (read under their locks), so a hub or a relay going
    /// away shows at once, plus the coordinator's answer (its heartbeat); `/metrics` gathered as of the scrape. The
    /// listener's thread waits at most ``Limits/statusTimeout`` for the coordinator.
    /// `name`: the bridge as `/healthz` names it (``BridgeRuntime/name(_:)``), so `status` says which bridge answered.
    static func status(_ source: MetricsSource, name: String) -> (StatusBoard, AwaitedTasks) {
        let health = BridgeHealth(startedAt: source.startedAt)
        let waits = AwaitedTasks()
        let board = StatusBoard(live: LiveStatus(
            health: {
                var report = health.evaluate(MetricsSource.healthInputs(relays: source.pool.snapshot(), mesh: source.transport.status), now: .now)
                report.name = name
                report.site = waits.run(timeout: Limits.statusTimeout) { await source.coordinator.siteStages() } ?? nil
                return report
            },
            ownerAnswers: { waits.run(timeout: Limits.statusTimeout) { await source.coordinator.heartbeat() } != nil },
            metrics: { waits.run(timeout: Limits.statusTimeout) { await source.gather().snapshot() } },
            timeout: Limits.statusTimeout))
        return (board, waits)
    }

    static func build(
        _ config: BridgeConfiguration, stores: RuntimeStores, source: MetricsSource, feed: ConsoleFeed, token: String?,
        fleetChange: (@Sendable (FleetChange) -> Void)?, logger: Logger
    ) throws(CommandExit) -> RuntimeListener {
        let (status, statusWaits) = Self.status(source, name: BridgeRuntime.name(config))
        let charts = ConsoleCharts()
        guard let listen = config.httpListen else {
            return RuntimeListener(
                status: status, statusWaits: statusWaits, server: nil, address: nil, console: nil, consoleStores: nil, charts: charts)
        }
        let coordinator = source.coordinator
        let consoleStores: CoordinatorConsoleStores
        do {
            consoleStores = CoordinatorConsoleStores(coordinator: coordinator, stores: try ConsoleStores(
                database: stores.database, identities: stores.identities, moderationLog: stores.moderationLog))
        } catch {
            throw .failure("console: database \(stores.databasePath): \(error)")
        }
        let tokenFile = WatchedFile.consoleToken(dataDirectory: stores.dataDirectory, token: token) { [logger] problem in
            logger.error("console token unreadable; the last good one stays", [("error", .string(problem))])
        }
        let moderatorsFile = WatchedFile.moderators(dataDirectory: stores.dataDirectory) { [logger] problem in
            logger.error("moderators file unreadable; the last good one stays", [("error", .string(problem))])
        }
        let console = ConsoleService(
            settings: .init(token: token, readsNeedAuth: config.httpListenBeyondLoopback), stores: consoleStores,
            dependencies: .init(
                now: { WallClock.nowSeconds() }, random: { SecureRandom.bytes($0) },
                fallback: { method, path in status.response(method: method, path: path) }, feed: feed,
                setShadowMode: { on in coordinator.submit(OperatorInput.setShadowMode(on)) }, shadowAtStart: config.shadow,
                setDenylist: { list, by in coordinator.submit(OperatorInput.setDenylist(list, by: by)) },
                denylistPath: stores.denylistPath, denylistAtStart: stores.denylist,
                setSpamLimits: { spam in coordinator.submit(OperatorInput.setSpamLimits(spam)) },
                spamAtStart: stores.spamConfig, fleetChange: fleetChange,
                siteAction: { target, on, by in coordinator.submit(OperatorInput.site(target, on: on, by: by)) },
                release: { id, by in
                    switch await coordinator.release(messageID: id, by: by) {
                    case .success: nil
                    case .failure(let error): error.description
                    }
                }, charts: charts, currentCredentials: { (tokenFile.current(), moderatorsFile.current().tokens) }))
        let server: LoopbackHTTPServer
        let address: String
        do {
            let (host, port) = try LoopbackHTTPServer.parseListen(listen)
            var settings = LoopbackHTTPServer.Settings()
            settings.bindBeyondLoopback = config.httpListenBeyondLoopback && token != nil
            server = LoopbackHTTPServer(host: host, port: port, settings: settings) { request in console.handle(request) }
            try server.start()
            let shown = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
            address = "\(shown):\(server.port)"
            logger.notice("console listening", [
                ("url", .string("http://\(shown):\(server.port)/console")), ("token.exists", .bool(token != nil)),
                ("token.path", .string(ConsoleToken.path(dataDirectory: stores.dataDirectory))),
            ])
        } catch {
            if case .addressInUse = error {
                throw .failure("http_listen \(listen) is in use: stop what listens there, or set http_listen (BRIDGE_HTTP_LISTEN) to a free port")
            }
            throw .failure("http_listen \(listen): \(error)")
        }
        return RuntimeListener(
            status: status, statusWaits: statusWaits, server: server, address: address, console: console, consoleStores: consoleStores,
            charts: charts)
    }

    /// The listener's part of the stop: no request waits on the coordinator past it.
    func stop() async {
        server?.stop()
        await statusWaits.stop()
        await console?.stop()
        await consoleStores?.stop()
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

    func marksInForce(_ key: IdentityKey) -> BridgeCoordinator.MarksInForce? {
        waits.run(timeout: Limits.wait) { [coordinator] in await coordinator.marksInForce(key) }
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
