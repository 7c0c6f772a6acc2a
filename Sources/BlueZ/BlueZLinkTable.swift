public import BotSupport
public import Mesh
public import MeshRuntime
public import BitchatWire
import BotCrypto

/// How a frame looks to the link layer before the mesh engine sees it (MESH-WIRE §4.7.4, checks 2, 3, 5).
public enum LinkFrameKind: Sendable, Equatable {
    /// A decodable announce whose noise key hashes to its sender and whose signature holds.
    case validAnnounce(MeshPeerID)
    case invalidAnnounce
    /// Any other decodable frame.
    case other
    /// Not a bitchat frame at all.
    case malformed

    /// Classifies one frame (pure; no clock: freshness and pinning stay with the engine).
    public static func classify(_ frame: [UInt8]) -> LinkFrameKind {
        guard let packet = try? MeshPacket.decode(frame) else { return .malformed }
        guard packet.type == .announce else { return .other }
        guard let payload = try? AnnouncePayload.decode(packet.payload),
            MeshPeerID(noisePublicKey: payload.noisePublicKey) == packet.sender,
            let key = try? Ed25519PublicKey(rawRepresentation: payload.signingPublicKey),
            packet.verifySignature(key).isValid
        else { return .invalidAnnounce }
        return .validAnnounce(packet.sender)
    }
}

/// The BLE link table and the central role's connection policy, as a pure state machine (no bus, no
/// clock: `now` is monotonic ms passed in). ``BlueZTransport`` drives it from its bus thread.
///
/// - Both roles feed one table: a phone that is our central *and* our peripheral is two links (two device
///   roles); the engine's dedup absorbs the duplicates (issue 9, MESH-WIRE §10.3).
/// - Announce gate (MESH-WIRE §4.7): until a link has delivered a valid signed announce, only announces
///   cross it. Our other outbound frames wait in a small per-link queue (flushed on the announce); the
///   peer's other inbound frames are dropped and counted.
/// - Misbehaviour: no valid announce within ``Configuration/announceDeadlineMs``, or more than
///   ``Configuration/badFrameLimit`` malformed/invalid frames within ``Configuration/badFrameWindowMs``,
///   drops the link and blacklists the device for ``Configuration/blacklistMs``.
/// - Central connections: at most ``Configuration/maxCentralLinks`` at once (iOS uses 6), one attempt per
///   ``Configuration/connectSpacingMs``, exponential backoff per device after failures.
public struct BlueZLinkTable: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// Central-role connection budget (iOS: 6, Android: 8). Peripheral-role links are not limited here:
        /// BlueZ and the controller limit how many centrals can connect to us.
        public var maxCentralLinks = 6
        /// iOS makes at most one connect attempt per 0.5 s.
        public var connectSpacingMs: UInt64 = 500
        /// First retry delay after a failed connect; doubles per failure up to ``backoffMaxMs``.
        public var backoffBaseMs: UInt64 = 2_000
        public var backoffMaxMs: UInt64 = 60_000
        /// A link that has not announced validly by then is dropped (phones announce within ~1 s).
        public var announceDeadlineMs: UInt64 = 20_000
        /// Malformed or invalid-announce frames tolerated per window before the link is dropped.
        public var badFrameLimit = 10
        public var badFrameWindowMs: UInt64 = 60_000
        /// How long a misbehaving device stays blacklisted.
        public var blacklistMs: UInt64 = 600_000

        public init() {}
    }

    public enum Limits {
        /// Outbound frames held per link until its announce verifies (our messages sent right after link-up).
        public static let maxHeldFrames = 64
        /// Devices remembered for backoff/blacklist; the oldest entry is evicted beyond this (bounded memory
        /// with many passing phones).
        public static let maxRememberedDevices = 512
    }

    public enum Role: String, Sendable, Equatable, CounterKey {
        /// We are the GATT client (we connected to the device).
        case central
        /// The device is a GATT client of our application.
        case peripheral
    }

    public struct Link: Sendable, Equatable {
        public let id: MeshLinkID
        public let role: Role
        /// The BlueZ device object path (`/org/bluez/hci0/dev_…`).
        public let device: String
        public var mtu: Int
        public let upAt: UInt64
        public var announcedPeer: MeshPeerID?
        var held: [[UInt8]] = []
        var badFrames: [UInt64] = []
    }

    /// Why a link is dropped and its device blacklisted.
    public enum Misbehaviour: String, Sendable, Equatable, CounterKey {
        /// More than ``Configuration/badFrameLimit`` malformed or invalid-announce frames in a window.
        case tooManyBadFrames = "too_many_bad_frames"
        /// No valid announce within ``Configuration/announceDeadlineMs``.
        case noAnnounce = "no_announce"
    }

    public enum Inbound: Sendable, Equatable {
        /// Pass the frame to the mesh; then send `flush` (frames held for this link), if any.
        case deliver(flush: [[UInt8]])
        case drop(reason: MeshInboundDrop)
        /// The link misbehaved: disconnect it (the device is blacklisted).
        case dropLink(reason: Misbehaviour)
    }

    public enum Outbound: Sendable, Equatable {
        case send
        case held
        case drop(reason: MeshOutboundDrop)
    }

    /// What the table counts (the transport's per-link drop counters are in its ``MeshInbound``).
    public struct Counters: Sendable, Equatable {
        public var linksUp = Tally<Role>()
        public var linksDown = Tally<Role>()
        /// Link-ups refused because the device is blacklisted.
        public var refusedBlacklisted = 0
        /// Links whose first valid announce arrived (the gate opened).
        public var announced = 0
        public var delivered = 0
        public var inboundDrops = Tally<MeshInboundDrop>()
        public var outboundDrops = Tally<MeshOutboundDrop>()
        /// Outbound frames held until the link's announce.
        public var held = 0
        public var misbehaved = Tally<Misbehaviour>()
        public var connectAttempts = 0
        public var connectFailures = 0
    }

    private struct DeviceRecord: Sendable {
        var failures = 0
        var retryAt: UInt64 = 0
        var blacklistedUntil: UInt64 = 0
        var touched: UInt64 = 0
    }

    public let configuration: Configuration
    public private(set) var links: [MeshLinkID: Link] = [:]
    private var nextLink: UInt64 = 1
    private var devices: [String: DeviceRecord] = [:]
    /// Central-role devices between Connect and link-up (they count toward the budget).
    public private(set) var connecting: Set<String> = []
    private var lastConnectAt: UInt64?
    public private(set) var counters = Counters()

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    public func link(role: Role, device: String) -> Link? {
        links.values.first { $0.role == role && $0.device == device }
    }

    public var centralLinkCount: Int { links.values.filter { $0.role == .central }.count }

    public func isBlacklisted(_ device: String, now: UInt64) -> Bool {
        (devices[device]?.blacklistedUntil ?? 0) > now
    }

    // MARK: Links

    /// Adds a link (a subscribed central-role connection, or a central's first write to us). Nil when the
    /// device is blacklisted or already has a link in that role.
    public mutating func linkUp(role: Role, device: String, mtu: Int, now: UInt64) -> MeshLinkID? {
        if role == .central { connecting.remove(device) }
        guard !isBlacklisted(device, now: now) else {
            counters.refusedBlacklisted += 1
            return nil
        }
        guard link(role: role, device: device) == nil else { return nil }
        let id = MeshLinkID(nextLink)
        nextLink += 1
        links[id] = Link(id: id, role: role, device: device, mtu: mtu, upAt: now)
        if role == .central { touch(device, now: now) { $0.failures = 0 } }
        counters.linksUp.add(role)
        return id
    }

    @discardableResult
    public mutating func linkDown(_ id: MeshLinkID) -> Link? {
        guard let link = links.removeValue(forKey: id) else { return nil }
        counters.linksDown.add(link.role)
        return link
    }

    /// Every link of `device` (both roles), e.g. when BlueZ reports it disconnected.
    public func links(of device: String) -> [Link] { links.values.filter { $0.device == device }.sorted { $0.id < $1.id } }

    public mutating func updateMTU(_ id: MeshLinkID, _ mtu: Int) { links[id]?.mtu = mtu }

    /// Decides what happens to a frame that arrived on `id`.
    public mutating func inbound(_ frame: [UInt8], on id: MeshLinkID, now: UInt64) -> Inbound {
        guard var link = links[id] else {
            counters.inboundDrops.add(.unknownLink)
            return .drop(reason: .unknownLink)
        }
        let kind = LinkFrameKind.classify(frame)
        var result: Inbound
        switch kind {
        case .validAnnounce(let peer):
            var flush: [[UInt8]] = []
            if link.announcedPeer == nil {
                flush = link.held
                link.held = []
                counters.announced += 1
            }
            link.announcedPeer = link.announcedPeer ?? peer
            result = .deliver(flush: flush)
        case .other:
            result = link.announcedPeer == nil ? .drop(reason: .beforeAnnounce) : .deliver(flush: [])
        case .invalidAnnounce, .malformed:
            link.badFrames = link.badFrames.filter { $0 + configuration.badFrameWindowMs > now }
            link.badFrames.append(now)
            result = .drop(reason: kind == .malformed ? .malformed : .invalidAnnounce)
            if link.badFrames.count > configuration.badFrameLimit {
                result = .dropLink(reason: .tooManyBadFrames)
            }
        }
        links[id] = link
        switch result {
        case .drop(let reason): counters.inboundDrops.add(reason)
        case .dropLink(let reason): misbehaved(link, reason: reason, now: now)
        case .deliver: counters.delivered += 1
        }
        return result
    }

    /// Decides whether a frame from the mesh may go out on `id` now.
    public mutating func outbound(_ frame: [UInt8], on id: MeshLinkID) -> Outbound {
        guard var link = links[id] else {
            counters.outboundDrops.add(.linkDown)
            return .drop(reason: .linkDown)
        }
        guard frame.count <= link.mtu else {
            counters.outboundDrops.add(.tooLarge)
            return .drop(reason: .tooLarge)
        }
        if link.announcedPeer != nil { return .send }
        if let packet = try? MeshPacket.decode(frame), packet.type == .announce { return .send }
        guard link.held.count < Limits.maxHeldFrames else {
            counters.outboundDrops.add(.heldFull)
            return .drop(reason: .heldFull)
        }
        link.held.append(frame)
        links[id] = link
        counters.held += 1
        return .held
    }

    /// Links that missed their announce deadline: the caller disconnects them (devices are blacklisted).
    public mutating func expired(now: UInt64) -> [Link] {
        let late = links.values.filter { $0.announcedPeer == nil && now >= $0.upAt + configuration.announceDeadlineMs }
            .sorted { $0.id < $1.id }
        for link in late { misbehaved(link, reason: .noAnnounce, now: now) }
        return late
    }

    private mutating func misbehaved(_ link: Link, reason: Misbehaviour, now: UInt64) {
        counters.misbehaved.add(reason)
        let until = now + configuration.blacklistMs
        touch(link.device, now: now) { $0.blacklistedUntil = until }
    }

    // MARK: Central connections

    /// Whether the central role should try `device` now (budget, spacing, backoff, blacklist, no link yet).
    public func shouldConnect(_ device: String, now: UInt64) -> Bool {
        guard !connecting.contains(device), link(role: .central, device: device) == nil else { return false }
        guard centralLinkCount + connecting.count < configuration.maxCentralLinks else { return false }
        if let last = lastConnectAt, now < last + configuration.connectSpacingMs { return false }
        guard let record = devices[device] else { return true }
        return record.blacklistedUntil <= now && record.retryAt <= now
    }

    /// Records that a Connect to `device` starts now.
    public mutating func connectStarted(_ device: String, now: UInt64) {
        connecting.insert(device)
        lastConnectAt = now
        touch(device, now: now) { _ in }
        counters.connectAttempts += 1
    }

    /// A Connect (or the service resolution/subscription after it) failed: back off.
    public mutating func connectFailed(_ device: String, now: UInt64) {
        connecting.remove(device)
        counters.connectFailures += 1
        let base = configuration.backoffBaseMs
        let cap = configuration.backoffMaxMs
        touch(device, now: now) { record in
            record.failures += 1
            let shift = UInt64(min(record.failures - 1, 20))
            record.retryAt = now + min(cap, base << shift)
        }
    }

    /// ms until `device` may be retried (0: now).
    public func retryDelay(_ device: String, now: UInt64) -> UInt64 {
        guard let record = devices[device] else { return 0 }
        let until = max(record.retryAt, record.blacklistedUntil)
        return until > now ? until - now : 0
    }

    /// Forgets every link and connection in flight (bluetoothd went away); backoff and blacklist stay.
    public mutating func reset() -> [Link] {
        let all = links.values.sorted { $0.id < $1.id }
        links = [:]
        connecting = []
        return all
    }

    private mutating func touch(_ device: String, now: UInt64, _ update: (inout DeviceRecord) -> Void) {
        var record = devices[device] ?? DeviceRecord()
        update(&record)
        record.touched = now
        devices[device] = record
        if devices.count > Limits.maxRememberedDevices {
            // Evict the least recently touched device that is not blacklisted (O(n), only past the bound).
            if let victim = devices.filter({ $0.value.blacklistedUntil <= now && $0.key != device })
                .min(by: { $0.value.touched < $1.value.touched })?.key ?? devices.min(by: { $0.value.touched < $1.value.touched })?.key
            {
                devices[victim] = nil
            }
        }
    }

}
