import BotCrypto
import BotSupport
import BridgeTestSupport
import Foundation
import Nostr
import NostrRelay
import Synchronization
import Testing

/// Keeps every log record, for tests that check what an operator would read.
final class CollectingSink: LogSink {
    let records = Mutex<[LogRecord]>([])
    func emit(_ record: LogRecord) { records.withLock { $0.append(record) } }
    var lines: [String] { records.withLock { $0.map(\.jsonLine) } }
}

@Suite("NIP-42 against nostr-sdk LocalRelay", TestEnvironment.needsVenv)
struct Nip42Tests {
    static let listenerKey = try! SchnorrSecretKey(bytes: [UInt8](repeating: 11, count: 32))
    static let publisherKey = try! SchnorrSecretKey(bytes: [UInt8](repeating: 12, count: 32))

    /// The relay requires AUTH for reading and writing; both clients have an operator-enabled auth key.
    /// Their REQ and queued EVENT meet `auth-required`, are re-sent after AUTH, and the event arrives.
    @Test func authEnabledRoundTripThroughARelayThatRequiresIt() async throws {
        let port = LoopbackPort.free()
        let url = "ws://127.0.0.1:\(port)"
        let relay = try await Peers.start(.sdk, port: port, directory: "", arguments: ["--nip42", "both"])
        defer { relay.stop(signal: SIGKILL) }
        let listener = try PoolHarness(urls: [url], authKey: Self.listenerKey)
        listener.pool.subscribe(id: "geo-u4pruy", filters: [RealRelayTests.filter], lookback: 3600)
        // Kind 20000 is not stored: publish only once the relay has taken the re-sent REQ (its EOSE).
        try await listener.wait("EOSE for the REQ re-sent after AUTH") { _ in listener.pool.stats(url)?.eoseReceived == 1 }
        let publisher = try PoolHarness(urls: [url], authKey: Self.publisherKey)
        let event = try RealRelayTests.chat("behind NIP-42")
        publisher.pool.publish(event)  // before the connection (and so before AUTH) is up
        try await publisher.wait("OK true for the event") {
            $0.contains { if case .ok(_, event.id.hex, true, _) = $0 { true } else { false } }
        }
        try await listener.wait("the event, after AUTH") { $0.contains { if case .event(event, _, _) = $0 { true } else { false } } }
        let listenerStats = try #require(listener.pool.stats(url))
        let publisherStats = try #require(publisher.pool.stats(url))
        #expect(listenerStats.authAnswered == 1)
        #expect(listenerStats.closed[.authRequired] == 1)
        #expect(listenerStats.authRetried == 1)  // the REQ
        #expect(publisherStats.authAnswered == 1)
        #expect(publisherStats.okRejected[.authRequired] == 1)
        #expect(publisherStats.authRetried == 1)  // the EVENT
        #expect(listener.rejections.isEmpty)
        await publisher.stop()
        await listener.stop()
    }

    /// AUTH not enabled (the default, as phones): the challenge is ignored and the relay's
    /// `auth-required` CLOSED is reported, counted per relay and logged with its reason.
    @Test func authNotEnabledCountsAndLogsTheAuthRequiredClose() async throws {
        let port = LoopbackPort.free()
        let url = "ws://127.0.0.1:\(port)"
        let relay = try await Peers.start(.sdk, port: port, directory: "", arguments: ["--nip42", "read"])
        defer { relay.stop(signal: SIGKILL) }
        let sink = CollectingSink()
        let listener = try PoolHarness(urls: [url], logger: Logger(label: "pool", level: .info, sink: sink))
        listener.pool.subscribe(id: "geo-u4pruy", filters: [RealRelayTests.filter], lookback: 3600)
        try await listener.wait("CLOSED auth-required") {
            $0.contains { if case .closed(url, "geo-u4pruy", let message) = $0 { message.hasPrefix("auth-required:") } else { false } }
        }
        let stats = try #require(listener.pool.stats(url))
        #expect(stats.closed.counts == [.authRequired: 1])
        #expect(stats.authAnswered == 0)
        #expect(stats.authRetried == 0)
        #expect(sink.lines.contains { $0.contains(#""msg":"subscription closed by relay""#) && $0.contains(#""reason":"auth-required:"#) })
        await listener.stop()
        // The challenge arrives before or after the CLOSED; by the end it has been counted as ignored.
        #expect(listener.pool.stats(url)?.authIgnored == 1)
    }
}
