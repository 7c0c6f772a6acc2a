/// The bitchat GATT identifiers (MESH-WIRE §10.1) and the BlueZ D-Bus vocabulary, written down once
/// (STYLE §6, bleak's `defs.py` habit).
public enum BitchatGATT {
    /// Release service UUID (App Store iOS, all Android).
    public static let serviceUUID = "f47b5e2d-4a9e-4c5a-9b3f-8e1d2c3a4b5c"
    /// iOS DEBUG ("testnet") builds.
    public static let debugServiceUUID = "f47b5e2d-4a9e-4c5a-9b3f-8e1d2c3a4b5a"
    public static let characteristicUUID = "a1b2c3d4-e5f6-4a5b-8c9d-0e1f2a3b4c5d"
    /// read, write, write-without-response, notify (MESH-WIRE §10.1); BlueZ adds the CCCD for notify.
    public static let characteristicFlags = ["read", "write", "write-without-response", "notify"]
}

enum BlueZNames {
    static let service = "org.bluez"
    static let adapter = "org.bluez.Adapter1"
    static let device = "org.bluez.Device1"
    static let gattManager = "org.bluez.GattManager1"
    static let gattService = "org.bluez.GattService1"
    static let gattCharacteristic = "org.bluez.GattCharacteristic1"
    static let advertisingManager = "org.bluez.LEAdvertisingManager1"
    static let advertisement = "org.bluez.LEAdvertisement1"
    static let objectManager = "org.freedesktop.DBus.ObjectManager"
    static let properties = "org.freedesktop.DBus.Properties"
    static let dbus = "org.freedesktop.DBus"
    static let errorNotSupported = "org.bluez.Error.NotSupported"
    static let errorFailed = "org.bluez.Error.Failed"
    static let errorInvalidArguments = "org.bluez.Error.InvalidArguments"
    static let errorAlreadyExists = "org.bluez.Error.AlreadyExists"
    static let errorInProgress = "org.bluez.Error.InProgress"
}

/// The objects the peripheral role exports, as data (STYLE §6): one ObjectManager root, one primary
/// service, one characteristic below it (back-pointer `Service`, the service lists it in `Characteristics`),
/// and the LE advertisement as a separate object outside the GATT tree (the testbed found that mixing them
/// confuses the advertisement's interface name). Unit-tested without a bus; ``BlueZTransport`` exports it.
public struct GattObjectTree: Sendable, Equatable {
    public struct Object: Sendable, Equatable {
        public var path: String
        public var interface: String
        public var properties: [Property]
        /// (name, input signature, output signature)
        public var methods: [Method]
        /// Properties that send PropertiesChanged (the characteristic's `Value` and `Notifying`).
        public var emitting: Set<String>
    }

    public struct Property: Sendable, Equatable {
        public var name: String
        public var value: DBusValue
    }

    public struct Method: Sendable, Equatable {
        public var name: String
        public var input: String
        public var output: String
    }

    public let root: String
    public let servicePath: String
    public let characteristicPath: String
    public let advertisementPath: String
    public let objects: [Object]
    public let advertisement: Object

    /// - Parameter root: the application root, e.g. `/org/bitchat/bridge/hci0` (one app per adapter).
    public init(root: String, serviceUUID: String = BitchatGATT.serviceUUID) {
        self.root = root
        servicePath = root + "/service0"
        characteristicPath = servicePath + "/char0"
        advertisementPath = root + "/advertisement0"
        let service = Object(
            path: servicePath, interface: BlueZNames.gattService,
            properties: [
                Property(name: "UUID", value: .string(serviceUUID)),
                Property(name: "Primary", value: .bool(true)),
                Property(name: "Characteristics", value: .objectPaths([characteristicPath])),
            ],
            methods: [], emitting: []
        )
        let characteristic = Object(
            path: characteristicPath, interface: BlueZNames.gattCharacteristic,
            properties: [
                Property(name: "UUID", value: .string(BitchatGATT.characteristicUUID)),
                Property(name: "Service", value: .objectPath(servicePath)),
                Property(name: "Flags", value: .strings(BitchatGATT.characteristicFlags)),
                Property(name: "Value", value: .bytes([])),
                Property(name: "Notifying", value: .bool(false)),
            ],
            methods: [
                Method(name: "ReadValue", input: "a{sv}", output: "ay"),
                Method(name: "WriteValue", input: "aya{sv}", output: ""),
                Method(name: "StartNotify", input: "", output: ""),
                Method(name: "StopNotify", input: "", output: ""),
            ],
            emitting: ["Value", "Notifying"]
        )
        objects = [service, characteristic]
        // Connectable ("peripheral"), the 128-bit service UUID only: no LocalName, no manufacturer data (§10.2).
        advertisement = Object(
            path: advertisementPath, interface: BlueZNames.advertisement,
            properties: [
                Property(name: "Type", value: .string("peripheral")),
                Property(name: "ServiceUUIDs", value: .strings([serviceUUID])),
            ],
            methods: [Method(name: "Release", input: "", output: "")],
            emitting: []
        )
    }

    /// What `GetManagedObjects` on the root must return: `{path: {interface: {property: value}}}`.
    public var managedObjects: [String: [String: [String: DBusValue]]] {
        var out: [String: [String: [String: DBusValue]]] = [:]
        for object in objects {
            var properties: [String: DBusValue] = [:]
            for property in object.properties { properties[property.name] = property.value }
            out[object.path, default: [:]][object.interface] = properties
        }
        return out
    }
}
