public import Bridge
import BlueZ
import BotStorage
import BridgeCore
public import BotSupport
import Console
import Geohash
import Nostr
import NostrRelay
import VirtualRadio
import WebSocketRuntime

#if canImport(Glibc)
import Glibc
#endif

/// `bitchat-bridge doctor`'s probes: each gathers facts about this host for one configuration and hands them to
/// ``DoctorRules`` (or judges them here, where the facts are a module's own types: BlueZ, the relay pool). Nothing is
/// registered, posted or written: BlueZ is only read, relays get one `REQ`, radio hubs one TCP connect.
public enum Doctor {
    public struct Options: Sendable {
        /// BlueZ's settings file.
        public var bluezConfPath = "/etc/bluetooth/main.conf"
        /// How long relays get to connect and answer a `REQ`.
        public var relayTimeout: Duration = .seconds(10)
        /// How long a radio hub gets to accept a TCP connection.
        public var segmentTimeoutMs: Int32 = 3_000

        public init() {}
    }

    /// Every check for `config`, in the order an operator fixes things: storage, the mesh side, the relays, the clock.
    public static func checks(_ config: BridgeConfiguration, options: Options, logger: BotSupport.Logger) async -> [DoctorCheck] {
        var checks = [
            DoctorRules.dataDirectory(directoryFacts(Paths.dataDirectory(option: config.dataDirectory))),
            DoctorRules.httpListen(config.httpListen, inUse: config.httpListen.flatMap(LoopbackHTTPServer.listenInUse)),
            siteRecords(config),
        ]
        switch config.mesh {
        case .bluez(let adapter):
            checks += bluetooth(adapter: adapter, confPath: options.bluezConfPath)
        case .tcp, .tcpSegments:
            checks.append(DoctorCheck("bluetooth", .skip, "the mesh runs over tcp:// radio-hub segments (\(config.mesh))"))
            checks += segments(config.mesh, timeoutMs: options.segmentTimeoutMs)
        }
        let relays: [String]
        do {
            relays = try RuntimeRelays.relayURLs(config)
        } catch {
            return checks + [DoctorCheck("relays", .fail, error.message, fix: "set relays (BRIDGE_RELAYS) or relay_directory")]
        }
        return checks + (await probeRelays(relays, geohash: config.geohash.string, caFile: config.relayCAFile, timeout: options.relayTimeout, logger: logger))
    }

    /// The operator key file as `run` reads it (``RuntimeStores/fleetSettings(_:dataDirectory:)``).
    static func siteRecords(_ config: BridgeConfiguration) -> DoctorCheck {
        let fleet: FleetSettings?
        do {
            fleet = try RuntimeStores.fleetSettings(config, dataDirectory: Paths.dataDirectory(option: config.dataDirectory))
        } catch {
            return DoctorRules.siteRecords(site: config.fleetSite, operatorKeys: config.operatorKeys.count, holdsKey: false, keyError: error.message)
        }
        return DoctorRules.siteRecords(
            site: config.fleetSite, operatorKeys: config.operatorKeys.count, holdsKey: fleet?.siteKey != nil, keyError: nil)
    }

    // MARK: Data directory

    static func directoryFacts(_ path: String) -> DoctorRules.DirectoryFacts {
        var facts = DoctorRules.DirectoryFacts(path: path)
        facts.uid = geteuid()
        do {
            try KeyStore.checkDirectory(path)
        } catch {
            facts.unsafe = error.description
        }
        var info = stat()
        guard stat(path, &info) == 0 else {
            // Missing: can the first start create it? The nearest existing parent decides.
            var parent = path
            repeat {
                parent = parent.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
                if parent.isEmpty { parent = path.hasPrefix("/") ? "/" : "." }
            } while !FileIO.exists(parent) && parent != "/" && parent != "."
            facts.writable = access(parent, W_OK | X_OK) == 0
            return facts
        }
        facts.mode = UInt32(info.st_mode) & 0o7777
        if let holder = DataDirectoryLock.holder(dataDirectory: path) {
            facts.held = true
            facts.holderPID = holder.pid
        }
        facts.ownerUID = info.st_uid
        facts.writable = access(path, W_OK | X_OK) == 0
        for name in [KeyStore.fileName, ConsoleToken.fileName, Moderators.fileName, OperatorKeys.secretFileName] {
            var file = stat()
            if stat(path + "/" + name, &file) == 0 { facts.secretFiles.append((name, UInt32(file.st_mode) & 0o7777)) }
        }
        var space = statvfs()
        if statvfs(path, &space) == 0 { facts.freeBytes = UInt64(space.f_bavail) * UInt64(space.f_frsize) }
        return facts
    }

    // MARK: Bluetooth

    static func bluetooth(adapter name: String?, confPath: String) -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        let text: String?
        var readError: String?
        do {
            text = String(decoding: try FileIO.read(confPath, maxBytes: 1 << 20), as: UTF8.self)
        } catch {
            text = nil
            readError = error.description
        }
        let settings = DoctorRules.bluezSettings(text: text, path: confPath, readError: readError)
        let survey: BlueZSurvey
        do {
            survey = try BlueZSurvey.read()
            checks.append(DoctorCheck("d-bus", .ok, "the system bus answers and its policy lets uid \(geteuid()) talk to BlueZ"))
        } catch {
            switch error {
            case .busUnavailable:
                checks.append(DoctorCheck("d-bus", .fail, error.description,
                                          fix: "start dbus; in a container, mount the host's bus: -v /run/dbus:/run/dbus"))
            case .permissionDenied(let detail):
                checks.append(DoctorCheck("d-bus", .fail, "the D-Bus policy refuses uid \(geteuid()) access to org.bluez (\(detail))",
                                          fix: "install contrib/dbus-bitchat-bridge.conf as /etc/dbus-1/system.d/bitchat-bridge.conf and reload "
                                            + "D-Bus (it admits user bitchat-bridge; in Docker create it on the host with UID 10001), or run as root"))
            case .bluezNotRunning:
                checks.append(DoctorCheck("d-bus", .ok, "the system bus answers"))
                checks.append(DoctorCheck("bluez", .fail, "nothing owns org.bluez on the system bus: bluetoothd is not running",
                                          fix: "sudo systemctl enable --now bluetooth"))
            default:
                checks.append(DoctorCheck("bluez", .fail, error.description, fix: "look at bluetoothd's log: journalctl -u bluetooth"))
            }
            return checks + [settings]
        }
        checks.append(adapterCheck(survey, named: name))
        return checks + [settings]
    }

    static func adapterCheck(_ survey: BlueZSurvey, named name: String?) -> DoctorCheck {
        let adapter: BlueZSurvey.Adapter
        do {
            adapter = try survey.adapter(named: name)
        } catch {
            return DoctorCheck("bluetooth adapter", .fail, error.description,
                               fix: "plug in a Bluetooth LE controller and check it: rfkill list; btmgmt info"
                                + (name == nil ? "" : "; or set mesh (BRIDGE_MESH) to bluez:hciN of one BlueZ lists"))
        }
        let roles = adapter.roles.map { " (roles: \($0.joined(separator: ", ")))" } ?? ""
        guard adapter.supportsBothLERoles else {
            return DoctorCheck("bluetooth adapter", .fail, "\(adapter.name) does not offer both LE roles\(roles): the bridge is a GATT "
                                + "peripheral and a central at once", fix: "use a Bluetooth 4.0+ LE controller that BlueZ drives in both roles")
        }
        if adapter.powerState == "off-blocked" {
            return DoctorCheck("bluetooth adapter", .fail, "\(adapter.name) is blocked by rfkill", fix: "sudo rfkill unblock bluetooth")
        }
        guard adapter.powered else {
            return DoctorCheck("bluetooth adapter", .warn, "\(adapter.name) is powered off; the bridge powers it on when it starts",
                               fix: "check that it can be: bluetoothctl power on")
        }
        return DoctorCheck("bluetooth adapter", .ok, "\(adapter.name) is present and powered, LE central and peripheral\(roles)")
    }

    // MARK: Radio segments

    static func segments(_ mesh: MeshSetting, timeoutMs: Int32) -> [DoctorCheck] {
        let urls: [String]
        switch mesh {
        case .tcpSegments(let list): urls = list
        default: urls = [mesh.description]
        }
        return urls.map { url in
            let problem: RadioError?
            do throws(RadioError) {
                problem = RadioClientTransport.probe(try RadioClientTransport.Endpoint(url: url), timeoutMs: timeoutMs)
            } catch {
                problem = error
            }
            guard let problem else { return DoctorCheck("radio segment", .ok, "a radio hub listens at \(url)") }
            return DoctorCheck("radio segment", .fail, "nothing accepts a connection at \(url): \(problem)",
                               fix: "start the hub (bitchat-bridge radio-hub --port PORT), or correct mesh (BRIDGE_MESH)")
        }
    }

    // MARK: Relays

    /// Connects the real relay pool to `urls` with one channel `REQ` (limit 1) and waits until each relay answered or
    /// `timeout` passed: one check per relay, then the clock against the answering relays' (their `Date` headers).
    static func probeRelays(
        _ urls: [String], geohash: String, caFile: String?, timeout: Duration, logger: Logger
    ) async -> [DoctorCheck] {
        guard !urls.isEmpty else {
            return [DoctorCheck("relays", .fail, "no relay is configured and the relay directory is off",
                                fix: "set relays (BRIDGE_RELAYS) or turn relay_directory on")]
        }
        let pool: RelayPool
        do {
            pool = try RelayPool(
                relayURLs: urls, configuration: .init(authKey: nil, jitterUnit: { Double.random(in: 0..<1) }),
                webSocket: .init(caFile: caFile, userAgent: "bitchat-bridge/\(BridgeVersion.string) doctor"),
                logger: logger, unixNow: { Int64(SystemTime.wallClockMs() / 1000) })
        } catch {
            return [DoctorCheck("relays", .fail, "\(error)", fix: "correct relays (BRIDGE_RELAYS)")]
        }
        var filter = NostrFilter.geohashChannel(geohash, now: Int64(SystemTime.wallClockMs() / 1000))
        filter.limit = 1
        pool.subscribe(id: "doctor", filters: [filter], lookback: nil)
        let runner = Task { try? await pool.run() }
        let started = ContinuousClock.now
        var answeredAfter: [String: Duration] = [:]
        // Until each relay answered or failed once (a refused connection is not retried here), at most `timeout`.
        while ContinuousClock.now - started < timeout {
            let relays = pool.snapshot().relays
            for relay in relays where relay.isAnswering && answeredAfter[relay.url] == nil {
                answeredAfter[relay.url] = ContinuousClock.now - started
            }
            if relays.allSatisfy({ answeredAfter[$0.url] != nil || $0.consecutiveFailures > 0 }) { break }
            try? await Task.sleep(for: .milliseconds(20))
        }
        let snapshot = pool.snapshot()
        runner.cancel()
        await runner.value
        // One relay answering is enough to carry chat: the others are warnings then, failures only when none answers.
        let silent: DoctorCheck.Outcome = answeredAfter.isEmpty ? .fail : .warn
        var checks: [DoctorCheck] = []
        var offsets: [(relay: String, seconds: Int64)] = []
        for relay in snapshot.relays {
            if let after = answeredAfter[relay.url] {
                checks.append(DoctorCheck("relay", .ok, "\(relay.url) answered in \(after.milliseconds) ms"))
                if let offset = relay.stats.clockOffset { offsets.append((relay.url, offset)) }
            } else if relay.state.name == "open" {
                checks.append(DoctorCheck("relay", silent, "\(relay.url) connected but did not answer a REQ within \(timeout.seconds) s",
                                          fix: "the relay is overloaded or refuses this client; choose another in relays (BRIDGE_RELAYS)"))
            } else {
                checks.append(DoctorCheck("relay", silent, "\(relay.url) is not reachable: \(relay.stats.lastFailure ?? "no connection within \(timeout.seconds) s")",
                                          fix: "check the URL, DNS and outbound network (wss:// uses port 443), or choose another in relays (BRIDGE_RELAYS)"))
            }
        }
        checks.append(answeredAfter.isEmpty
            ? DoctorCheck("clock", .skip, "no relay answered, so the clock could not be compared with theirs")
            : DoctorRules.clock(offsets: offsets))
        return checks
    }
}

extension Duration {
    /// Whole milliseconds (the doctor's answer times, the runtime's stop timer).
    var milliseconds: Int64 { components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000 }
    var seconds: Int64 { components.seconds }
}
