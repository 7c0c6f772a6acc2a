/// What BlueZ shows on the system bus, read once: whether it runs, whether the D-Bus policy lets this user talk to
/// it, and its adapters. What ``BlueZTransport/start(options:logger:)`` checks before it registers anything, and
/// what `bitchat-bridge doctor` reports without registering anything.
public struct BlueZSurvey: Sendable {
    /// One adapter as BlueZ describes it (`org.bluez.Adapter1` and the interfaces on its object).
    public struct Adapter: Sendable, Equatable {
        /// `hci0`, …
        public let name: String
        public let path: String
        public let powered: Bool
        /// `PowerState` (BlueZ ≥ 5.64: `on`, `off`, `off-enabling`, `on-disabling`, `off-blocked` = rfkill), when sent.
        public let powerState: String?
        /// `Roles` (BlueZ ≥ 5.59: `central`, `peripheral`, `central-peripheral`), when sent.
        public let roles: [String]?
        /// The adapter object carries `LEAdvertisingManager1`: BlueZ can advertise on it over LE, which the
        /// peripheral role needs (BlueZ adds it only for LE-capable controllers).
        public let offersLEAdvertising: Bool

        /// Both roles the bridge plays over LE: LE advertising, and `Roles` (when BlueZ sends it) lists central and
        /// peripheral.
        public var supportsBothLERoles: Bool {
            offersLEAdvertising && (roles.map { $0.contains("central") && $0.contains("peripheral") } ?? true)
        }
    }

    /// Adapters sorted as BlueZ numbers them (hci2 before hci10).
    public let adapters: [Adapter]
    let objects: [String: [String: [String: DBusValue]]]

    /// Reads BlueZ's objects over `bus`; throws what an operator fixes (no bus, no bluetoothd, the D-Bus policy).
    static func read(_ bus: SDBusConnection) throws(BlueZError) -> BlueZSurvey {
        let owned: [DBusValue]
        do throws(DBusError) {
            owned = try bus.call(BlueZNames.dbus, "/org/freedesktop/DBus", BlueZNames.dbus, "NameHasOwner", [.string(BlueZNames.service)])
        } catch {
            throw error.name == DBusError.accessDenied ? .permissionDenied(error.message) : .busUnavailable(error.description)
        }
        guard owned.first?.boolValue == true else { throw .bluezNotRunning }
        let objects: [String: [String: [String: DBusValue]]]
        do throws(DBusError) {
            objects = BlueZTransport.managedObjects(try bus.call(BlueZNames.service, "/", BlueZNames.objectManager, "GetManagedObjects"))
        } catch {
            throw error.name == DBusError.accessDenied ? .permissionDenied(error.message) : .setupFailed(error.description)
        }
        return BlueZSurvey(objects: objects)
    }

    /// Opens the system bus (`DBUS_SYSTEM_BUS_ADDRESS` honoured) and reads BlueZ's objects, registering nothing.
    public static func read() throws(BlueZError) -> BlueZSurvey { try read(openSystemBus()) }

    static func openSystemBus() throws(BlueZError) -> SDBusConnection {
        do {
            return try SDBusConnection.openSystem()
        } catch {
            throw .busUnavailable(error.message)
        }
    }

    init(objects: [String: [String: [String: DBusValue]]]) {
        self.objects = objects
        adapters = BlueZTransport.adapters(objects).map { found in
            let interfaces = objects[found.path] ?? [:]
            let adapter = interfaces[BlueZNames.adapter] ?? [:]
            return Adapter(
                name: String(found.path.split(separator: "/").last ?? ""), path: found.path, powered: found.powered,
                powerState: adapter["PowerState"]?.stringValue, roles: adapter["Roles"]?.stringArray,
                offersLEAdvertising: interfaces[BlueZNames.advertisingManager] != nil)
        }
    }

    /// The adapter `run` would use for `name` (nil: the first powered one, else the first), as the transport chooses.
    public func adapter(named name: String?) throws(BlueZError) -> Adapter {
        let path = try BlueZTransport.chooseAdapter(objects, named: name)
        guard let adapter = adapters.first(where: { $0.path == path }) else { throw .noAdapter }
        return adapter
    }
}
