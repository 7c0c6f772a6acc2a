import Testing
import BitchatWire
import BotCrypto
import Mesh
@testable import BlueZ
import MeshRuntime

/// Signed frames from a fresh identity (real Ed25519/X25519, the codec under test elsewhere).
struct TestPeer {
    let noise = X25519PrivateKey.generate()
    let signing = Ed25519PrivateKey.generate()
    var id: MeshPeerID { MeshPeerID(noisePublicKey: noise.publicKey) }

    func announce(signed: Bool = true, tamper: Bool = false) throws -> [UInt8] {
        let payload = try AnnouncePayload(nickname: "phone", noisePublicKey: noise.publicKey,
                                          signingPublicKey: signing.publicKey.rawRepresentation).encode()
        var packet = MeshPacket(type: .announce, timestamp: 1_750_000_000_000, sender: id, payload: payload)
        if signed { packet = try packet.signed(with: signing) }
        if tamper { packet.timestamp += 1 }
        return try packet.encode()
    }

    func message(_ text: String) throws -> [UInt8] {
        try MeshPacket(type: .message, timestamp: 1_750_000_000_000, sender: id, payload: Array(text.utf8)).signed(with: signing).encode()
    }
}

@Suite("BLE link table (pure state machine)")
struct BlueZLinkTableTests {
    let dev = "/org/bluez/hci0/dev_AA"

    @Test func classification() throws {
        let peer = TestPeer()
        #expect(LinkFrameKind.classify(try peer.announce()) == .validAnnounce(peer.id))
        #expect(LinkFrameKind.classify(try peer.announce(tamper: true)) == .invalidAnnounce)
        #expect(LinkFrameKind.classify(try peer.announce(signed: false)) == .invalidAnnounce)
        #expect(LinkFrameKind.classify(try peer.message("hi")) == .other)
        #expect(LinkFrameKind.classify([0xff, 0x00]) == .malformed)
        #expect(LinkFrameKind.classify([]) == .malformed)
    }

    @Test func announceGateHoldsOutboundAndDropsInboundUntilAValidAnnounce() throws {
        var table = BlueZLinkTable()
        let peer = TestPeer()
        let ours = TestPeer()
        let linkUp = table.linkUp(role: .peripheral, device: dev, mtu: 514, now: 0)
        let link = try #require(linkUp)
        // Our announce may always go out; our message waits.
        #expect(table.outbound(try ours.announce(), on: link) == .send)
        let held = try ours.message("early")
        #expect(table.outbound(held, on: link) == .held)
        // Their message before their announce is dropped.
        #expect(table.inbound(try peer.message("too early"), on: link, now: 1) == .drop(reason: .beforeAnnounce))
        // A valid announce opens the gate and releases what was held, once.
        #expect(table.inbound(try peer.announce(), on: link, now: 2) == .deliver(flush: [held]))
        #expect(table.links[link]?.announcedPeer == peer.id)
        #expect(table.inbound(try peer.announce(), on: link, now: 3) == .deliver(flush: []))
        #expect(table.inbound(try peer.message("now"), on: link, now: 4) == .deliver(flush: []))
        #expect(table.outbound(try ours.message("later"), on: link) == .send)
    }

    @Test func heldQueueBoundary() throws {
        var table = BlueZLinkTable()
        let ours = TestPeer()
        let linkUp = table.linkUp(role: .central, device: dev, mtu: 514, now: 0)
        let link = try #require(linkUp)
        let frame = try ours.message("x")
        for _ in 0..<BlueZLinkTable.Limits.maxHeldFrames { #expect(table.outbound(frame, on: link) == .held) }
        #expect(table.outbound(frame, on: link) == .drop(reason: .heldFull))
    }

    @Test func framesOverTheLinkMTUAreRefused() throws {
        var table = BlueZLinkTable()
        let linkUp = table.linkUp(role: .central, device: dev, mtu: 200, now: 0)
        let link = try #require(linkUp)
        #expect(table.outbound([UInt8](repeating: 1, count: 201), on: link) == .drop(reason: .tooLarge))
        let announce = try TestPeer().announce()
        #expect(announce.count < 200)
        #expect(table.outbound(announce, on: link) == .send)
        #expect(table.outbound([1], on: MeshLinkID(99)) == .drop(reason: .linkDown))
    }

    @Test func tooManyBadFramesDropAndBlacklistAtNPlusOne() throws {
        var configuration = BlueZLinkTable.Configuration()
        configuration.badFrameLimit = 3
        var table = BlueZLinkTable(configuration: configuration)
        let linkUp = table.linkUp(role: .peripheral, device: dev, mtu: 514, now: 0)
        let link = try #require(linkUp)
        for i in 0..<3 { #expect(table.inbound([0xff], on: link, now: UInt64(i)) == .drop(reason: .malformed)) }
        #expect(table.inbound([0xff], on: link, now: 3) == .dropLink(reason: .tooManyBadFrames))
        #expect(table.isBlacklisted(dev, now: 4))
        table.linkDown(link)
        #expect(table.linkUp(role: .peripheral, device: dev, mtu: 514, now: 5) == nil)
        #expect(table.isBlacklisted(dev, now: 3 + configuration.blacklistMs) == false)
        #expect(table.linkUp(role: .peripheral, device: dev, mtu: 514, now: 3 + configuration.blacklistMs) != nil)
    }

    @Test func badFramesOutsideTheWindowAreForgotten() throws {
        var configuration = BlueZLinkTable.Configuration()
        configuration.badFrameLimit = 1
        var table = BlueZLinkTable(configuration: configuration)
        let linkUp = table.linkUp(role: .peripheral, device: dev, mtu: 514, now: 0)
        let link = try #require(linkUp)
        #expect(table.inbound([0xff], on: link, now: 0) == .drop(reason: .malformed))
        #expect(table.inbound([0xff], on: link, now: configuration.badFrameWindowMs) == .drop(reason: .malformed))
        #expect(table.inbound([0xff], on: link, now: configuration.badFrameWindowMs + 1) == .dropLink(reason: .tooManyBadFrames))
    }

    @Test func announceDeadline() throws {
        var table = BlueZLinkTable()
        let deadline = table.configuration.announceDeadlineMs
        let silentUp = table.linkUp(role: .central, device: dev, mtu: 514, now: 0)
        let silent = try #require(silentUp)
        let goodUp = table.linkUp(role: .peripheral, device: "/org/bluez/hci0/dev_BB", mtu: 514, now: 0)
        let good = try #require(goodUp)
        _ = table.inbound(try TestPeer().announce(), on: good, now: 1)
        #expect(table.expired(now: deadline - 1).isEmpty)
        #expect(table.expired(now: deadline).map(\.id) == [silent])
        #expect(table.isBlacklisted(dev, now: deadline))
        #expect(!table.isBlacklisted("/org/bluez/hci0/dev_BB", now: deadline))
    }

    @Test func bothRolesToOneDeviceAreTwoLinks() throws {
        var table = BlueZLinkTable()
        let aUp = table.linkUp(role: .central, device: dev, mtu: 514, now: 0)
        let a = try #require(aUp)
        let bUp = table.linkUp(role: .peripheral, device: dev, mtu: 182, now: 0)
        let b = try #require(bUp)
        #expect(a != b)
        #expect(table.linkUp(role: .peripheral, device: dev, mtu: 514, now: 0) == nil)
        #expect(table.links(of: dev).map(\.id) == [a, b])
        #expect(table.links[b]?.mtu == 182)
    }

    @Test func connectionBudgetBoundary() throws {
        var configuration = BlueZLinkTable.Configuration()
        configuration.maxCentralLinks = 2
        configuration.connectSpacingMs = 0
        var table = BlueZLinkTable(configuration: configuration)
        #expect(table.shouldConnect("d1", now: 0))
        table.connectStarted("d1", now: 0)
        #expect(!table.shouldConnect("d1", now: 0))  // already connecting
        #expect(table.shouldConnect("d2", now: 0))
        table.connectStarted("d2", now: 0)
        #expect(!table.shouldConnect("d3", now: 0))  // budget (2) used by attempts in flight
        _ = table.linkUp(role: .central, device: "d1", mtu: 514, now: 1)
        #expect(!table.shouldConnect("d3", now: 1))  // 1 link + 1 attempt
        table.connectFailed("d2", now: 1)
        #expect(table.shouldConnect("d3", now: 1))
        // Peripheral-role links do not use the central budget.
        _ = table.linkUp(role: .peripheral, device: "p1", mtu: 514, now: 1)
        #expect(table.shouldConnect("d3", now: 1))
    }

    @Test func connectSpacing() {
        var table = BlueZLinkTable()
        table.connectStarted("d1", now: 1_000)
        #expect(!table.shouldConnect("d2", now: 1_499))
        #expect(table.shouldConnect("d2", now: 1_500))
    }

    @Test func exponentialBackoffCappedAndResetByALink() {
        var configuration = BlueZLinkTable.Configuration()
        configuration.connectSpacingMs = 0
        var table = BlueZLinkTable(configuration: configuration)
        var now: UInt64 = 0
        var delays: [UInt64] = []
        for _ in 0..<7 {
            table.connectStarted("d", now: now)
            table.connectFailed("d", now: now)
            delays.append(table.retryDelay("d", now: now))
            #expect(!table.shouldConnect("d", now: now + delays.last! - 1))
            now += delays.last!
            #expect(table.shouldConnect("d", now: now))
        }
        #expect(delays == [2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000])
        table.connectStarted("d", now: now)
        _ = table.linkUp(role: .central, device: "d", mtu: 514, now: now)
        let link = table.link(role: .central, device: "d")!.id
        table.linkDown(link)
        table.connectStarted("d", now: now)
        table.connectFailed("d", now: now)
        #expect(table.retryDelay("d", now: now) == 2_000)
    }

    @Test func resetForgetsLinksButKeepsBlacklist() throws {
        var configuration = BlueZLinkTable.Configuration()
        configuration.badFrameLimit = 0
        var table = BlueZLinkTable(configuration: configuration)
        let badUp = table.linkUp(role: .peripheral, device: dev, mtu: 514, now: 0)
        let bad = try #require(badUp)
        #expect(table.inbound([0], on: bad, now: 0) == .dropLink(reason: .tooManyBadFrames))
        _ = table.linkUp(role: .central, device: "d2", mtu: 514, now: 0)
        table.connectStarted("d3", now: 0)
        #expect(table.reset().count == 2)
        #expect(table.links.isEmpty && table.connecting.isEmpty)
        #expect(table.isBlacklisted(dev, now: 1))
    }

    @Test func rememberedDevicesAreBounded() {
        var configuration = BlueZLinkTable.Configuration()
        configuration.connectSpacingMs = 0
        var table = BlueZLinkTable(configuration: configuration)
        let n = BlueZLinkTable.Limits.maxRememberedDevices
        for i in 0...n {
            table.connectStarted("d\(i)", now: UInt64(i))
            table.connectFailed("d\(i)", now: UInt64(i))
        }
        // d0 (least recently touched) was evicted: no backoff remembered; the newest still backs off.
        #expect(table.retryDelay("d0", now: UInt64(n + 1)) == 0)
        #expect(table.retryDelay("d\(n)", now: UInt64(n + 1)) > 0)
    }
}
