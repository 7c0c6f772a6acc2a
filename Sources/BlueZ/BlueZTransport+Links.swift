import BotSupport
import Mesh
import MeshRuntime

/// Frames on both GATT roles' links, and the central role's connect sequence (its decisions are
/// ``CentralConnector``'s; this file makes the D-Bus calls and feeds back the replies).
extension BlueZTransport {
    // MARK: Outbound

    func transmit(_ frames: [(MeshLinkID, [UInt8])]) {
        var notified: Set<[UInt8]> = []
        for (link, frame) in frames {
            switch table.outbound(frame, on: link) {
            case .send: write(frame, on: link, notified: &notified)
            case .held: break
            case .drop(let reason): events.countOutboundDrop(reason, on: link)
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

    func receive(_ frame: [UInt8], on link: MeshLinkID) {
        switch table.inbound(frame, on: link, now: Self.nowMs()) {
        case .deliver(let flush):
            events.frame(link, frame)
            var notified: Set<[UInt8]> = []
            for held in flush where table.outbound(held, on: link) == .send { write(held, on: link, notified: &notified) }
        case .drop(let reason):
            events.countDrop(reason, on: link)
        case .dropLink(let reason):
            if let info = table.links[link] { dropLink(info, reason: reason.rawValue) }
        }
    }

    func handleMethod(_ interface: String, _ member: String, _ arguments: [DBusValue]) -> Result<[DBusValue], DBusError> {
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
                    events.linkUp(link, mtu: valueLength)
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

    // MARK: Devices

    func deviceChanged(_ path: String, _ properties: [String: DBusValue], replace: Bool) {
        guard path.hasPrefix(adapterPath + "/") else { return }
        if replace {
            devices[path] = properties
        } else {
            devices[path, default: [:]].merge(properties) { _, new in new }
        }
        if properties["Connected"]?.boolValue == false { deviceGone(path, reason: "disconnected") }
        if properties["ServicesResolved"]?.boolValue == true { perform(connector.servicesResolved(path)) }
    }

    func deviceGone(_ path: String, reason: String) {
        if options.peripheral, setupState == .done, table.links(of: path).contains(where: { $0.role == .peripheral }) {
            readvertise()
        }
        for link in table.links(of: path) {
            table.linkDown(link.id)
            if let characteristic = linkCharacteristic.removeValue(forKey: link.id) { centralCharacteristic[characteristic] = nil }
            logger.info("link down", [("link", .string(link.id.description)), ("role", .string(link.role.rawValue)), ("reason", .string(reason))])
            events.linkDown(link.id)
        }
        perform(connector.deviceGone(path, reason: reason))
    }

    func dropLink(_ link: BlueZLinkTable.Link, reason: String) {
        logger.warning("dropping misbehaving link", [("device", .string(link.device)), ("role", .string(link.role.rawValue)), ("reason", .string(reason))])
        table.linkDown(link.id)
        if let characteristic = linkCharacteristic.removeValue(forKey: link.id) { centralCharacteristic[characteristic] = nil }
        events.linkDown(link.id)
        bus.callAsync(BlueZNames.service, link.device, BlueZNames.device, "Disconnect") { _ in }
    }

    // MARK: The central role's connect sequence

    /// Connects, after stopping our discovery when it runs (`CentralDiscovery.planConnect`); discovery resumes
    /// when no attempt is left (`resumeDiscoveryIfIdle`).
    func connect(_ device: String, now: UInt64) {
        guard connector.phase(of: device) == nil else { return }
        table.connectStarted(device, now: now)
        logger.info("connecting", [("device", .string(device))])
        perform(connector.begin(device, plan: discovery.planConnect()))
    }

    private func resumeDiscoveryIfIdle() {
        guard options.central,
            discovery.shouldResume(ready: setupState == .done && bluezPresent, attemptsPending: connector.hasAttempts)
        else { return }
        startDiscovery()
    }

    /// Makes the calls the connector asks for; each reply goes back to it.
    func perform(_ steps: [CentralConnector.Step]) {
        for step in steps {
            switch step {
            case .stopDiscovery(let device):
                bus.callAsync(BlueZNames.service, adapterPath, BlueZNames.adapter, "StopDiscovery") { [unowned self] result in
                    if case .failure(let error) = result { logger.debug("StopDiscovery failed", [("error", .string(error.description))]) }
                    perform(connector.discoveryStopped(device))
                }
            case .connect(let device):
                bus.callAsync(BlueZNames.service, device, BlueZNames.device, "Connect", timeoutMs: Limits.connectTimeoutMs) { [unowned self] result in
                    perform(connector.connectReplied(device, error: result.failure, now: Self.nowMs()))
                }
            case .readProperties(let device):
                bus.callAsync(BlueZNames.service, device, BlueZNames.properties, "GetAll", [.string(BlueZNames.device)], timeoutMs: 5_000) {
                    [unowned self] result in
                    guard case .success(let reply) = result, let props = reply.first?.dictionary else { return }
                    if connector.phase(of: device) != nil { devices[device, default: [:]].merge(props) { _, new in new } }
                    perform(connector.propertiesRead(device, servicesResolved: props["ServicesResolved"]?.boolValue == true))
                }
            case .listObjects(let device):
                bus.callAsync(BlueZNames.service, "/", BlueZNames.objectManager, "GetManagedObjects", timeoutMs: 10_000) { [unowned self] result in
                    perform(connector.objectsListed(device, result.success.map(Self.managedObjects)))
                }
            case .startNotify(let device, let path):
                bus.callAsync(BlueZNames.service, path, BlueZNames.gattCharacteristic, "StartNotify", timeoutMs: 10_000) { [unowned self] result in
                    perform(connector.notifyReplied(device, error: result.failure))
                }
            case .linkUp(let device, let path, let mtu):
                linkUp(device: device, characteristic: path, mtu: mtu)
            case .failed(let device, let reason):
                let now = Self.nowMs()
                table.connectFailed(device, now: now)
                logger.info("connect failed", [("device", .string(device)), ("reason", .string(reason)),
                                               ("retryMs", .integer(Int64(table.retryDelay(device, now: now))))])
                bus.callAsync(BlueZNames.service, device, BlueZNames.device, "Disconnect") { _ in }
                resumeDiscoveryIfIdle()
            }
        }
    }

    private func linkUp(device: String, characteristic path: String, mtu: Int?) {
        resumeDiscoveryIfIdle()
        let valueLength = mtu.map { max(20, $0 - 3) } ?? Limits.defaultValueLength
        guard let link = table.linkUp(role: .central, device: device, mtu: valueLength, now: Self.nowMs()) else {
            bus.callAsync(BlueZNames.service, device, BlueZNames.device, "Disconnect") { _ in }
            return
        }
        centralCharacteristic[path] = link
        linkCharacteristic[link] = path
        logger.info("connected to peripheral", [("device", .string(device)), ("link", .string(link.description)), ("mtu", .integer(Int64(valueLength)))])
        events.linkUp(link, mtu: valueLength)
    }
}

extension Result {
    var success: Success? { if case .success(let value) = self { value } else { nil } }
    var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}
