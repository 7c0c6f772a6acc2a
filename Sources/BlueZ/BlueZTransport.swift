public import Mesh
public import MeshRuntime
public import BotSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Why the BlueZ transport cannot start: one clear sentence each (the CLI prints it and exits 1).
public enum BlueZError: Error, Sendable, Equatable, CustomStringConvertible {
    case busUnavailable(String)
    case bluezNotRunning
    case noAdapter
    case adapterNotFound(String, available: [String])
    case permissionDenied(String)
    case setupFailed(String)

    public var description: String {
        switch self {
        case .busUnavailable(let detail): "cannot reach the D-Bus system bus (\(detail)); is dbus running?"
        case .bluezNotRunning: "BlueZ is not running (no owner of org.bluez on the system bus); start bluetoothd"
        case .noAdapter: "no Bluetooth adapter found (BlueZ lists none; check the controller and rfkill)"
        case .adapterNotFound(let name, let available):
            "Bluetooth adapter \(name) not found (available: \(available.isEmpty ? "none" : available.joined(separator: ", ")))"
        case .permissionDenied(let detail):
            "permission denied by D-Bus/BlueZ (\(detail)); run as root or a user in the 'bluetooth' group"
        case .setupFailed(let detail): "BlueZ setup failed: \(detail)"
        }
    }
}

/// A ``MeshTransport`` over BlueZ (sd-bus): the GATT peripheral (application + LE advertisement) and the
/// GATT central (discovery filtered by the service UUID, connect, notify, write-without-response) on one
/// adapter, both feeding one ``BlueZLinkTable``.
///
/// Threading: one owner thread owns the sd-bus connection and all state; it polls the bus descriptor and
/// an eventfd. ``send(_:on:)`` and ``close()`` only enqueue under a mutex and write the eventfd; ``status``
/// reads a value the owner publishes under a mutex. BlueZ registration calls are asynchronous
/// (RegisterApplication calls back into GetManagedObjects before it replies, SWIFT-LINUX §7).
///
/// The code is split by seam: this file (start-up, the loop, status), `BlueZTransport+Setup.swift`
/// (registration, bluetoothd restarts, adapter power), `BlueZTransport+Links.swift` (both GATT roles'
/// frames and the central connect sequence, whose decisions are the pure ``CentralConnector``).
///
/// Decisions (spec silent or BlueZ-imposed), written down:
/// - Peripheral links are keyed by the central's device path from `WriteValue`'s `device` option; a
///   central appears as a link with its first write (its announce) and its MTU from the `mtu` option.
/// - BlueZ sends a characteristic's notification to *every* subscribed central (no per-device notify in
///   the D-Bus API), so a frame sent on several peripheral links in one batch is notified once, and other
///   subscribed centrals also receive it (their dedup drops it).
/// - Start-up waits for registration (max ``Limits/setupTimeoutMs``) so permission and adapter errors
///   surface as a ``BlueZError``; after a `bluetoothd` restart, or our adapter powered off and on again or
///   removed and re-added, the same setup runs again from the loop, retried every ``Limits/resetupRetryMs``
///   until it succeeds. ``status`` is down meanwhile. We never power an adapter the operator switched off;
///   only at start-up, and after bluetoothd restarted (once its AutoEnable had its chance), do we power it.
public final class BlueZTransport: MeshTransport, @unchecked Sendable {
    public struct Options: Sendable {
        /// `hciN`; nil: the first powered adapter (else the first one, powered on).
        public var adapter: String?
        public var peripheral = true
        public var central = true
        public var serviceUUID = BitchatGATT.serviceUUID
        public var links = BlueZLinkTable.Configuration()
        /// Object path root of our exported objects (one per process and adapter).
        public var objectRoot = "/org/bitchat/bridge"

        public init(adapter: String? = nil) { self.adapter = adapter }
    }

    public enum Limits {
        /// Registration and adapter setup at start-up must finish within this.
        public static let setupTimeoutMs: UInt64 = 20_000
        /// Device1.Connect timeout (iOS: 8 s; emulated radios are slower).
        public static let connectTimeoutMs: UInt64 = 15_000
        /// From Connect's reply to a subscribed characteristic.
        public static let resolveTimeoutMs: UInt64 = 20_000
        /// Re-setup attempts after bluetoothd or the adapter came back.
        public static let resetupRetryMs: UInt64 = 1_000
        /// Rounds we leave powering to bluetoothd after it restarted (its AutoEnable) before doing it ourselves.
        public static let autoPowerWaitRounds = 5
        /// Policy tick of the owner loop (connect attempts, deadlines).
        public static let tickMs: Int32 = 200
        /// Link value length when BlueZ reports no MTU (BlueZ negotiates 517 by default: 517 − 3).
        public static let defaultValueLength = 514
        /// At close: how long we wait for BlueZ to confirm the unregistrations (the graceful stop has 5 s in
        /// all; bluetoothd cleans up after our bus connection anyway if it does not answer).
        public static let unregisterTimeoutMs: UInt64 = 1_000
    }

    public let events = MeshInbound()
    let inbox: OwnerInbox<(MeshLinkID, [UInt8])>
    let logger: Logger
    public let adapterName: String
    private let published = Mutex<(isUp: Bool, detail: String)>((false, "starting"))

    // Owner-thread state (the extensions in the other files use it too).
    let options: Options
    let bus: SDBusConnection
    var adapterPath: String
    let tree: GattObjectTree
    var exported: [ExportedInterface] = []
    var characteristic: ExportedInterface?
    var table: BlueZLinkTable
    var notifying = false
    var devices: [String: [String: DBusValue]] = [:]
    /// Connect candidates and discovery stop/resume around connects (see `CentralDiscovery`).
    var discovery: CentralDiscovery
    /// The central role's connect attempts (see `CentralConnector`).
    var connector: CentralConnector
    var centralCharacteristic: [String: MeshLinkID] = [:]
    var linkCharacteristic: [MeshLinkID: String] = [:]
    var setupState: SetupState = .idle
    var bluezPresent = true
    /// Our adapter's object exists and is powered (PropertiesChanged / InterfacesAdded/Removed on it).
    var adapterPresent = true
    var adapterPowered = true
    var nextSetupAt: UInt64 = 0
    /// Setup attempts since bluetoothd came back; it powers adapters itself (AutoEnable), so we wait a few
    /// rounds before powering on ourselves (an early Set(Powered) races it and fails with Busy).
    var resetupAttempts = 0
    /// True once the owner thread runs (start-up errors are thrown, not logged).
    var running = false
    var closed = false

    /// `pending`: a setup is due at `nextSetupAt` (bluetoothd or the adapter came back); `failed`: the last
    /// one failed and is retried at `nextSetupAt`.
    enum SetupState: Equatable { case idle, pending, running, done, failed(BlueZError) }

    /// Opens the system bus, finds and powers the adapter, exports and registers the GATT application and
    /// advertisement, starts discovery, then hands the bus to the owner thread.
    public static func start(options: Options, logger: Logger) throws(BlueZError) -> BlueZTransport {
        let bus = try BlueZSurvey.openSystemBus()
        let survey = try BlueZSurvey.read(bus)
        let adapter = try survey.adapter(named: options.adapter).path
        let inbox: OwnerInbox<(MeshLinkID, [UInt8])>
        do {
            inbox = try OwnerInbox()
        } catch {
            throw .setupFailed(error.description)
        }
        let transport = BlueZTransport(bus: bus, adapter: adapter, options: options, inbox: inbox, logger: logger)
        try transport.startUp()
        transport.startThread()
        return transport
    }

    private init(bus: SDBusConnection, adapter: String, options: Options, inbox: OwnerInbox<(MeshLinkID, [UInt8])>, logger: Logger) {
        self.bus = bus
        self.adapterPath = adapter
        self.adapterName = String(adapter.split(separator: "/").last ?? "")
        self.options = options
        self.inbox = inbox
        self.logger = logger
        self.table = BlueZLinkTable(configuration: options.links)
        self.discovery = CentralDiscovery(adapterPath: adapter, serviceUUID: options.serviceUUID)
        self.connector = CentralConnector(resolveTimeoutMs: Limits.resolveTimeoutMs, serviceUUID: options.serviceUUID)
        self.tree = GattObjectTree(root: options.objectRoot + "/" + (adapter.split(separator: "/").last.map(String.init) ?? "hci"),
                                   serviceUUID: options.serviceUUID)
    }

    /// The BlueZ adapters in a GetManagedObjects answer, sorted (`/org/bluez/hci0`, …) with their Powered flag.
    static func adapters(_ objects: [String: [String: [String: DBusValue]]]) -> [(path: String, powered: Bool)] {
        var found: [(path: String, powered: Bool)] = []
        for (path, interfaces) in objects {
            guard let adapter = interfaces[BlueZNames.adapter] else { continue }
            found.append((path, adapter["Powered"]?.boolValue ?? false))
        }
        // hci2 before hci10: shorter paths first, then lexical.
        return found.sorted { lhs, rhs in lhs.path.count != rhs.path.count ? lhs.path.count < rhs.path.count : lhs.path < rhs.path }
    }

    static func chooseAdapter(_ objects: [String: [String: [String: DBusValue]]], named name: String?) throws(BlueZError) -> String {
        let all = adapters(objects)
        if let name {
            guard let match = all.first(where: { $0.path.hasSuffix("/" + name) }) else {
                throw .adapterNotFound(name, available: all.map { String($0.path.split(separator: "/").last ?? "") })
            }
            return match.path
        }
        guard let chosen = all.first(where: \.powered) ?? all.first else { throw .noAdapter }
        return chosen.path
    }

    static func managedObjects(_ reply: [DBusValue]) -> [String: [String: [String: DBusValue]]] {
        var out: [String: [String: [String: DBusValue]]] = [:]
        for (path, interfaces) in reply.first?.dictionary ?? [:] {
            var ifaces: [String: [String: DBusValue]] = [:]
            for (name, props) in interfaces.dictionary ?? [:] { ifaces[name] = props.dictionary ?? [:] }
            out[path] = ifaces
        }
        return out
    }

    // MARK: MeshTransport

    public func send(_ frame: [UInt8], on link: MeshLinkID) {
        inbox.post((link, frame))
    }

    public func close() {
        inbox.requestClose()
    }

    public var status: MeshTransportStatus {
        let (isUp, detail) = published.withLock { $0 }
        return MeshTransportStatus(isUp: isUp, detail: detail, linksUp: events.linksUp, counters: events.counters)
    }

    /// Rebuilds the published status from the owner's state (owner thread; once per loop turn).
    func publishStatus() {
        let state: (Bool, String)
        if closed {
            state = (false, "closed")
        } else if !bluezPresent {
            state = (false, "bluetoothd is not running; waiting for it to return")
        } else if !adapterPresent {
            state = (false, "adapter \(adapterName) is gone; waiting for it to return")
        } else if !adapterPowered {
            state = (false, "adapter \(adapterName) is powered off")
        } else {
            switch setupState {
            case .idle: state = (false, "not registered with BlueZ")
            case .pending, .running: state = (false, "registering with BlueZ on \(adapterName)")
            case .failed(let error): state = (false, "\(error); retrying")
            case .done:
                let central = table.centralLinkCount
                state = (true, "BlueZ ready on \(adapterName): \(central) central, \(table.links.count - central) peripheral link(s)")
            }
        }
        published.withLock { $0 = state }
    }

    // MARK: Start-up (caller's thread, before the owner thread exists)

    private func startUp() throws(BlueZError) {
        do {
            try subscribeSignals()
            try exportObjects()
        } catch {
            throw .setupFailed(error.description)
        }
        runSetup()
        let deadline = Self.nowMs() + Limits.setupTimeoutMs
        while setupState == .running {
            guard bus.processAll() else { throw .busUnavailable("connection lost") }
            let now = Self.nowMs()
            guard now < deadline else { throw .setupFailed("BlueZ did not answer the registration within \(Limits.setupTimeoutMs / 1000) s") }
            var fds = [pollfd(fd: bus.fd, events: bus.pollEvents, revents: 0)]
            _ = poll(&fds, 1, 100)
        }
        if case .failed(let error) = setupState { throw error }
        publishStatus()
    }

    // MARK: Owner thread

    private func startThread() {
        if !OwnerThread.detach({ self.loop() }) {
            published.withLock { $0 = (false, "could not start the BlueZ thread") }
            events.finish()
        }
    }

    private func loop() {
        running = true
        var lastTick: UInt64 = 0
        while true {
            guard bus.processAll() else {
                logger.error("D-Bus connection lost; the BLE transport stops")
                break
            }
            let (frames, closing) = inbox.take()
            transmit(frames)
            if closing {
                unregister()
                break
            }
            let now = Self.nowMs()
            if now >= lastTick + UInt64(Limits.tickMs) {
                lastTick = now
                tick(now: now)
            }
            _ = bus.processAll()
            publishStatus()
            var fds = [pollfd(fd: inbox.wake.readFD, events: Int16(POLLIN), revents: 0), pollfd(fd: bus.fd, events: bus.pollEvents, revents: 0)]
            var timeout = Limits.tickMs
            if let usec = bus.timeoutUsec { timeout = min(timeout, Int32(min(usec / 1_000, UInt64(Limits.tickMs)))) }
            guard poll(&fds, 2, timeout) >= 0 || errno == EINTR else { break }
            if fds[0].revents != 0 { inbox.wake.drain() }
        }
        bus.flush()
        for link in table.reset() { events.linkDown(link.id) }
        closed = true
        publishStatus()
        inbox.ownerFinished()
        events.finish()
    }

    private func tick(now: UInt64) {
        if !bluezPresent || !adapterPresent || !adapterPowered { return }
        switch setupState {
        case .pending, .failed:
            guard now >= nextSetupAt else { return }
            if resetupAttempts > 0 { resetupAttempts += 1 }
            runSetup()
            return
        case .idle, .running:
            return
        case .done:
            break
        }
        for link in table.expired(now: now) { dropLink(link, reason: "no valid announce") }
        perform(connector.tick(now: now))
        guard options.central else { return }
        for device in discovery.candidates(devices) where table.shouldConnect(device, now: now) {
            connect(device, now: now)
        }
    }

    static func nowMs() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000 + UInt64(spec.tv_nsec) / 1_000_000
    }
}
