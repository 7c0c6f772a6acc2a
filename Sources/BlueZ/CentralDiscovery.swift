/// The central role's discovery decisions as data: which devices are connect candidates, and when our
/// LE discovery must be stopped or resumed around a connect. No bus: `BlueZTransport` feeds it what
/// bluetoothd reports and carries out the actions it returns, so both testbed findings are unit-tested.
///
/// Two facts of BlueZ 5.66 / Linux 6.1 that it encodes (both measured in `tools/bletestbed`):
/// - **Stale UUIDs.** bluetoothd ignores advertised service UUIDs once a device object has resolved GATT
///   services (`device_add_eir_uuids`), so a phone that earlier connected to us as a central keeps `UUIDs` =
///   its old GATT database until the object expires (`TemporaryTimeout`, 30 s, restarted by every
///   advertisement). A device that bluetoothd reported *from an advertisement* (a signal carrying `RSSI`)
///   while our discovery — filtered by the bitchat service UUID — was running is therefore a candidate too.
///   bluetoothd matched the raw advertisement against our filter before reporting it; the only false
///   positive is another client's broader discovery at the same moment, which costs one failed connect and
///   then the link table's backoff. Without this rule the testbed's connect took ~55 s instead of 0.3 s.
/// - **Connect waits for discovery.** The kernel starts a pending LE connection only after an active
///   discovery's full window (10.24 s). So discovery is stopped before `Device1.Connect` and resumed once
///   no connect attempt is left (10.5 s → 0.9 s in the testbed).
struct CentralDiscovery: Sendable {
    /// What to do with a `Device1.Connect` we are about to make.
    enum ConnectPlan: Equatable, Sendable {
        /// Discovery is off: connect now.
        case connect
        /// Discovery is on: call `StopDiscovery`, then connect (if the attempt is still wanted).
        case stopDiscoveryThenConnect
    }

    /// What to do when our `StartDiscovery` call returned successfully.
    enum StartOutcome: Equatable, Sendable {
        /// Discovery is running and counts for candidates.
        case discovering
        /// A connect began while the call was in flight; it needs discovery off.
        case stopDiscovery
    }

    let adapterPath: String
    /// Lowercase 128-bit service UUID string, as `SetDiscoveryFilter` was given it.
    let serviceUUID: String
    /// True from our `StartDiscovery`'s success until we stop it or bluetoothd goes away.
    private(set) var discovering = false
    /// Devices bluetoothd reported from an advertisement while our filtered discovery was running.
    private(set) var seenByDiscovery: Set<String> = []

    init(adapterPath: String, serviceUUID: String) {
        self.adapterPath = adapterPath
        self.serviceUUID = serviceUUID.lowercased()
    }

    private func isOurDevice(_ path: String) -> Bool { path.hasPrefix(adapterPath + "/dev_") }

    /// An `InterfacesAdded` or `PropertiesChanged` for a `Device1` (the properties it carried).
    mutating func deviceSignal(_ path: String, _ properties: [String: DBusValue]) {
        guard discovering, properties["RSSI"]?.integerValue != nil, isOurDevice(path) else { return }
        seenByDiscovery.insert(path)
    }

    mutating func deviceRemoved(_ path: String) {
        seenByDiscovery.remove(path)
    }

    /// Devices under our adapter that offer the bitchat service, strongest signal first (ties by path, so
    /// the order is stable).
    func candidates(_ devices: [String: [String: DBusValue]]) -> [String] {
        var found: [(path: String, rssi: Int)] = []
        for (path, props) in devices where isOurDevice(path) && offersService(path, props) {
            found.append((path, props["RSSI"]?.integerValue ?? -127))
        }
        found.sort { $0.rssi != $1.rssi ? $0.rssi > $1.rssi : $0.path < $1.path }
        return found.map(\.path)
    }

    private func offersService(_ path: String, _ props: [String: DBusValue]) -> Bool {
        if seenByDiscovery.contains(path) { return true }
        if let uuids = props["UUIDs"]?.stringArray, uuids.contains(where: { $0.lowercased() == serviceUUID }) { return true }
        guard let serviceData = props["ServiceData"]?.dictionary else { return false }
        return serviceData.keys.contains { $0.lowercased() == serviceUUID }
    }

    mutating func startSucceeded(attemptsPending: Bool) -> StartOutcome {
        guard !attemptsPending else { return .stopDiscovery }
        discovering = true
        return .discovering
    }

    mutating func planConnect() -> ConnectPlan {
        guard discovering else { return .connect }
        discovering = false
        return .stopDiscoveryThenConnect
    }

    /// Whether to start discovery again after an attempt ended (connected or failed).
    func shouldResume(ready: Bool, attemptsPending: Bool) -> Bool {
        ready && !discovering && !attemptsPending
    }

    /// bluetoothd went away: its discovery and device objects are gone with it.
    mutating func reset() {
        discovering = false
        seenByDiscovery = []
    }
}
