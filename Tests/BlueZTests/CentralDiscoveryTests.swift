import Testing
@testable import BlueZ

@Suite("BLE central discovery decisions (pure)")
struct CentralDiscoveryTests {
    static let service = "F47B5E2D-4A9E-4C5A-9B3F-8E1D2C3A4B5C"
    let phone = "/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF"
    let other = "/org/bluez/hci0/dev_11_22_33_44_55_66"

    func make() -> CentralDiscovery { CentralDiscovery(adapterPath: "/org/bluez/hci0", serviceUUID: Self.service) }

    /// Properties of a phone that earlier connected to us as a central: bluetoothd keeps its resolved GATT
    /// database in `UUIDs` and ignores the service UUID it now advertises.
    var staleGATTCache: [String: DBusValue] {
        ["UUIDs": .strings(["00001800-0000-1000-8000-00805f9b34fb", "00001801-0000-1000-8000-00805f9b34fb"]), "RSSI": .int16(-60)]
    }

    @Test func advertisedUUIDOrServiceDataMakesACandidateInAnyCase() {
        let discovery = make()
        let devices: [String: [String: DBusValue]] = [
            phone: ["UUIDs": .strings([Self.service.lowercased()])],
            other: ["ServiceData": .properties([(Self.service, .bytes([1]))])],
            "/org/bluez/hci0/dev_00_00_00_00_00_01": ["UUIDs": .strings(["0000180d-0000-1000-8000-00805f9b34fb"])],
        ]
        #expect(Set(discovery.candidates(devices)) == [phone, other])
    }

    @Test func staleUUIDsStillCountWhenReportedFromOurFilteredDiscovery() {
        var discovery = make()
        let devices = [phone: staleGATTCache]
        #expect(discovery.candidates(devices).isEmpty)
        // Before our discovery runs, an RSSI signal proves nothing about our filter.
        discovery.deviceSignal(phone, ["RSSI": .int16(-60)])
        #expect(discovery.candidates(devices).isEmpty)
        #expect(discovery.startSucceeded(attemptsPending: false) == .discovering)
        // A property change without RSSI is not an advertisement report.
        discovery.deviceSignal(phone, ["Connected": .bool(false)])
        #expect(discovery.candidates(devices).isEmpty)
        discovery.deviceSignal(phone, ["RSSI": .int16(-58)])
        #expect(discovery.candidates(devices) == [phone])
        // Gone from bluetoothd: forgotten.
        discovery.deviceRemoved(phone)
        #expect(discovery.candidates(devices).isEmpty)
    }

    @Test func devicesOfAnotherAdapterAreNeverCandidates() {
        var discovery = make()
        _ = discovery.startSucceeded(attemptsPending: false)
        let foreign = "/org/bluez/hci1/dev_AA_BB_CC_DD_EE_FF"
        discovery.deviceSignal(foreign, ["RSSI": .int16(-40)])
        #expect(discovery.candidates([foreign: ["UUIDs": .strings([Self.service]), "RSSI": .int16(-40)]]).isEmpty)
    }

    @Test func strongestFirstThenByPath() {
        let discovery = make()
        let third = "/org/bluez/hci0/dev_00_00_00_00_00_03"
        let uuids = DBusValue.strings([Self.service])
        let devices: [String: [String: DBusValue]] = [
            phone: ["UUIDs": uuids, "RSSI": .int16(-70)],
            other: ["UUIDs": uuids, "RSSI": .int16(-50)],
            third: ["UUIDs": uuids, "RSSI": .int16(-70)],
        ]
        #expect(discovery.candidates(devices) == [other, third, phone])
    }

    @Test func connectStopsARunningDiscoveryFirstAndResumesWhenIdle() {
        var discovery = make()
        // Not discovering: connect at once.
        #expect(discovery.planConnect() == .connect)
        #expect(discovery.startSucceeded(attemptsPending: false) == .discovering)
        #expect(discovery.discovering)
        // Discovering: the kernel would hold the connection for the 10.24 s window, so stop first.
        #expect(discovery.planConnect() == .stopDiscoveryThenConnect)
        #expect(!discovery.discovering)
        // A second connect while the first is pending needs no second stop.
        #expect(discovery.planConnect() == .connect)
        // Resume only when nothing is pending and the transport is ready.
        #expect(!discovery.shouldResume(ready: true, attemptsPending: true))
        #expect(!discovery.shouldResume(ready: false, attemptsPending: false))
        #expect(discovery.shouldResume(ready: true, attemptsPending: false))
        _ = discovery.startSucceeded(attemptsPending: false)
        #expect(!discovery.shouldResume(ready: true, attemptsPending: false))
    }

    @Test func aStartThatReturnsWhileAConnectIsPendingIsStoppedAgain() {
        var discovery = make()
        #expect(discovery.startSucceeded(attemptsPending: true) == .stopDiscovery)
        #expect(!discovery.discovering)
        // Not counted as discovering: RSSI signals of the stopped scan do not make candidates.
        discovery.deviceSignal(phone, ["RSSI": .int16(-60)])
        #expect(discovery.candidates([phone: staleGATTCache]).isEmpty)
    }

    @Test func bluetoothdRestartForgetsEverything() {
        var discovery = make()
        _ = discovery.startSucceeded(attemptsPending: false)
        discovery.deviceSignal(phone, ["RSSI": .int16(-60)])
        discovery.reset()
        #expect(!discovery.discovering)
        #expect(discovery.candidates([phone: staleGATTCache]).isEmpty)
        #expect(discovery.planConnect() == .connect)
    }
}
