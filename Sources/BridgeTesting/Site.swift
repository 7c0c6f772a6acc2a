import BitchatWire
public import BotCrypto
public import BotSupport
import Bridge
import BridgeApp
import BridgeCore
import Foundation
import Mesh
import MeshRuntime
public import Nostr
import Synchronization
public import AppModels

/// The in-process test world (issue 22 part 4): a festival site with Nostr relays, radio segments, bridges and
/// phones, all in this process, on one manual clock.
///
/// - Relays are ``LoopbackRelay``s on 127.0.0.1, reached by each bridge through its real relay pool (lws).
/// - Segments are shared radio media (``Segment``); phones (``TestPhone``) and bridges join one or several.
/// - Bridges are built by the same composition root as `bitchat-bridge run` (``BridgeRuntime/start(config:logger:configPath:host:)``),
///   from the same `BRIDGE_*` settings, with a data directory of their own; the host gives them the site's clock, its
///   segments and a seed.
/// - Time moves only when a test says so (``advance(by:)``): holds, presence, announces and sync rounds happen then,
///   without sleeping. Waits end on the awaited report itself (``Recorder``); their real-time bound is a backstop.
///
/// The relay pool's connection timers (connect, backoff, liveness) stay on real time: they are the pool's own, and
/// its tests drive them.
public final class Site: @unchecked Sendable {
    public let time: ManualTime
    public let directory: String
    private let parts = Mutex<(relays: [LoopbackRelay], bridges: [TestBridge], phones: [TestPhone], seed: UInt64)>(([], [], [], 1))
    private let appPhones = Mutex<[AppPhone]>([])

    /// The site's clock starts at the real wall clock's second, so the relays' and the apps' ±900 s windows hold.
    public init(name: String = "site") {
        time = ManualTime(startingAt: SystemTime.wallClockMs() / 1000 * 1000)
        directory = NSTemporaryDirectory() + "world-\(name)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    /// The site's time in Unix seconds.
    public var now: Double { Double(time.nowMs()) / 1000 }

    func nextSeed() -> UInt64 { parts.withLock { parts in defer { parts.seed += 1 }; return parts.seed } }

    public func relay() throws -> LoopbackRelay {
        // The site's clock in its Date headers: relay and bridges agree as real hosts with network time do.
        let relay = try LoopbackRelay(unixNow: { [time] in Int64(time.nowMs() / 1000) })
        parts.withLock { $0.relays.append(relay) }
        return relay
    }

    public func segment(mtu: Int = 512, loss: Double = 0) -> Segment { Segment(mtu: mtu, loss: loss, seed: nextSeed()) }

    /// A BLE link between two devices (``MeshLinkKind/point``): the bridge and one phone.
    public func bleLink(mtu: Int = 512) -> Segment { Segment(mtu: mtu, seed: nextSeed(), kind: .point) }

    /// A phone on `segments`: its announce has gone out on each when this returns.
    public func phone(
        _ name: String, on segments: [Segment], app: TestPhone.App = .iPhone,
        noiseKey: X25519PrivateKey = .generate(), signingKey: Ed25519PrivateKey = .generate()
    ) async -> TestPhone {
        // A moment passes between arrivals: announces sent in the same millisecond would be identical packets, so
        // an engine never answers one with another in the ms of its own (MeshPeerEngine's announce-back rule).
        time.advance(by: 1)
        let phone = TestPhone(
            name: name, app: app, segments: segments, time: time, seed: nextSeed(), noiseKey: noiseKey, signingKey: signingKey)
        await phone.start()
        parts.withLock { $0.phones.append(phone) }
        return phone
    }

    /// A phone that behaves as `app`'s own code (``AppPhoneModel``) on `segments`; its announce has gone out when this
    /// returns.
    public func appPhone(_ name: String, _ app: AppPhoneModel.App, on segments: [Segment]) async -> AppPhone {
        time.advance(by: 1)
        let phone = AppPhone(name: name, app: app, segments: segments, time: time, seed: nextSeed())
        await phone.start()
        appPhones.withLock { $0.append(phone) }
        return phone
    }

    /// A bridge named `name` (its data directory `<site>/<name>`, kept across ``TestBridge/restart()``) on `segments`,
    /// connected to `relays`, configured as `run` would be by `settings` (`BRIDGE_*` names); returns once every relay
    /// has its subscriptions.
    public func bridge(
        _ name: String, relays: [LoopbackRelay], segments: [Segment], settings: [String: String] = [:]
    ) async throws -> TestBridge {
        let environment = [
            "BRIDGE_GEOHASH": "u4pruy", "BRIDGE_DATA_DIR": "\(directory)/\(name)", "BRIDGE_RELAYS": relays.map(\.url).joined(separator: ","),
            "BRIDGE_RELAY_DIRECTORY": "off", "BRIDGE_MESH": "tcp://127.0.0.1:9", "BRIDGE_HTTP_LISTEN": "off", "BRIDGE_NICKNAME": name,
            "BRIDGE_POW_BITS": "8",
        ].merging(settings) { $1 }
        time.advance(by: 1)
        let bridge = try TestBridge(
            name: name, environment: environment, segments: segments, relays: relays, site: self)
        try await bridge.start()
        parts.withLock { $0.bridges.append(bridge) }
        return bridge
    }

    /// A stage of a site with site records (issue 35): a bridge on an island of its own, holding the operator key
    /// `operatorSecret` in its data directory (as `operator.key`) and following that key's records.
    public func stage(_ name: String, relay: LoopbackRelay, operatorSecret: [UInt8]) async throws -> TestBridge {
        let operatorKey = try SchnorrSecretKey(bytes: operatorSecret)
        try FileIO.makeDirectory(directory + "/" + name, mode: 0o700)
        try FileIO.writeAtomically(Array(Hex.encode(operatorSecret).utf8), to: directory + "/\(name)/" + OperatorKeys.secretFileName, mode: 0o600)
        return try await bridge(name, relays: [relay], segments: [segment()], settings: ["BRIDGE_OPERATOR_KEYS": operatorKey.publicKey.hex])
    }

    /// A Nostr user posting to the channel (its key derived from `name`, as a phone derives its channel key).
    public func poster(_ name: String) -> Poster { Poster(name: name, site: self) }

    /// Moves the site's clock `ms` forward: every owner whose deadline that reaches runs (holds end, presence and
    /// announces go out, sync rounds start), in steps of at most `step` ms so that work a deadline schedules a moment
    /// later (a relay's jitter, the next fragment) happens within the same advance.
    public func advance(by ms: UInt64, step: UInt64 = 100) async {
        let target = time.nowMs() + ms
        while time.nowMs() < target {
            time.advance(to: min(target, time.nowMs() + step))
            // Let the woken owners run before the next step (they are tasks of this process).
            await Task.yield()
        }
    }

    /// Moves the clock in steps of `step` ms until `done` holds, at most `limit` ms: for an outcome that follows work
    /// the world does between steps, whose own timers start only once it is done (a verdict releasing a relay, a sync
    /// request answered with paced replies) — as real time keeps flowing while a process test waits. `done` should
    /// wait briefly on the report itself (a ``Recorder`` wait with a short `within`). True when it held.
    public func advance(until done: () async -> Bool, limit: UInt64 = 10_000, step: UInt64 = 100) async -> Bool {
        var moved: UInt64 = 0
        while true {
            if await done() { return true }
            guard moved < limit else { return false }
            await advance(by: step)
            moved += step
        }
    }

    /// Stops every bridge gracefully, every phone and every relay.
    public func stop() async {
        let (relays, bridges, phones) = parts.withLock { ($0.relays, $0.bridges, $0.phones) }
        for bridge in bridges { await bridge.stop() }
        for phone in phones { await phone.leave() }
        for phone in appPhones.withLock({ $0 }) { await phone.leave() }
        for relay in relays { await relay.stop() }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A Nostr user of the channel: events signed with a key derived from its name, dated by the site's clock, posted to
/// a relay as a client publishes them.
public struct Poster: Sendable {
    public let name: String
    public let key: SchnorrSecretKey
    let site: Site

    init(name: String, site: Site) {
        self.name = name
        self.site = site
        key = try! NostrKeyDerivation.secretKey(seed: SHA256.hash(utf8: "poster " + name), label: NostrKeyDerivation.channelLabel(geohash: "u4pruy"))
    }

    /// A kind-20000 chat event for `geohash` (with `n` = the name), mined to `pow` bits as the bridge's settings expect.
    public func event(_ text: String, geohash: String = "u4pruy", pow: Int = 8, at: Double? = nil) throws -> NostrEvent {
        let unsigned = UnsignedEvent(
            pubkey: key.publicKey, createdAt: Int64(at ?? site.now), kind: NostrKind.ephemeralChat, tags: [["g", geohash], ["n", name]],
            content: text)
        return try NostrPoW.mine(unsigned, target: pow).event.signed(with: key)
    }

    /// Posts `text` to `relay`; returns the event.
    @discardableResult
    public func post(_ text: String, geohash: String = "u4pruy", to relay: LoopbackRelay) throws -> NostrEvent {
        let event = try event(text, geohash: geohash)
        relay.post(event)
        return event
    }
}
