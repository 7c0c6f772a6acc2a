import BotCrypto
import BotSupport
import BridgeTestSupport
import Foundation
import Nostr
import Testing

/// The built executable under a 1 MiB stack (`ulimit -s 1024`: the stack size of every thread it starts,
/// the lws thread included), where issue 14's thunk chain crashed after 2 s at 10,000 frames/s.
///
/// Decision (issue 14 asks for 1,000,000 frames): the suite floods 100,000 frames through a live
/// `nostr listen` and runs `bench flood --quick`; the full 1,000,000 frames are the bench's `mixed_1m`
/// case (`bitchat-bridge bench flood`, ≈ 10 s in release), which would take minutes in a debug build.
@Suite("The executable under floods with a 1 MiB stack", TestEnvironment.needsVenv, .serialized)
struct FloodProcessTests {
    /// `bitchat-bridge ARGS` under `ulimit -s 1024`.
    static func smallStack(_ arguments: [String], name: String) throws -> ChildProcess {
        try ChildProcess("/bin/sh", ["-c", #"ulimit -s 1024 && exec "$0" "$@""#, TestEnvironment.bridgeExecutable] + arguments, name: name)
    }

    /// 100,000 frames — distinct valid events (mostly over the relay's budget), repeats, events for a
    /// subscription never made — then 50 garbage frames (below the misbehaviour allowance, so the relay
    /// stays connected) and a marker event; the marker's line proves every frame before it was handled.
    /// Then SIGTERM: exit 0 within 5 s.
    @Test func listenSurvivesAHundredThousandFramesAndStopsOnSIGTERM() async throws {
        let directory = TestEnvironment.temporaryDirectory("listen-flood")
        let port = LoopbackPort.free()
        let frames = try HostileFlood.mixedFrames(distinctValid: 500, strikes: false)
        let garbage = (0..<50).map { $0 % 2 == 0 ? "[]" : #"["EVENT","{SUB}",{"id":"ab"# }
        let marker = try HostileFrameTests.signed(tags: 1, content: "marker after 100,000 frames")
        let relay = try await HostileRelay.start(
            port: port, mode: .flood, frames: frames, then: garbage + [HostileRelayTests.eventFrame(marker)], count: 100_000,
            directory: directory)
        defer { relay.stop(signal: SIGKILL) }
        let listen = try Self.smallStack(
            ["nostr", "listen", "--geohash", "u4pruy", "--relay", "ws://127.0.0.1:\(port)"], name: "nostr-listen")
        defer { listen.stop(signal: SIGKILL) }
        try await listen.waitForLine(timeout: .seconds(240), "the marker event after the flood") { $0.contains(marker.id.hex) }
        #expect(HostileRelay.count("CONNECT", in: relay) == 1, "never closed for misbehaviour")
        let rejected = listen.stdoutLines.filter { $0.contains(#""type":"rejected""#) }
        #expect(rejected.contains { $0.contains(#""reason":"unknown_subscription""#) })
        #expect(rejected.count < 200, "drops are reported first and every 1000th, not one line each")
        let started = ContinuousClock.now
        kill(listen.pid, SIGTERM)
        let status = try await listen.waitForExit(timeout: .seconds(5))
        #expect(status == 0, "\(listen.transcript.suffix(2000))")
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    /// `bench flood --quick` end to end with a 1 MiB stack: every case completes, the whole-path figures
    /// are present, drops land in the right categories.
    @Test func benchFloodQuickRunsWithASmallStack() async throws {
        let bench = try Self.smallStack(["bench", "flood", "--quick", "--json"], name: "bench-flood")
        defer { bench.stop(signal: SIGKILL) }
        let status = try await bench.waitForExit(timeout: .seconds(300))
        #expect(status == 0, "\(bench.transcript)")
        let json = try JSONParser().parse(try #require(bench.stdoutLines.last))
        #expect(json["bench"] == .string("flood"))
        let cases = try #require(json["cases"])
        for name in ["valid", "invalid", "garbage", "mixed_1m"] {
            let result = try #require(cases[name], "\(name)")
            #expect(result["frames_per_s"]?.numberValue.map { $0 > 0 } == true, "\(name)")
            #expect(result["cpu_ratio_first_to_last"]?.numberValue.map { $0 > 0 } == true, "\(name)")
            #expect(result["drops_queue"]?.numberValue == 0, "\(name): back-pressure, not drops")
        }
        #expect(cases["garbage"]?["drops_malformed"]?.numberValue == cases["garbage"]?["frames"]?.numberValue)
        #expect(cases["invalid"]?["delivered"]?.numberValue == 0)
        #expect(cases["valid"]?["delivered"]?.numberValue.map { $0 > 0 } == true)
        let spread = try #require(cases["verify_spread"])
        #expect(spread["bare_valid"]?.numberValue == spread["events"]?.numberValue)
        #expect(spread["ratio_to_bare"]?.numberValue.map { $0 > 0 } == true)
    }
}
