import BotSupport
import Bridge
import Console
import Mesh
import MeshRuntime
import Nostr
import NostrRelay
import BridgeCore

/// The figures `/metrics` serves and the console's charts draw, gathered when asked (a scrape, a chart sample):
/// the coordinator's snapshot (one actor hop), the mesh node's counters (one hop), the relay pool's and the
/// transport's state (read under their locks).
struct MetricsSource: Sendable {
    let pool: RelayPool
    let node: MeshNode
    let transport: any MeshTransport
    let coordinator: BridgeCoordinator
    let startedAt: ContinuousClock.Instant

    func gather() async -> BridgeMetrics {
        var metrics = BridgeMetrics()
        metrics.add(await coordinator.snapshot())
        let relays = pool.snapshot()
        Self.addRelays(relays, to: &metrics)
        metrics.queueDrops[.relayEvents] = pool.droppedEvents
        metrics.mesh = await node.counters
        metrics.meshNode = await node.driverCounters
        let mesh = transport.status
        metrics.meshTransport = mesh
        metrics.uptimeSeconds = Double((ContinuousClock.now - startedAt).components.seconds)
        metrics.build = .init(version: BridgeVersion.string, commit: BridgeVersion.commit)
        let report = BridgeHealth(startedAt: startedAt).evaluate(Self.healthInputs(relays: relays, mesh: mesh), now: .now)
        metrics.health = Dictionary(report.checks.map { ($0.name, $0.ok) }) { first, _ in first }
        metrics.process = ProcessFigures.read()
        return metrics
    }
}

extension MetricsSource {
    /// The relay side of the metrics, from one snapshot of the pool (every relay read under one lock).
    static func addRelays(_ snapshot: RelayPoolSnapshot, to metrics: inout BridgeMetrics) {
        for relay in snapshot.relays {
            let stats = relay.stats
            var figures = BridgeMetrics.RelayFigures()
            figures.state = relay.state.name
            figures.answering = relay.isAnswering
            figures.clockOffset = stats.clockOffset
            figures.reconnects = max(0, stats.connects - 1)
            figures.framesReceived = stats.framesReceived
            figures.eventsReceived = stats.eventsReceived
            figures.delivered = stats.delivered
            figures.duplicates = stats.duplicates
            figures.drops = stats.drops.byLabel
            figures.failures = stats.failures.byLabel
            figures.losses = stats.losses.byLabel
            figures.okRejected = stats.okRejected.byLabel
            figures.closed = stats.closed.byLabel
            metrics.relays[relay.url] = figures
        }
        metrics.queueDepths[.relayPublish] = snapshot.relays.reduce(0) { $0 + $1.queuedEvents }
        metrics.queueDrops[.relayPublish] = snapshot.relays.reduce(0) { $0 + $1.stats.queueDropped }
        let verifier = snapshot.verification
        metrics.eventsVerified = verifier.verified
        var rejected = Tally<BridgeCounters.VerificationFailure>()
        rejected.add(.idMismatch, verifier.idMismatch)
        rejected.add(.badSignature, verifier.badSignature)
        rejected.add(.overBudget, verifier.overBudget)
        rejected.add(.invalidPublicKey, verifier.invalidPublicKey)
        rejected.add(.missingIDOrSignature, verifier.missingIDOrSignature)
        metrics.eventsRejected = rejected.byLabel
    }

    /// The health rule's inputs from the pool's and the transport's own state: a relay counts once it has
    /// answered recently (``RelaySnapshot/isAnswering``); every other relay is named with its state and why.
    static func healthInputs(relays snapshot: RelayPoolSnapshot, mesh: MeshTransportStatus) -> BridgeHealth.Inputs {
        var problems: [String] = []
        for relay in snapshot.relays where !relay.isAnswering {
            var line = "\(relay.url): \(relay.state.name)"
            if relay.state.name == "open" {
                line += relay.sinceLastAnswer.map { ", silent for \($0.components.seconds) s" } ?? ", no answer yet"
            } else if let failure = relay.stats.lastFailure {
                line += " (\(failure))"
            }
            if let wait = relay.nextAttemptIn {
                let (seconds, fraction) = wait.components
                line += ", next attempt in \(seconds + (fraction > 0 ? 1 : 0)) s"
            }
            problems.append(line)
        }
        return BridgeHealth.Inputs(
            answeringRelays: snapshot.answeringCount, configuredRelays: snapshot.relays.count,
            relaysHaveAnswered: snapshot.relays.contains { $0.stats.framesReceived + $0.stats.pongs > 0 },
            relayProblems: problems, meshUp: mesh.isUp, meshDetail: mesh.detail)
    }
}
