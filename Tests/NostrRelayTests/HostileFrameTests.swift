import BotCrypto
import BotSupport
import BridgeTestSupport
import Foundation
import Nostr
import NostrRelay
import Testing

/// Hand-made frames and misbehaviour (`tools/peers/hostile_relay.py`, ``HostileRelay``) reach the live pool
/// over a real loopback socket.
@Suite("Hostile frames over a real socket", TestEnvironment.needsVenv)
struct HostileFrameTests {
    static func signed(tags: Int, content: String) throws -> NostrEvent {
        let extra = (1..<tags).map { ["t", "tag\($0)"] }
        return try UnsignedEvent(pubkey: RealRelayTests.key.publicKey, createdAt: Int64(Date().timeIntervalSince1970),
                                 kind: 20000, tags: [["g", "u4pruy"]] + extra, content: content)
            .signed(with: RealRelayTests.key)
    }

    @Test func malformedFramesAreNamedDropsAndTheConnectionSurvives() async throws {
        let directory = TestEnvironment.temporaryDirectory("hostile")
        let port = LoopbackPort.free()
        let url = "ws://127.0.0.1:\(port)"
        let maxTags = try Self.signed(tags: UnverifiedEvent.Limits.maxTags, content: "64 tags: the limit")
        let tooManyTags = try Self.signed(tags: UnverifiedEvent.Limits.maxTags + 1, content: "65 tags")
        let valid = try Self.signed(tags: 1, content: "still alive")
        func eventFrame(_ body: String) -> String { #"["EVENT","{SUB}",\#(body)]"# }
        let frames = [
            // 1 MiB: over the socket limit (512 KiB), discarded while reassembling.
            eventFrame(#"{"content":""# + String(repeating: "x", count: 1 << 20) + #""}"#),
            // 300 KiB: through the socket, over the parser's 256 KiB frame limit.
            eventFrame(#"{"content":""# + String(repeating: "y", count: 300 << 10) + #""}"#),
            #"["EVENT","{SUB}",{"id":"ab"#,  // truncated JSON
            eventFrame("42"),  // event is a number
            #"["EOSE",5]"#,  // subscription id is a number
            #"["OK","abc","yes",""]"#,  // accepted flag is a string
            #"{"EVENT":"{SUB}"}"#,  // not an array
            #"["HELLO","{SUB}"]"#,  // unknown verb
            eventFrame(tooManyTags.json),
            eventFrame(maxTags.json),
            eventFrame(valid.json),
        ]
        let relay = try await HostileRelay.start(port: port, frames: frames, directory: directory)
        defer { relay.stop(signal: SIGKILL) }
        let listener = try PoolHarness(urls: [url])
        listener.pool.subscribe(id: "geo-u4pruy", filters: [RealRelayTests.filter], lookback: 3600)
        try await listener.wait("the valid event after the hostile frames") {
            $0.contains { if case .event(valid, _, _) = $0 { true } else { false } }
        }
        let stats = try #require(listener.pool.stats(url))
        #expect(stats.drops.counts == [
            .frameTooLarge: 2, .invalidJSON: 1, .wrongType: 3, .notAMessageArray: 1, .unknownVerb: 1, .tooManyTags: 1,
        ])
        #expect(listener.events == [maxTags, valid])
        #expect(stats.connects == 1)
        #expect(stats.disconnects == 0)
        await listener.stop()
    }
}
