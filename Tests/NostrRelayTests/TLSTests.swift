import BotCrypto
import BotSupport
import BridgeTestSupport
import Foundation
import Nostr
import NostrRelay
import Testing

func connectFailures(_ reports: [RelayPoolEvent]) -> [String] {
    reports.compactMap { if case .connectFailed(_, let reason) = $0 { reason } else { nil } }
}

@Suite("wss:// with a self-signed CA file", TestEnvironment.needsVenv, .serialized)
struct TLSTests {
    /// nostr-relay serves TLS with a certificate for localhost/127.0.0.1 made by the test. With that
    /// certificate as the CA file, post → listen works over wss://; with the system store the
    /// connection is refused and the reason names the certificate problem.
    @Test func wssRoundTripWithCAFileAndRefusalWithTheSystemStore() async throws {
        let directory = TestEnvironment.temporaryDirectory("tls")
        let tls = try await TestCertificate.make(in: directory, commonName: "localhost",
                                                 subjectAltName: "DNS:localhost,IP:127.0.0.1")
        let port = LoopbackPort.free()
        let url = "wss://localhost:\(port)"
        let relay = try await Peers.start(.nostrRelay, port: port, directory: directory, tls: tls)
        defer { relay.stop(signal: SIGKILL) }

        let listener = try PoolHarness(urls: [url], caFile: tls.cert)
        listener.pool.subscribe(id: "geo-u4pruy", filters: [RealRelayTests.filter], lookback: 3600)
        try await listener.wait("listener connected over TLS") { connectedCount($0) >= 1 }
        let publisher = try PoolHarness(urls: [url], caFile: tls.cert)
        let event = try RealRelayTests.chat("over wss:// with a private CA")
        publisher.pool.publish(event)
        try await publisher.wait("OK over TLS") { $0.contains { if case .ok(_, event.id.hex, true, _) = $0 { true } else { false } } }
        try await listener.wait("event over TLS") { $0.contains { if case .event(event, url, _) = $0 { true } else { false } } }
        // The CA file is trusted: no attempt failed on the certificate. (In one loaded CI-style run the
        // listener's first attempt ended as a plain connect failure and the retry connected; a transient
        // refusal is not what this test is about, a certificate verdict is.)
        let listenerFailures = connectFailures(listener.reports.all)
        #expect(listenerFailures.allSatisfy { !$0.contains("certificate") }, "\(listenerFailures)")
        #expect((listener.pool.stats(url)?.failures.counts ?? [:]).keys.allSatisfy { $0 == .connect }, "\(listenerFailures)")
        await publisher.stop()
        await listener.stop()

        // The same relay, trusted through the system store only: refused, with OpenSSL's reason.
        let untrusting = try PoolHarness(urls: [url])
        try await untrusting.wait("TLS refusal") { !connectFailures($0).isEmpty }
        let reason = try #require(connectFailures(untrusting.reports.all).first)
        #expect(reason.hasSuffix("(certificate: self-signed certificate)"), "\(reason)")
        await untrusting.stop()
        // Counted once per refused attempt, as a connect failure (read after the stop: a loaded run may
        // have fitted a retry in after the backoff's 1 s).
        let reports = untrusting.reports.all
        #expect(connectedCount(reports) == 0)
        let failures = try #require(untrusting.pool.stats(url)?.failures)
        #expect(failures[.connect] == connectFailures(reports).count)
        #expect(failures.total == failures[.connect])
    }

    /// A certificate that is trusted (it is the CA file) but names another host is refused too.
    @Test func trustedCertificateForAnotherHostIsRefused() async throws {
        let directory = TestEnvironment.temporaryDirectory("tls-name")
        let tls = try await TestCertificate.make(in: directory, commonName: "wrong.example",
                                                 subjectAltName: "DNS:wrong.example")
        let port = LoopbackPort.free()
        let relay = try await HostileRelay.start(port: port, frames: [], directory: directory, cert: tls.cert, key: tls.key)
        defer { relay.stop(signal: SIGKILL) }
        for (url, expected) in [("wss://localhost:\(port)", "(certificate: hostname mismatch)"),
                                ("wss://127.0.0.1:\(port)", "(certificate: IP address mismatch)")] {
            let client = try PoolHarness(urls: [url], caFile: tls.cert)
            try await client.wait("hostname refusal for \(url)") { !connectFailures($0).isEmpty }
            let reason = try #require(connectFailures(client.reports.all).first)
            #expect(reason.hasSuffix(expected), "\(url): \(reason)")
            #expect(connectedCount(client.reports.all) == 0)
            await client.stop()
        }
    }
}
