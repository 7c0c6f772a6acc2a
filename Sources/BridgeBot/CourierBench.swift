import BridgeApp
import BitchatWire
import BotCrypto
import BotSupport
import Courier
import Nostr

/// `bitchat-bridge bench courier` (issue 24): the courier gateway with 5,000 watched peers. Measured side by side in
/// one run:
///
/// - **intake**: every drop through ``CourierGateway`` as the relays deliver it — base64, envelope decode, the checks of
///   COURIER.md §3.4/§4.2, the tag looked up in the watch list's index, the drop queued for its peer;
/// - **linear reference**: the same checks (``CourierDrop/envelope(of:nowMs:)``), then the tag compared against every
///   watched peer's three tags in a list, as a gateway without an index would. Both must find the same peers (checked).
///
/// Drops: half for watched peers, half for strangers (seeded). Memory: resident bytes before and after 5,000 envelopes
/// (one per peer, 96–300-byte ciphertexts) are pending, against the envelope bytes themselves. `--quick`: 500 peers.
enum CourierBench {
    static func run(_ options: BenchOptions) throws(CommandExit) -> BenchReport {
        let peers = options.quick ? 500 : 5_000
        let dropCount = options.quick ? 200 : 2_000
        let now: UInt64 = 1_750_000_000_000
        var rng = SeededRandom(seed: 0x5eed_0024)
        func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) } }

        var configuration = CourierGateway.Configuration(ownNoiseKey: bytes(32), dropKeySeed: bytes(32))
        configuration.maxSubscriptions = (peers + 99) / 100
        configuration.pendingTotal = peers * 2
        var base = CourierGateway(configuration: configuration)
        let keys = (0..<peers).map { _ in bytes(32) }
        for key in keys { _ = base.handle(.peerVerified(MeshPeerID(noisePublicKey: key), noiseKey: key, direct: false), nowMs: now) }
        guard base.watchedCount == peers else { throw CommandExit.failure("bench courier: \(base.watchedCount) of \(peers) peers watched") }

        let day = CourierTag.day(unixSeconds: Int64(now / 1000))
        func drop(for key: [UInt8]) -> NostrEvent {
            let envelope = CourierEnvelope(
                recipientTag: CourierTag.tag(noiseKey: key, day: day), expiryMs: now + 3_600_000, ciphertext: bytes(Int.random(in: 96...300, using: &rng)))
            return try! CourierDrop.event(for: envelope, key: try! SchnorrSecretKey(bytes: SHA256.hash(bytes(32))), now: Int64(now / 1000))
        }
        let drops = (0..<dropCount).map { index in drop(for: index % 2 == 0 ? keys[Int.random(in: 0..<peers, using: &rng)] : bytes(32)) }
        let watchedTags = keys.map { key in (key, CourierTag.candidates(noiseKey: key, unixSeconds: Int64(now / 1000))) }

        // Memory first, before the timing rounds leave freed heap behind: one pending envelope per watched peer.
        var memoryFigures: [(String, Double)] = []
        let before = SpamBench.residentBytes()
        var loaded = base
        var envelopeBytes = 0
        for key in keys {
            let event = drop(for: key)
            envelopeBytes += (try? Base64.decode(event.content).count) ?? 0
            _ = loaded.handle(.drop(event), nowMs: now)
        }
        let after = SpamBench.residentBytes()
        guard loaded.pendingCount == peers else { throw CommandExit.failure("bench courier: \(loaded.pendingCount) of \(peers) pending") }
        memoryFigures = [
            ("pending", Double(loaded.pendingCount)), ("envelope_bytes", Double(envelopeBytes)),
            ("rss_growth_bytes", max(0, after - before)), ("rss_growth_per_envelope_bytes", max(0, after - before) / Double(peers)),
        ]
        // The two sides of a comparison run in turn, round by round, and the speedup is the median of each round's
        // ratio: a load that comes and goes (the test suite beside it on 2 cores) weighs on both sides of a round alike.
        let clock = ContinuousClock()
        func paired(_ ours: () -> Int, _ reference: () -> Int) -> (ours: Double, reference: Double, speedup: Double, found: (Int, Int)) {
            func timed(_ body: () -> Int) -> (micros: Double, found: Int) {
                let start = clock.now
                let found = body()
                return (FloodBench.seconds(clock.now - start) * 1e6 / Double(dropCount), found)
            }
            var found = (ours(), reference())
            var rounds: [(ours: Double, reference: Double)] = []
            for _ in 0..<(options.quick ? 5 : 11) {
                let a = timed(ours), b = timed(reference)
                found = (a.found, b.found)
                rounds.append((a.micros, b.micros))
            }
            func middle(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
            return (middle(rounds.map(\.ours)), middle(rounds.map(\.reference)), middle(rounds.map { $0.reference / $0.ours }), found)
        }
        let match = paired({
            var gateway = base
            for event in drops { _ = gateway.handle(.drop(event), nowMs: now) }
            return gateway.counters.drops[.queued]
        }, {
            var matched = 0
            for event in drops {
                guard let envelope = try? CourierDrop.envelope(of: event, nowMs: now) else { continue }
                if watchedTags.contains(where: { $0.1.contains(envelope.recipientTag) }) { matched += 1 }
            }
            return matched
        })
        let (queued, found) = match.found
        guard queued == found else { throw CommandExit.failure("bench courier: intake queued \(queued), the reference matched \(found)") }
        var report = BenchReport(bench: "courier")
        report.add("match_\(peers)_peers", [
            ("watched_peers", Double(peers)), ("drops", Double(dropCount)), ("for_watched_peers", Double(queued)),
            ("intake_us_per_drop", match.ours), ("linear_reference_us_per_drop", match.reference), ("speedup", match.speedup),
        ])

        // The lookup alone, on envelopes already decoded: the watch list's index (what the gateway keeps) against the
        // scan over every watched peer's three tags.
        let decoded = drops.compactMap { try? CourierDrop.envelope(of: $0, nowMs: now) }
        var index: [String: Int] = [:]
        for (peer, entry) in watchedTags.enumerated() { for tag in entry.1 { index[Hex.encode(tag)] = peer } }
        let lookup = paired(
            { decoded.reduce(0) { $0 + (index[Hex.encode($1.recipientTag)] == nil ? 0 : 1) } },
            { decoded.reduce(0) { count, envelope in count + (watchedTags.contains { $0.1.contains(envelope.recipientTag) } ? 1 : 0) } })
        guard lookup.found.0 == lookup.found.1, lookup.found.0 == queued else {
            throw CommandExit.failure("bench courier: the index found \(lookup.found.0), the scan \(lookup.found.1), the gateway \(queued)")
        }
        report.add("lookup_\(peers)_peers", [
            ("index_us_per_drop", lookup.ours), ("linear_scan_us_per_drop", lookup.reference), ("speedup", lookup.speedup),
        ])
        report.add("memory_\(peers)_pending", memoryFigures)

        report.notes.append(
            "a drop through the gateway is \((match.speedup * 10).rounded() / 10)× the linear scan over \(peers) watched peers "
                + "(the tag lookup alone \(Int(lookup.speedup.rounded()))×; decoding the drop is the rest); "
                + "\(peers) pending envelopes (\(envelopeBytes / 1024) KiB of envelopes) grew RSS by \(Int(max(0, after - before)) / 1024) KiB")
        return report
    }
}
