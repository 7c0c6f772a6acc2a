public import Mesh
public import BotSupport
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
/// an eventfd. ``send(_:on:)`` and ``close()`` only enqueue under a mutex and write the eventfd.
/// BlueZ registration calls are asynchronous (RegisterApplication calls back into GetManagedObjects before
/// it replies, SWIFT-LINUX §7).
///
/// Decisions (spec silent or BlueZ-imposed), written down:
/// - Peripheral links are keyed by the central's device path from `WriteValue`'s `device` option; a
///   central appears as a link with its first write (its announce) and its MTU from the `mtu` option.
/// - BlueZ sends a characteristic's notification to *every* subscribed central (no per-device notify in
///   the D-Bus API), so a frame sent on several peripheral links in one batch is notified once, and other
///   subscribed centrals also receive it (their dedup drops it).
/// - Start-up waits for registration (max ``Limits/setupTimeoutMs``) so permission and adapter errors
///   surface as a ``BlueZError``; after a `bluetoothd` restart the same setup runs again from the loop,
///   retried every ``Limits/resetupRetryMs`` until the adapter is back.
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
        /// Inbound events buffered for the consumer.
        public static let eventBuffer = 4_096
        /// Registration and adapter setup at start-up must finish within this.
        public static let setupTimeoutMs: UInt64 = 20_000
        /// Device1.Connect timeout (iOS: 8 s; emulated radios are slower).
        public static let connectTimeoutMs: UInt64 = 15_000
        /// From Connect's reply to a subscribed characteristic.
        public static let resolveTimeoutMs: UInt64 = 20_000
        /// Re-setup attempts after bluetoothd came back.
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

    private enum Phase { case connecting, resolving(deadline: UInt64), subscribing }

    public let events: AsyncStream<MeshTransportEvent>
    private let continuation: AsyncStream<MeshTransportEvent>.Continuation
    private let inbox: OwnerInbox<(MeshLinkID, [UInt8])>
    private let logger: Logger
    public let adapterName: String

    // Owner-thread state.
    private let options: Options
    private let bus: SDBusConnection
    private var adapterPath: String
    private let tree: GattObjectTree
    private var exported: [ExportedInterface] = []
    private var characteristic: ExportedInterface?
    private var table: BlueZLinkTable
    private var notifying = false
    private var devices: [String: [String: DBusValue]] = [:]
    /// Connect candidates and discovery stop/resume around connects (see `CentralDiscovery`).
    private var discovery: CentralDiscovery
    private var attempts: [String: Phase] = [:]
    private var centralCharacteristic: [String: MeshLinkID] = [:]
    private var linkCharacteristic: [MeshLinkID: String] = [:]
    private var setupState: SetupState = .idle
    private var bluezPresent = true
    private var nextSetupAt: UInt64 = 0
    private var statsDropped = 0
    /// Setup attempts since bluetoothd came back; it powers adapters itself (AutoEnable), so we wait a few
    /// rounds before powering on ourselves (an early Set(Powered) races it and fails with Busy).
    private var resetupAttempts = 0
    /// True once the owner thread runs (start-up errors are thrown, not logged).
    private var running = false

    private enum SetupState: Equatable { case idle, running, done, failed(BlueZError) }

    /// Opens the system bus, finds and powers the adapter, exports and registers the GATT application and
    /// advertisement, starts discovery, then hands the bus to the owner thread.
    public static func start(options: Options, logger: Logger) throws(BlueZError) -> BlueZTransport {
        let bus: SDBusConnection
        do {
            bus = try SDBusConnection.openSystem()
        } catch {
            throw .busUnavailable(error.message)
        }
        let owned: [DBusValue]
        do throws(DBusError) {
            owned = try bus.call(BlueZNames.dbus, "/org/freedesktop/DBus", BlueZNames.dbus, "NameHasOwner", [.string(BlueZNames.service)])
        } catch {
            throw error.name == DBusError.accessDenied ? .permissionDenied(error.message) : .busUnavailable(error.description)
        }
        guard owned.first?.boolValue == true else { throw .bluezNotRunning }
        let objects: [String: [String: [String: DBusValue]]]
        do throws(DBusError) {
            let reply = try bus.call(BlueZNames.service, "/", BlueZNames.objectManager, "GetManagedObjects")
            objects = Self.managedObjects(reply)
        } catch {
            throw error.name == DBusError.accessDenied ? .permissionDenied(error.message) : .setupFailed(error.description)
        }
        let adapter = try Self.chooseAdapter(objects, named: options.adapter)
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
        self.tree = GattObjectTree(root: options.objectRoot + "/" + (adapter.split(separator: "/").last.map(String.init) ?? "hci"),
                                   serviceUUID: options.serviceUUID)
        (events, continuation) = AsyncStream.makeStream(of: MeshTransportEvent.self, bufferingPolicy: .bufferingOldest(Limits.eventBuffer))
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

    private func emit(_ event: MeshTransportEvent) {
        if case .dropped = continuation.yield(event) { statsDropped += 1 }
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
    }

    private func subscribeSignals() throws(DBusError) {
        try bus.matchSignal(sender: nil, path: nil, interface: BlueZNames.objectManager, member: "InterfacesAdded") { [unowned self] _, _, args in
            guard let path = args.first?.stringValue, path.hasPrefix("/org/bluez/"), let ifaces = args.dropFirst().first?.dictionary else { return }
            if let device = ifaces[BlueZNames.device]?.dictionary {
                deviceChanged(path, device, replace: true)
                discovery.deviceSignal(path, device)
            }
        }
        try bus.matchSignal(sender: nil, path: nil, interface: BlueZNames.objectManager, member: "InterfacesRemoved") { [unowned self] _, _, args in
            guard let path = args.first?.stringValue, path.hasPrefix("/org/bluez/"),
                args.dropFirst().first?.stringArray?.contains(BlueZNames.device) == true
            else { return }
            devices[path] = nil
            discovery.deviceRemoved(path)
            deviceGone(path, reason: "removed")
        }
        try bus.matchSignal(sender: nil, path: nil, interface: BlueZNames.properties, member: "PropertiesChanged") { [unowned self] path, _, args in
            guard path.hasPrefix("/org/bluez/"), let iface = args.first?.stringValue, let changed = args.dropFirst().first?.dictionary else { return }
            if iface == BlueZNames.device {
                deviceChanged(path, changed, replace: false)
                discovery.deviceSignal(path, changed)
            } else if iface == BlueZNames.gattCharacteristic, let value = changed["Value"]?.bytesValue, let link = centralCharacteristic[path] {
                receive(value, on: link)
            }
        }
        try bus.matchSignal(sender: BlueZNames.dbus, path: "/org/freedesktop/DBus", interface: BlueZNames.dbus, member: "NameOwnerChanged") {
            [unowned self] _, _, args in
            guard args.count == 3, args[0].stringValue == BlueZNames.service else { return }
            bluezOwnerChanged(newOwner: args[2].stringValue ?? "")
        }
    }

    private func exportObjects() throws(DBusError) {
        try bus.addObjectManager(at: tree.root)
        guard options.peripheral else { return }
        for object in tree.objects + [tree.advertisement] {
            let iface = ExportedInterface(path: object.path, name: object.interface, properties: object.properties.map { ($0.name, $0.value) }) {
                [unowned self] member, arguments in handleMethod(object.interface, member, arguments)
            }
            try bus.export(iface, methods: object.methods.map { ($0.name, $0.input, $0.output) }, emitting: object.emitting)
            exported.append(iface)
            if object.interface == BlueZNames.gattCharacteristic { characteristic = iface }
        }
    }

    /// Adapter lookup → power → RegisterApplication + RegisterAdvertisement → discovery. All asynchronous.
    private func runSetup() {
        setupState = .running
        bus.callAsync(BlueZNames.service, "/", BlueZNames.objectManager, "GetManagedObjects", timeoutMs: 10_000) { [unowned self] result in
            switch result {
            case .failure(let error):
                setupFailed(error.name == DBusError.accessDenied ? .permissionDenied(error.message) : .setupFailed("GetManagedObjects: \(error)"))
            case .success(let reply):
                let objects = Self.managedObjects(reply)
                guard let adapter = objects[adapterPath]?[BlueZNames.adapter] else {
                    setupFailed(.adapterNotFound(adapterName, available: Self.adapters(objects).map { String($0.path.split(separator: "/").last ?? "") }))
                    return
                }
                for (path, ifaces) in objects where path.hasPrefix(adapterPath + "/") {
                    if let device = ifaces[BlueZNames.device] { devices[path] = device }
                }
                if adapter["Powered"]?.boolValue == true {
                    register()
                } else if (1...Limits.autoPowerWaitRounds).contains(resetupAttempts) {
                    setupFailed(.setupFailed("\(adapterName) is not powered yet"))
                } else {
                    bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.properties, "Set",
                                  [.string(BlueZNames.adapter), .string("Powered"), .variant(.bool(true))], timeoutMs: 10_000) { [unowned self] result in
                        if case .failure(let error) = result {
                            setupFailed(error.name == DBusError.accessDenied
                                ? .permissionDenied("cannot power on \(adapterName): \(error.message)")
                                : .setupFailed("cannot power on \(adapterName): \(error)"))
                        } else {
                            register()
                        }
                    }
                }
            }
        }
    }

    private func register() {
        var pending = options.peripheral ? 2 : 0
        let finish: () -> Void = { [unowned self] in
            guard setupState == .running else { return }
            setupState = .done
            resetupAttempts = 0
            logger.notice("BlueZ ready", [("adapter", .string(adapterName)), ("peripheral", .bool(options.peripheral)), ("central", .bool(options.central))])
            startDiscovery()
        }
        guard pending > 0 else {
            finish()
            return
        }
        let step: (String, Result<[DBusValue], DBusError>) -> Void = { [unowned self] what, result in
            // AlreadyExists: this path is registered already (e.g. a re-setup racing a previous one): fine.
            if case .failure(let error) = result, error.name != BlueZNames.errorAlreadyExists {
                if error.name == DBusError.accessDenied {
                    setupFailed(.permissionDenied("\(what): \(error.message)"))
                } else {
                    setupFailed(.setupFailed("\(what): \(error)"))
                }
                return
            }
            pending -= 1
            if pending == 0 { finish() }
        }
        bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.gattManager, "RegisterApplication",
                      [.objectPath(tree.root), .properties([])]) { step("RegisterApplication", $0) }
        bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.advertisingManager, "RegisterAdvertisement",
                      [.objectPath(tree.advertisementPath), .properties([])]) { step("RegisterAdvertisement", $0) }
    }

    /// Unregister + register the advertisement: with BlueZ 5.66 and emulated controllers advertising was
    /// sometimes not resumed after a central disconnected (bletestbed README), leaving us unfindable.
    private func readvertise() {
        bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.advertisingManager, "UnregisterAdvertisement",
                      [.objectPath(tree.advertisementPath)]) { [unowned self] _ in
            bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.advertisingManager, "RegisterAdvertisement",
                          [.objectPath(tree.advertisementPath), .properties([])]) { [unowned self] result in
                if case .failure(let error) = result {
                    logger.warning("re-advertising failed", [("error", .string(error.description))])
                }
            }
        }
    }

    private func setupFailed(_ error: BlueZError) {
        guard setupState == .running else { return }
        setupState = .failed(error)
        // At start-up the error is thrown to the caller (one message); later it is retried and logged.
        if running { logger.warning("BlueZ setup failed; retrying", [("error", .string(error.description))]) }
        nextSetupAt = Self.nowMs() + Limits.resetupRetryMs
    }

    private func startDiscovery() {
        guard options.central else { return }
        let filter = DBusValue.properties([("UUIDs", .strings([options.serviceUUID])), ("Transport", .string("le"))])
        bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.adapter, "SetDiscoveryFilter", [filter]) { [unowned self] result in
            if case .failure(let error) = result { logger.warning("SetDiscoveryFilter failed", [("error", .string(error.description))]) }
            bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.adapter, "StartDiscovery") { [unowned self] result in
                if case .failure(let error) = result, error.name != BlueZNames.errorInProgress {
                    logger.warning("StartDiscovery failed", [("error", .string(error.description))])
                } else if discovery.startSucceeded(attemptsPending: !attempts.isEmpty) == .stopDiscovery {
                    bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.adapter, "StopDiscovery") { _ in }
                }
            }
        }
    }

    // MARK: Owner thread

    private func startThread() {
        if !OwnerThread.detach({ self.loop() }) { continuation.finish() }
    }

    private func loop() {
        running = true
        var lastTick: UInt64 = 0
        while true {
            guard bus.processAll() else {
                logger.error("D-Bus connection lost")
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
            var fds = [pollfd(fd: inbox.wake.readFD, events: Int16(POLLIN), revents: 0), pollfd(fd: bus.fd, events: bus.pollEvents, revents: 0)]
            var timeout = Limits.tickMs
            if let usec = bus.timeoutUsec { timeout = min(timeout, Int32(min(usec / 1_000, UInt64(Limits.tickMs)))) }
            guard poll(&fds, 2, timeout) >= 0 || errno == EINTR else { break }
            if fds[0].revents != 0 { inbox.wake.drain() }
        }
        bus.flush()
        for link in table.reset() { emit(.linkDown(link.id)) }
        inbox.ownerFinished()
        continuation.finish()
    }

    /// Graceful close: withdraw the advertisement and the GATT application and stop our discovery, so
    /// phones stop seeing a bridge that is going away and bluetoothd holds nothing of ours. Asynchronous calls
    /// (BlueZ may call back into our exported objects while it answers), pumped here for at most
    /// ``Limits/unregisterTimeoutMs``. Skipped when bluetoothd is gone or we never finished registering.
    private func unregister() {
        guard bluezPresent, setupState == .done else { return }
        var pending: [String] = []
        func call(_ interface: String, _ member: String, _ arguments: [DBusValue]) {
            pending.append(member)
            bus.callAsync(BlueZNames.service, adapterPath, interface, member, arguments,
                          timeoutMs: Limits.unregisterTimeoutMs) { [unowned self] result in
                if case .failure(let error) = result {
                    logger.warning("\(member) failed", [("error", .string(error.description))])
                }
                pending.removeAll { $0 == member }
            }
        }
        if options.peripheral {
            call(BlueZNames.advertisingManager, "UnregisterAdvertisement", [.objectPath(tree.advertisementPath)])
            call(BlueZNames.gattManager, "UnregisterApplication", [.objectPath(tree.root)])
        }
        if discovery.discovering { call(BlueZNames.adapter, "StopDiscovery", []) }
        let deadline = Self.nowMs() + Limits.unregisterTimeoutMs
        while !pending.isEmpty, Self.nowMs() < deadline {
            guard bus.processAll() else { break }
            var fds = [pollfd(fd: bus.fd, events: bus.pollEvents, revents: 0)]
            guard poll(&fds, 1, 50) >= 0 || errno == EINTR else { break }
        }
        logger.notice(pending.isEmpty ? "unregistered from BlueZ" : "BlueZ did not confirm the unregistration in time",
                      [("adapter", .string(adapterName)), ("pending", .array(pending.map { .string($0) }))])
    }

    private func tick(now: UInt64) {
        if !bluezPresent { return }
        if case .failed = setupState, now >= nextSetupAt {
            if resetupAttempts > 0 { resetupAttempts += 1 }
            runSetup()
            return
        }
        guard setupState == .done else { return }
        for link in table.expired(now: now) { dropLink(link, reason: "no valid announce") }
        for (device, phase) in attempts {
            if case .resolving(let deadline) = phase {
                if now >= deadline {
                    failAttempt(device, "services not resolved in time")
                } else {
                    checkResolved(device)
                }
            }
        }
        guard options.central else { return }
        for device in discovery.candidates(devices) where table.shouldConnect(device, now: now) {
            connect(device, now: now)
        }
    }

    // MARK: Outbound

    private func transmit(_ frames: [(MeshLinkID, [UInt8])]) {
        var notified: Set<[UInt8]> = []
        for (link, frame) in frames {
            switch table.outbound(frame, on: link) {
            case .send: write(frame, on: link, notified: &notified)
            case .held, .drop: break
            }
        }
    }

    private func write(_ frame: [UInt8], on link: MeshLinkID, notified: inout Set<[UInt8]>) {
        guard let info = table.links[link] else { return }
        switch info.role {
        case .central:
            guard let path = linkCharacteristic[link] else { return }
            bus.callAsync(BlueZNames.service, path, BlueZNames.gattCharacteristic, "WriteValue",
                          [.bytes(frame), .properties([("type", .string("command"))])], timeoutMs: 5_000) { [unowned self] result in
                if case .failure(let error) = result {
                    logger.debug("write failed", [("link", .string(link.description)), ("error", .string(error.description))])
                }
            }
        case .peripheral:
            guard notifying, let characteristic, notified.insert(frame).inserted else { return }
            characteristic.set("Value", .bytes(frame))
            bus.emitPropertiesChanged(characteristic, ["Value"])
        }
    }

    // MARK: Inbound

    private func receive(_ frame: [UInt8], on link: MeshLinkID) {
        switch table.inbound(frame, on: link, now: Self.nowMs()) {
        case .deliver(let flush):
            emit(.frame(link, frame))
            var notified: Set<[UInt8]> = []
            for held in flush where table.outbound(held, on: link) == .send { write(held, on: link, notified: &notified) }
        case .drop:
            break
        case .dropLink(let reason):
            if let info = table.links[link] { dropLink(info, reason: reason) }
        }
    }

    private func handleMethod(_ interface: String, _ member: String, _ arguments: [DBusValue]) -> Result<[DBusValue], DBusError> {
        switch (interface, member) {
        case (BlueZNames.gattCharacteristic, "ReadValue"):
            // Reads carry nothing useful (MESH-WIRE §10.1).
            return .success([.bytes([])])
        case (BlueZNames.gattCharacteristic, "WriteValue"):
            guard let value = arguments.first?.bytesValue else {
                return .failure(DBusError(name: BlueZNames.errorInvalidArguments, message: "value"))
            }
            let options = arguments.dropFirst().first?.dictionary ?? [:]
            let device = options["device"]?.stringValue ?? adapterPath + "/unknown-central"
            let valueLength = options["mtu"]?.integerValue.map { max(20, $0 - 3) } ?? Limits.defaultValueLength
            var link = table.link(role: .peripheral, device: device)?.id
            if link == nil {
                link = table.linkUp(role: .peripheral, device: device, mtu: valueLength, now: Self.nowMs())
                if let link {
                    logger.info("central connected", [("device", .string(device)), ("link", .string(link.description)), ("mtu", .integer(Int64(valueLength)))])
                    emit(.linkUp(link, mtu: valueLength))
                } else {
                    return .failure(DBusError(name: BlueZNames.errorFailed, message: "refused"))
                }
            } else if let link, let known = table.links[link], known.mtu != valueLength, options["mtu"] != nil {
                table.updateMTU(link, valueLength)
            }
            if let link { receive(value, on: link) }
            return .success([])
        case (BlueZNames.gattCharacteristic, "StartNotify"):
            notifying = true
            characteristic?.set("Notifying", .bool(true))
            return .success([])
        case (BlueZNames.gattCharacteristic, "StopNotify"):
            notifying = false
            characteristic?.set("Notifying", .bool(false))
            return .success([])
        case (BlueZNames.advertisement, "Release"):
            logger.notice("advertisement released by BlueZ")
            return .success([])
        default:
            return .failure(DBusError(name: BlueZNames.errorNotSupported, message: member))
        }
    }

    // MARK: Devices and the central role

    private func deviceChanged(_ path: String, _ properties: [String: DBusValue], replace: Bool) {
        guard path.hasPrefix(adapterPath + "/") else { return }
        if replace {
            devices[path] = properties
        } else {
            devices[path, default: [:]].merge(properties) { _, new in new }
        }
        if properties["Connected"]?.boolValue == false { deviceGone(path, reason: "disconnected") }
        if properties["ServicesResolved"]?.boolValue == true, case .resolving = attempts[path] { findCharacteristic(path) }
    }

    private func deviceGone(_ path: String, reason: String) {
        if options.peripheral, setupState == .done, table.links(of: path).contains(where: { $0.role == .peripheral }) {
            readvertise()
        }
        for link in table.links(of: path) {
            table.linkDown(link.id)
            if let characteristic = linkCharacteristic.removeValue(forKey: link.id) { centralCharacteristic[characteristic] = nil }
            logger.info("link down", [("link", .string(link.id.description)), ("role", .string(link.role.rawValue)), ("reason", .string(reason))])
            emit(.linkDown(link.id))
        }
        if attempts[path] != nil { failAttempt(path, reason) }
    }

    private func dropLink(_ link: BlueZLinkTable.Link, reason: String) {
        logger.warning("dropping misbehaving link", [("device", .string(link.device)), ("role", .string(link.role.rawValue)), ("reason", .string(reason))])
        table.linkDown(link.id)
        if let characteristic = linkCharacteristic.removeValue(forKey: link.id) { centralCharacteristic[characteristic] = nil }
        emit(.linkDown(link.id))
        bus.callAsync(BlueZNames.service, link.device, BlueZNames.device, "Disconnect") { _ in }
    }

    /// Connects, after stopping our discovery when it runs (`CentralDiscovery.planConnect`); discovery resumes
    /// when no attempt is left (`resumeDiscoveryIfIdle`).
    private func connect(_ device: String, now: UInt64) {
        table.connectStarted(device, now: now)
        attempts[device] = .connecting
        logger.info("connecting", [("device", .string(device))])
        guard discovery.planConnect() == .stopDiscoveryThenConnect else { return sendConnect(device) }
        bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.adapter, "StopDiscovery") { [unowned self] result in
            if case .failure(let error) = result { logger.debug("StopDiscovery failed", [("error", .string(error.description))]) }
            guard case .connecting = attempts[device] else { return }
            sendConnect(device)
        }
    }

    private func resumeDiscoveryIfIdle() {
        guard options.central,
            discovery.shouldResume(ready: setupState == .done && bluezPresent, attemptsPending: !attempts.isEmpty)
        else { return }
        startDiscovery()
    }

    private func sendConnect(_ device: String) {
        bus.callAsync(BlueZNames.service, device, BlueZNames.device, "Connect", timeoutMs: Limits.connectTimeoutMs) { [unowned self] result in
            guard case .connecting = attempts[device] else { return }
            switch result {
            case .failure(let error) where error.name != BlueZNames.errorAlreadyExists && error.name != BlueZNames.errorInProgress:
                failAttempt(device, "Connect: \(error)")
            default:
                attempts[device] = .resolving(deadline: Self.nowMs() + Limits.resolveTimeoutMs)
                checkResolved(device)
            }
        }
    }

    /// BlueZ 5.66 may never signal Connected/ServicesResolved (bletestbed README item 14): read them.
    private func checkResolved(_ device: String) {
        bus.callAsync(BlueZNames.service, device, BlueZNames.properties, "GetAll", [.string(BlueZNames.device)], timeoutMs: 5_000) {
            [unowned self] result in
            guard case .resolving = attempts[device], case .success(let reply) = result, let props = reply.first?.dictionary else { return }
            devices[device, default: [:]].merge(props) { _, new in new }
            if props["ServicesResolved"]?.boolValue == true { findCharacteristic(device) }
        }
    }

    private func findCharacteristic(_ device: String) {
        attempts[device] = .subscribing
        bus.callAsync(BlueZNames.service, "/", BlueZNames.objectManager, "GetManagedObjects", timeoutMs: 10_000) { [unowned self] result in
            guard case .subscribing = attempts[device] else { return }
            guard case .success(let reply) = result else { return failAttempt(device, "GetManagedObjects failed") }
            let objects = Self.managedObjects(reply)
            let match = objects.filter { path, ifaces in
                guard path.hasPrefix(device + "/"), let chr = ifaces[BlueZNames.gattCharacteristic],
                    chr["UUID"]?.stringValue?.lowercased() == BitchatGATT.characteristicUUID,
                    let service = chr["Service"]?.stringValue
                else { return false }
                return objects[service]?[BlueZNames.gattService]?["UUID"]?.stringValue?.lowercased() == options.serviceUUID
            }.sorted { $0.key < $1.key }.first
            guard let (path, ifaces) = match else { return failAttempt(device, "no bitchat characteristic") }
            let mtu = ifaces[BlueZNames.gattCharacteristic]?["MTU"]?.integerValue
            bus.callAsync(BlueZNames.service, path, BlueZNames.gattCharacteristic, "StartNotify", timeoutMs: 10_000) { [unowned self] result in
                guard case .subscribing = attempts[device] else { return }
                if case .failure(let error) = result, error.name != BlueZNames.errorInProgress {
                    return failAttempt(device, "StartNotify: \(error)")
                }
                attempts[device] = nil
                resumeDiscoveryIfIdle()
                let valueLength = mtu.map { max(20, $0 - 3) } ?? Limits.defaultValueLength
                guard let link = table.linkUp(role: .central, device: device, mtu: valueLength, now: Self.nowMs()) else {
                    bus.callAsync(BlueZNames.service, device, BlueZNames.device, "Disconnect") { _ in }
                    return
                }
                centralCharacteristic[path] = link
                linkCharacteristic[link] = path
                logger.info("connected to peripheral", [("device", .string(device)), ("link", .string(link.description)), ("mtu", .integer(Int64(valueLength)))])
                emit(.linkUp(link, mtu: valueLength))
            }
        }
    }

    private func failAttempt(_ device: String, _ reason: String) {
        guard attempts.removeValue(forKey: device) != nil else { return }
        let now = Self.nowMs()
        table.connectFailed(device, now: now)
        logger.info("connect failed", [("device", .string(device)), ("reason", .string(reason)),
                                       ("retryMs", .integer(Int64(table.retryDelay(device, now: now))))])
        bus.callAsync(BlueZNames.service, device, BlueZNames.device, "Disconnect") { _ in }
        resumeDiscoveryIfIdle()
    }

    // MARK: bluetoothd restarts

    private func bluezOwnerChanged(newOwner: String) {
        if newOwner.isEmpty {
            logger.warning("bluetoothd went away; waiting for it to return")
            bluezPresent = false
            for link in table.reset() {
                emit(.linkDown(link.id))
            }
            attempts = [:]
            centralCharacteristic = [:]
            linkCharacteristic = [:]
            devices = [:]
            discovery.reset()
            notifying = false
            setupState = .idle
        } else {
            logger.notice("bluetoothd is back; registering again")
            bluezPresent = true
            resetupAttempts = 1
            setupState = .failed(.bluezNotRunning)
            nextSetupAt = Self.nowMs()
        }
    }

    static func nowMs() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) * 1_000 + UInt64(spec.tv_nsec) / 1_000_000
    }
}
