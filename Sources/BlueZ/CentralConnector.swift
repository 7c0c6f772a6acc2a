/// The central role's connect sequence as data, one attempt per device:
///
/// ```
/// [StopDiscovery] → Device1.Connect → services resolved → the bitchat characteristic found
///                 → StartNotify → link up
/// ```
///
/// No bus, no clock: `BlueZTransport` makes the D-Bus call each ``Step`` names and feeds the reply back
/// (`discoveryStopped`, `connectReplied`, …), passing monotonic `now` where a deadline matters. A reply for
/// a device whose attempt is gone or in another phase is ignored, so late answers never revive an attempt.
///
/// Facts it encodes (BlueZ 5.66, `tools/bletestbed`):
/// - `org.bluez.Error.AlreadyExists` / `InProgress` to Connect mean "connected already" / "on its way":
///   the sequence continues; `InProgress` to StartNotify likewise.
/// - bluetoothd may never signal `Connected`/`ServicesResolved` for an emulated controller (bletestbed
///   README item 14), so while resolving, every tick reads the device's properties again, until
///   `resolveTimeoutMs` after Connect's reply.
struct CentralConnector: Sendable {
    enum Phase: Equatable, Sendable {
        /// Waiting for our StopDiscovery (the kernel delays a connect behind an active discovery).
        case stoppingDiscovery
        case connecting
        case resolving(deadline: UInt64)
        /// Listing the objects to find the bitchat characteristic.
        case listing
        case subscribing(characteristic: String, mtu: Int?)
    }

    /// What the transport must do next.
    enum Step: Equatable, Sendable {
        case stopDiscovery(device: String)
        case connect(device: String)
        /// Properties.GetAll(Device1): answer with ``CentralConnector/propertiesRead(_:servicesResolved:)``.
        case readProperties(device: String)
        /// ObjectManager.GetManagedObjects: answer with ``CentralConnector/objectsListed(_:_:)``.
        case listObjects(device: String)
        case startNotify(device: String, characteristic: String)
        /// Subscribed: the link is up (value length from the characteristic's MTU when BlueZ reports one).
        case linkUp(device: String, characteristic: String, mtu: Int?)
        /// The attempt ended: back off, disconnect, resume discovery if nothing else is pending.
        case failed(device: String, reason: String)
    }

    /// From Connect's reply to a subscribed characteristic.
    let resolveTimeoutMs: UInt64
    let serviceUUID: String
    private(set) var attempts: [String: Phase] = [:]

    init(resolveTimeoutMs: UInt64, serviceUUID: String) {
        self.resolveTimeoutMs = resolveTimeoutMs
        self.serviceUUID = serviceUUID.lowercased()
    }

    var hasAttempts: Bool { !attempts.isEmpty }

    func phase(of device: String) -> Phase? { attempts[device] }

    /// Starts an attempt; `plan` is the discovery's answer (``CentralDiscovery/planConnect()``).
    mutating func begin(_ device: String, plan: CentralDiscovery.ConnectPlan) -> [Step] {
        guard attempts[device] == nil else { return [] }
        switch plan {
        case .connect:
            attempts[device] = .connecting
            return [.connect(device: device)]
        case .stopDiscoveryThenConnect:
            attempts[device] = .stoppingDiscovery
            return [.stopDiscovery(device: device)]
        }
    }

    /// StopDiscovery answered (success or not: the connect goes ahead either way).
    mutating func discoveryStopped(_ device: String) -> [Step] {
        guard attempts[device] == .stoppingDiscovery else { return [] }
        attempts[device] = .connecting
        return [.connect(device: device)]
    }

    mutating func connectReplied(_ device: String, error: DBusError?, now: UInt64) -> [Step] {
        guard attempts[device] == .connecting else { return [] }
        if let error, error.name != BlueZNames.errorAlreadyExists, error.name != BlueZNames.errorInProgress {
            return fail(device, "Connect: \(error)")
        }
        attempts[device] = .resolving(deadline: now + resolveTimeoutMs)
        return [.readProperties(device: device)]
    }

    /// The device's properties as read (a failed read is `servicesResolved: false`; the next tick reads again).
    mutating func propertiesRead(_ device: String, servicesResolved: Bool) -> [Step] {
        servicesResolved ? self.servicesResolved(device) : []
    }

    /// `ServicesResolved` became true (a signal or a read).
    mutating func servicesResolved(_ device: String) -> [Step] {
        guard case .resolving = attempts[device] else { return [] }
        attempts[device] = .listing
        return [.listObjects(device: device)]
    }

    /// GetManagedObjects answered: `objects` as ``BlueZTransport/managedObjects(_:)`` parses them, nil when
    /// the call failed.
    mutating func objectsListed(_ device: String, _ objects: [String: [String: [String: DBusValue]]]?) -> [Step] {
        guard attempts[device] == .listing else { return [] }
        guard let objects else { return fail(device, "GetManagedObjects failed") }
        guard let found = bitchatCharacteristic(of: device, in: objects) else { return fail(device, "no bitchat characteristic") }
        attempts[device] = .subscribing(characteristic: found.path, mtu: found.mtu)
        return [.startNotify(device: device, characteristic: found.path)]
    }

    mutating func notifyReplied(_ device: String, error: DBusError?) -> [Step] {
        guard case .subscribing(let characteristic, let mtu) = attempts[device] else { return [] }
        if let error, error.name != BlueZNames.errorInProgress { return fail(device, "StartNotify: \(error)") }
        attempts[device] = nil
        return [.linkUp(device: device, characteristic: characteristic, mtu: mtu)]
    }

    /// Deadlines and re-reads of devices still resolving (in path order, so runs are reproducible).
    mutating func tick(now: UInt64) -> [Step] {
        var steps: [Step] = []
        for device in attempts.keys.sorted() {
            guard case .resolving(let deadline) = attempts[device] else { continue }
            steps += now >= deadline ? fail(device, "services not resolved in time") : [.readProperties(device: device)]
        }
        return steps
    }

    /// The device disconnected or its object was removed.
    mutating func deviceGone(_ device: String, reason: String) -> [Step] {
        attempts[device] == nil ? [] : fail(device, reason)
    }

    /// bluetoothd went away: every attempt went with it (nothing to undo on its side).
    mutating func reset() {
        attempts = [:]
    }

    private mutating func fail(_ device: String, _ reason: String) -> [Step] {
        attempts[device] = nil
        return [.failed(device: device, reason: reason)]
    }

    /// The first (by path) characteristic under `device` with the bitchat characteristic UUID whose service
    /// has our service UUID, with its `MTU` property when BlueZ reports one.
    func bitchatCharacteristic(of device: String, in objects: [String: [String: [String: DBusValue]]]) -> (path: String, mtu: Int?)? {
        let match = objects.filter { path, interfaces in
            guard path.hasPrefix(device + "/"), let characteristic = interfaces[BlueZNames.gattCharacteristic],
                characteristic["UUID"]?.stringValue?.lowercased() == BitchatGATT.characteristicUUID,
                let service = characteristic["Service"]?.stringValue
            else { return false }
            return objects[service]?[BlueZNames.gattService]?["UUID"]?.stringValue?.lowercased() == serviceUUID
        }.min { $0.key < $1.key }
        guard let (path, interfaces) = match else { return nil }
        return (path, interfaces[BlueZNames.gattCharacteristic]?["MTU"]?.integerValue)
    }
}
