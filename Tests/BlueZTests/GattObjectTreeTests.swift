import Testing
@testable import BlueZ

@Suite("GATT object tree (as data, no bus)")
struct GattObjectTreeTests {
    let tree = GattObjectTree(root: "/org/bitchat/bridge/hci0")

    @Test func pathsAreParentPlusIndex() {
        #expect(tree.servicePath == "/org/bitchat/bridge/hci0/service0")
        #expect(tree.characteristicPath == "/org/bitchat/bridge/hci0/service0/char0")
        // The advertisement is not inside the GATT service subtree.
        #expect(tree.advertisementPath == "/org/bitchat/bridge/hci0/advertisement0")
        #expect(!tree.advertisementPath.hasPrefix(tree.servicePath))
        #expect(tree.objects.map(\.path) == [tree.servicePath, tree.characteristicPath])
    }

    @Test func managedObjectsHaveServiceAndCharacteristicWithBackPointers() throws {
        let objects = tree.managedObjects
        let service = try #require(objects[tree.servicePath]?["org.bluez.GattService1"])
        #expect(service["UUID"] == .string("f47b5e2d-4a9e-4c5a-9b3f-8e1d2c3a4b5c"))
        #expect(service["Primary"] == .bool(true))
        #expect(service["Characteristics"] == .objectPaths([tree.characteristicPath]))
        let characteristic = try #require(objects[tree.characteristicPath]?["org.bluez.GattCharacteristic1"])
        #expect(characteristic["UUID"] == .string("a1b2c3d4-e5f6-4a5b-8c9d-0e1f2a3b4c5d"))
        #expect(characteristic["Service"] == .objectPath(tree.servicePath))
        #expect(characteristic["Flags"]?.stringArray == ["read", "write", "write-without-response", "notify"])
        #expect(characteristic["Value"] == .bytes([]))
        // The advertisement is not part of GetManagedObjects on the application root.
        #expect(objects[tree.advertisementPath] == nil)
    }

    @Test func characteristicMethodsAndSignatures() throws {
        let characteristic = try #require(tree.objects.first { $0.interface == "org.bluez.GattCharacteristic1" })
        let methods = Dictionary(uniqueKeysWithValues: characteristic.methods.map { ($0.name, "\($0.input)->\($0.output)") })
        #expect(methods == ["ReadValue": "a{sv}->ay", "WriteValue": "aya{sv}->", "StartNotify": "->", "StopNotify": "->"])
        #expect(characteristic.emitting == ["Value", "Notifying"])
    }

    @Test func advertisementIsConnectableWithServiceUUIDOnly() {
        let properties = Dictionary(uniqueKeysWithValues: tree.advertisement.properties.map { ($0.name, $0.value) })
        #expect(tree.advertisement.interface == "org.bluez.LEAdvertisement1")
        #expect(properties["Type"] == .string("peripheral"))
        #expect(properties["ServiceUUIDs"] == .strings([BitchatGATT.serviceUUID]))
        // MESH-WIRE §10.2: no local name, no manufacturer data.
        #expect(Set(properties.keys) == ["Type", "ServiceUUIDs"])
        #expect(tree.advertisement.methods.map(\.name) == ["Release"])
    }

    @Test func debugServiceUUIDIsUsedEverywhere() {
        let debug = GattObjectTree(root: "/x", serviceUUID: BitchatGATT.debugServiceUUID)
        #expect(debug.managedObjects["/x/service0"]?["org.bluez.GattService1"]?["UUID"] == .string(BitchatGATT.debugServiceUUID))
        #expect(debug.advertisement.properties.first { $0.name == "ServiceUUIDs" }?.value == .strings([BitchatGATT.debugServiceUUID]))
    }

    @Test(arguments: [
        (DBusValue.properties([("a", .bool(true))]), "a{sv}"),
        (.strings([]), "as"),
        (.bytes([1, 2]), "ay"),
        (.structure([.objectPath("/a"), .uint16(517)]), "(oq)"),
        (.array(element: "{oa{sa{sv}}}", []), "a{oa{sa{sv}}}"),
    ])
    func signatures(value: DBusValue, signature: String) {
        #expect(value.signature == signature)
    }

    @Test func accessors() {
        let dict = DBusValue.properties([("mtu", .uint16(517)), ("device", .objectPath("/org/bluez/hci0/dev_1"))])
        #expect(dict.dictionary?["mtu"]?.integerValue == 517)
        #expect(dict.dictionary?["device"]?.stringValue == "/org/bluez/hci0/dev_1")
        #expect(DBusValue.array(element: "y", [.byte(1), .byte(2)]).bytesValue == [1, 2])
        #expect(DBusValue.string("x").dictionary == nil)
    }

    @Test func adapterChoice() throws {
        let objects: [String: [String: [String: DBusValue]]] = [
            "/org/bluez/hci10": ["org.bluez.Adapter1": ["Powered": .bool(true)]],
            "/org/bluez/hci2": ["org.bluez.Adapter1": ["Powered": .bool(false)]],
            "/org/bluez/hci2/dev_00": ["org.bluez.Device1": [:]],
        ]
        #expect(try BlueZTransport.chooseAdapter(objects, named: nil) == "/org/bluez/hci10")
        #expect(try BlueZTransport.chooseAdapter(objects, named: "hci2") == "/org/bluez/hci2")
        #expect(throws: BlueZError.adapterNotFound("hci1", available: ["hci2", "hci10"])) {
            try BlueZTransport.chooseAdapter(objects, named: "hci1")
        }
        #expect(throws: BlueZError.noAdapter) { try BlueZTransport.chooseAdapter([:], named: nil) }
        let unpowered: [String: [String: [String: DBusValue]]] = ["/org/bluez/hci3": ["org.bluez.Adapter1": ["Powered": .bool(false)]]]
        #expect(try BlueZTransport.chooseAdapter(unpowered, named: nil) == "/org/bluez/hci3")
    }
}
