import Testing
@testable import BlueZ

@Suite("BLE central connect sequence (pure)")
struct CentralConnectorTests {
    let phone = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"
    let service = BitchatGATT.serviceUUID

    func make() -> CentralConnector { CentralConnector(resolveTimeoutMs: 20_000, serviceUUID: service.uppercased()) }

    /// GetManagedObjects as BlueZ answers it for a phone with the bitchat service (plus a decoy
    /// characteristic with the right UUID under another service).
    func objects(mtu: Int? = 247) -> [String: [String: [String: DBusValue]]] {
        var characteristic: [String: DBusValue] = [
            "UUID": .string(BitchatGATT.characteristicUUID.uppercased()), "Service": .objectPath(phone + "/service0010"),
        ]
        if let mtu { characteristic["MTU"] = .uint16(UInt16(mtu)) }
        return [
            phone + "/service0010": [BlueZNames.gattService: ["UUID": .string(service)]],
            phone + "/service0010/char0011": [BlueZNames.gattCharacteristic: characteristic],
            phone + "/service0001": [BlueZNames.gattService: ["UUID": .string("00001801-0000-1000-8000-00805f9b34fb")]],
            phone + "/service0001/char0000": [BlueZNames.gattCharacteristic: [
                "UUID": .string(BitchatGATT.characteristicUUID), "Service": .objectPath(phone + "/service0001"),
            ]],
        ]
    }

    @Test func theWholeSequenceWithDiscoveryRunning() {
        var c = make()
        #expect(c.begin(phone, plan: .stopDiscoveryThenConnect) == [.stopDiscovery(device: phone)])
        #expect(c.begin(phone, plan: .connect).isEmpty, "one attempt per device")
        #expect(c.discoveryStopped(phone) == [.connect(device: phone)])
        #expect(c.connectReplied(phone, error: nil, now: 1_000) == [.readProperties(device: phone)])
        #expect(c.phase(of: phone) == .resolving(deadline: 21_000))
        #expect(c.propertiesRead(phone, servicesResolved: false).isEmpty)
        #expect(c.propertiesRead(phone, servicesResolved: true) == [.listObjects(device: phone)])
        let characteristic = phone + "/service0010/char0011"
        #expect(c.objectsListed(phone, objects()) == [.startNotify(device: phone, characteristic: characteristic)])
        #expect(c.notifyReplied(phone, error: DBusError(name: BlueZNames.errorInProgress, message: "")) ==
                [.linkUp(device: phone, characteristic: characteristic, mtu: 247)])
        #expect(!c.hasAttempts)
    }

    @Test func alreadyConnectedCountsAsConnectedAndOtherErrorsFail() {
        var c = make()
        _ = c.begin(phone, plan: .connect)
        #expect(c.connectReplied(phone, error: DBusError(name: BlueZNames.errorAlreadyExists, message: ""), now: 0) == [.readProperties(device: phone)])
        var d = make()
        _ = d.begin(phone, plan: .connect)
        let steps = d.connectReplied(phone, error: DBusError(name: "org.bluez.Error.Failed", message: "le-connection-abort-by-local"), now: 0)
        #expect(steps == [.failed(device: phone, reason: "Connect: org.bluez.Error.Failed: le-connection-abort-by-local")])
        #expect(!d.hasAttempts)
    }

    /// bluetoothd may never signal ServicesResolved (bletestbed README item 14): every tick reads again,
    /// until the deadline; the signal works as well as a read.
    @Test func resolvingIsPolledUntilItsDeadline() {
        var c = make()
        _ = c.begin(phone, plan: .connect)
        _ = c.connectReplied(phone, error: nil, now: 0)
        #expect(c.tick(now: 19_999) == [.readProperties(device: phone)], "n − 1 ms: read again")
        #expect(c.tick(now: 20_000) == [.failed(device: phone, reason: "services not resolved in time")], "n: given up")
        var d = make()
        _ = d.begin(phone, plan: .connect)
        _ = d.connectReplied(phone, error: nil, now: 0)
        #expect(d.servicesResolved(phone) == [.listObjects(device: phone)])
        #expect(d.servicesResolved(phone).isEmpty, "a second signal changes nothing")
    }

    @Test func withoutTheBitchatCharacteristicOrWhenTheDeviceGoesTheAttemptFails() {
        var c = make()
        _ = c.begin(phone, plan: .connect)
        _ = c.connectReplied(phone, error: nil, now: 0)
        _ = c.servicesResolved(phone)
        var objects = objects()
        objects[phone + "/service0010"] = nil
        #expect(c.objectsListed(phone, objects) == [.failed(device: phone, reason: "no bitchat characteristic")])
        var d = make()
        _ = d.begin(phone, plan: .connect)
        #expect(d.deviceGone(phone, reason: "disconnected") == [.failed(device: phone, reason: "disconnected")])
        #expect(d.deviceGone(phone, reason: "disconnected").isEmpty)
        #expect(d.objectsListed(phone, nil).isEmpty, "a late reply for an ended attempt is ignored")
    }

    @Test func lateRepliesNeverReviveOrSkipAPhase() {
        var c = make()
        _ = c.begin(phone, plan: .stopDiscoveryThenConnect)
        #expect(c.connectReplied(phone, error: nil, now: 0).isEmpty, "Connect was not sent yet")
        #expect(c.notifyReplied(phone, error: nil).isEmpty)
        _ = c.discoveryStopped(phone)
        #expect(c.discoveryStopped(phone).isEmpty)
        c.reset()
        #expect(!c.hasAttempts && c.connectReplied(phone, error: nil, now: 0).isEmpty)
    }

    @Test func aMissingMTUIsReportedAsNil() {
        let c = make()
        #expect(c.bitchatCharacteristic(of: phone, in: objects(mtu: nil))?.mtu == nil)
        #expect(c.bitchatCharacteristic(of: phone, in: objects())?.path == phone + "/service0010/char0011")
        #expect(c.bitchatCharacteristic(of: "/org/bluez/hci0/dev_00", in: objects()) == nil)
    }
}
