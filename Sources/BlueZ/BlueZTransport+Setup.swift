import BotSupport
import Mesh
#if canImport(Glibc)
import Glibc
import MeshRuntime
#endif

/// Registration with BlueZ, and what makes it go away and come back: bluetoothd restarts, our adapter
/// powered off and on, removed and re-added.
extension BlueZTransport {
    // MARK: Signals and exported objects

    func subscribeSignals() throws(DBusError) {
        try bus.matchSignal(sender: nil, path: nil, interface: BlueZNames.objectManager, member: "InterfacesAdded") { [unowned self] _, _, args in
            guard let path = args.first?.stringValue, path.hasPrefix("/org/bluez/"), let ifaces = args.dropFirst().first?.dictionary else { return }
            if let device = ifaces[BlueZNames.device]?.dictionary {
                deviceChanged(path, device, replace: true)
                discovery.deviceSignal(path, device)
            }
            if path == adapterPath, ifaces[BlueZNames.adapter] != nil { adapterAdded() }
        }
        try bus.matchSignal(sender: nil, path: nil, interface: BlueZNames.objectManager, member: "InterfacesRemoved") { [unowned self] _, _, args in
            guard let path = args.first?.stringValue, path.hasPrefix("/org/bluez/"), let removed = args.dropFirst().first?.stringArray else { return }
            if removed.contains(BlueZNames.device) {
                devices[path] = nil
                discovery.deviceRemoved(path)
                deviceGone(path, reason: "removed")
            }
            if path == adapterPath, removed.contains(BlueZNames.adapter) { adapterLost(reason: "removed") }
        }
        try bus.matchSignal(sender: nil, path: nil, interface: BlueZNames.properties, member: "PropertiesChanged") { [unowned self] path, _, args in
            guard path.hasPrefix("/org/bluez/"), let iface = args.first?.stringValue, let changed = args.dropFirst().first?.dictionary else { return }
            if iface == BlueZNames.device {
                deviceChanged(path, changed, replace: false)
                discovery.deviceSignal(path, changed)
            } else if iface == BlueZNames.gattCharacteristic, let value = changed["Value"]?.bytesValue, let link = centralCharacteristic[path] {
                receive(value, on: link)
            } else if iface == BlueZNames.adapter, path == adapterPath, let powered = changed["Powered"]?.boolValue {
                if powered { adapterPoweredOn() } else { adapterLost(reason: "powered off") }
            }
        }
        try bus.matchSignal(sender: BlueZNames.dbus, path: "/org/freedesktop/DBus", interface: BlueZNames.dbus, member: "NameOwnerChanged") {
            [unowned self] _, _, args in
            guard args.count == 3, args[0].stringValue == BlueZNames.service else { return }
            bluezOwnerChanged(newOwner: args[2].stringValue ?? "")
        }
    }

    func exportObjects() throws(DBusError) {
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

    // MARK: Setup

    /// Adapter lookup → power → RegisterApplication + RegisterAdvertisement → discovery. All asynchronous.
    func runSetup() {
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
            if running { events.countReconnect() }
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
    func readvertise() {
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

    func startDiscovery() {
        guard options.central else { return }
        let filter = DBusValue.properties([("UUIDs", .strings([options.serviceUUID])), ("Transport", .string("le"))])
        bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.adapter, "SetDiscoveryFilter", [filter]) { [unowned self] result in
            if case .failure(let error) = result { logger.warning("SetDiscoveryFilter failed", [("error", .string(error.description))]) }
            bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.adapter, "StartDiscovery") { [unowned self] result in
                if case .failure(let error) = result, error.name != BlueZNames.errorInProgress {
                    logger.warning("StartDiscovery failed", [("error", .string(error.description))])
                } else if discovery.startSucceeded(attemptsPending: connector.hasAttempts) == .stopDiscovery {
                    bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.adapter, "StopDiscovery") { _ in }
                }
            }
        }
    }

    /// Graceful close: withdraw the advertisement and the GATT application and stop our discovery, so
    /// phones stop seeing a bridge that is going away and bluetoothd holds nothing of ours. Asynchronous calls
    /// (BlueZ may call back into our exported objects while it answers), pumped here for at most
    /// ``Limits/unregisterTimeoutMs``. Skipped when bluetoothd is gone or we never finished registering.
    func unregister() {
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

    // MARK: bluetoothd and the adapter going away

    /// Everything tied to a live adapter ends: links, connect attempts, discovery, notify subscribers.
    private func dropAdapterState() {
        for link in table.reset() {
            events.linkDown(link.id)
        }
        connector.reset()
        centralCharacteristic = [:]
        linkCharacteristic = [:]
        devices = [:]
        discovery.reset()
        notifying = false
    }

    func bluezOwnerChanged(newOwner: String) {
        if newOwner.isEmpty {
            logger.warning("bluetoothd went away; waiting for it to return")
            bluezPresent = false
            dropAdapterState()
            setupState = .idle
        } else {
            logger.notice("bluetoothd is back; registering again")
            bluezPresent = true
            adapterPresent = true
            adapterPowered = true
            resetupAttempts = 1
            scheduleSetup()
        }
    }

    /// Our adapter was powered off or removed: BlueZ drops its connections, advertising and discovery; we
    /// report down and wait (the operator switched it off — we do not power it back).
    private func adapterLost(reason: String) {
        if reason == "removed" { adapterPresent = false } else { adapterPowered = false }
        guard bluezPresent else { return }
        logger.warning("Bluetooth adapter unavailable; waiting for it", [("adapter", .string(adapterName)), ("reason", .string(reason))])
        dropAdapterState()
        setupState = .idle
    }

    /// Our adapter's object is back (a re-plugged controller): set up again, leaving powering to
    /// bluetoothd's AutoEnable for a few rounds as after a restart.
    private func adapterAdded() {
        guard !adapterPresent else { return }
        adapterPresent = true
        guard bluezPresent else { return }
        logger.notice("Bluetooth adapter is back; registering", [("adapter", .string(adapterName))])
        adapterPowered = true
        resetupAttempts = 1
        scheduleSetup()
    }

    /// Our adapter was powered on again after it had been off: register again.
    private func adapterPoweredOn() {
        guard !adapterPowered else { return }
        adapterPowered = true
        guard bluezPresent, adapterPresent else { return }
        logger.notice("Bluetooth adapter powered on; registering", [("adapter", .string(adapterName))])
        resetupAttempts = 0
        scheduleSetup()
    }

    private func scheduleSetup() {
        setupState = .pending
        nextSetupAt = Self.nowMs()
    }
}
