import BridgeApp
import BotProcess
import BotSupport
import Foundation
import Synchronization

/// `bitchat-bridge demo`: the whole job on one machine, offline. Starts a real Nostr relay on loopback
/// (nostr-sdk's LocalRelay, from the Python `.venv`), a radio-hub "island", the bridge (`run`), and scripted
/// phones made of this binary's own commands; prints a live view of what crossed and what was hidden and
/// why, then the moderation log, then stops everything it started.
enum DemoCommand {
    static let spec = CommandSpec(
        path: "demo",
        summary: "Run the offline demo: relay, radio-hub, bridge and scripted phones on loopback.",
        options: [
            .value("--venv", "DIR", "Python virtualenv with nostr-sdk (default .venv, made by scripts/setup)."),
            .value("--peers", "DIR", "Directory with sdk_relay.py (default tools/peers)."),
            .flag("--keep-running", "Leave relay, hub, bridge and reader running until Ctrl-C (prints how to join)."),
        ]
    )

    static let geohash = "u4pruy"

    static func run(_ args: ParsedArguments) throws(CommandExit) {
        let venv = args.value("--venv") ?? ".venv"
        let peers = args.value("--peers") ?? "tools/peers"
        guard FileManager.default.isExecutableFile(atPath: venv + "/bin/python") else {
            throw .failure("no Python venv at \(venv) (run scripts/demo, which prepares it, or pass --venv)")
        }
        guard FileManager.default.fileExists(atPath: peers + "/sdk_relay.py") else {
            throw .failure("no \(peers)/sdk_relay.py (run from the repository root or pass --peers)")
        }
        let keepRunning = args.has("--keep-running")
        let code = try runBlocking { () async throws(CommandExit) -> Int32 in
            do {
                return try await Demo(venv: venv, peers: peers).play(keepRunning: keepRunning)
            } catch let exit as CommandExit {
                throw exit
            } catch {
                throw .failure("demo: \(error)")
            }
        }
        guard code == 0 else { throw .failure("the demo did not see what it expected (see above)") }
    }
}

/// One demo run: its processes, its temporary data, its live view.
final class Demo: @unchecked Sendable {
    static let notice = "water point moved to gate C"
    let venv: String
    let peers: String
    let directory = NSTemporaryDirectory() + "bitchat-bridge-demo-\(getpid())"
    let binary = Paths.executablePath() ?? CommandLine.arguments[0]
    var processes: [ChildProcess] = []
    var shown: [ObjectIdentifier: (out: Int, err: Int)] = [:]
    let started = Date()

    init(venv: String, peers: String) {
        self.venv = venv
        self.peers = peers
    }

    deinit { stopAll() }

    func stopAll() {
        for process in processes.reversed() where process.isRunning { process.stop() }
    }

    func spawn(_ arguments: [String], environment: [String: String] = [:], name: String) throws -> ChildProcess {
        let process = try ChildProcess(binary, arguments, environment: environment, name: name)
        processes.append(process)
        return process
    }

    func say(_ text: String) {
        print(String(format: "[%5.1fs] ", Date().timeIntervalSince(started)) + text)
        fflush(nil)
    }

    func play(keepRunning: Bool) async throws -> Int32 {
        defer { stopAll() }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        say("bitchat-bridge demo: everything below runs on this machine, on 127.0.0.1 only (data in \(directory))")

        let relayPort = LoopbackPort.free()
        let relay = try ChildProcess(venv + "/bin/python", [peers + "/sdk_relay.py", "--port", "\(relayPort)"], name: "relay")
        processes.append(relay)
        try await relay.waitForLine("relay ready") { $0.hasPrefix("READY") }
        let relayURL = "ws://127.0.0.1:\(relayPort)"
        say("relay    a real Nostr relay (nostr-sdk LocalRelay) at \(relayURL)")

        let hubPort = LoopbackPort.free()
        let hub = try spawn(["radio-hub", "--listen", "127.0.0.1:\(hubPort)", "--mtu", "512"], name: "hub")
        try await hub.waitForLine("hub ready") { $0.contains("\"listening\"") }
        say("radio    a virtual radio island at tcp://127.0.0.1:\(hubPort) (frames up to 512 bytes, as over BLE; larger ones go in fragments)")

        // The console on, with its token, so a kept-running demo is one a moderator can sign in to.
        let tokenCommand = "\(binary) console-token --data-dir \(directory)/bridge"
        _ = try await spawn(["console-token", "--data-dir", directory + "/bridge"], name: "console-token").waitForExit()
        let consoleURL = "http://127.0.0.1:\(LoopbackPort.free())"
        let bridge = try spawn(["run"], environment: [
            "BRIDGE_GEOHASH": DemoCommand.geohash, "BRIDGE_DATA_DIR": directory + "/bridge", "BRIDGE_RELAYS": relayURL,
            "BRIDGE_RELAY_DIRECTORY": "off", "BRIDGE_MESH": "tcp://127.0.0.1:\(hubPort)",
            "BRIDGE_HTTP_LISTEN": String(consoleURL.dropFirst("http://".count)),
            "BRIDGE_NICKNAME": "stage-bridge", "BRIDGE_POW_BITS": "8", "BRIDGE_LOG_LEVEL": "info",
        ], name: "bridge")
        try await bridge.waitForLine(stderr: true, "bridge connected") { $0.contains("relay connected") }
        say("bridge   bitchat-bridge run --geohash \(DemoCommand.geohash): gateway + rendezvous, spam filter on both sides")
        say("console  \(consoleURL)/console (sign in with the token \(tokenCommand) prints)")

        let reader = try spawn(["mesh", "listen", "--mesh", "tcp://127.0.0.1:\(hubPort)", "--ephemeral", "--nickname", "reader"], name: "reader")
        let watcher = try spawn(["nostr", "listen", "--geohash", DemoCommand.geohash, "--relay", relayURL], name: "watcher")
        _ = try await reader.waitForLine("reader sees the bridge") { $0.contains("\"peer\"") && $0.contains("bridge") }
        say("phones   a mesh-only reader on the island; an internet user watching the channel")
        say("")

        var expected: [String] = []
        func post(_ text: String, as user: String) async throws -> String {
            let poster = try spawn(
                ["nostr", "post", "--geohash", DemoCommand.geohash, "--relay", relayURL, "--pow", "8", "--nickname", user, text],
                environment: ["BRIDGE_DATA_DIR": directory + "/phone-" + user], name: "post-\(user)")
            let line = try await poster.waitForLine("post by \(user)") { $0.contains("\"published\"") }
            _ = try await poster.waitForExit()
            return (try? JSONParser().parse(line))?["event"]?["id"]?.stringValue ?? ""
        }

        say("▶ alice posts on the channel from the internet")
        expected.append(try await post("hello festival, anyone near the main stage?", as: "alice"))
        try await pump(seconds: 2, reader: reader, watcher: watcher, bridge: bridge)

        say("▶ bob, whose phone has no internet, deposits his message with the bridge over the mesh (toGateway)")
        let deposit = try spawn(
            ["mesh", "deposit", "--mesh", "tcp://127.0.0.1:\(hubPort)", "--ephemeral", "--nickname", "bob", "--channel",
             DemoCommand.geohash, "no signal here, but the mesh works!"], name: "bob")
        _ = try await deposit.waitForLine("bob's deposit") { $0.contains("\"deposited\"") }
        try await pump(seconds: 2, reader: reader, watcher: watcher, bridge: bridge)

        say("▶ a flooder posts 10 messages in a burst from one key")
        for i in 1...10 { _ = try await post("BUY CHEAP TICKETS NOW \(i)", as: "flooder") }
        try await pump(seconds: 2, reader: reader, watcher: watcher, bridge: bridge)

        say("▶ a copy swarm: 4 fresh identities post the same line")
        for i in 1...4 { _ = try await post("happy new year everyone", as: "swarm\(i)") }
        try await pump(seconds: 3, reader: reader, watcher: watcher, bridge: bridge)

        say("▶ the operator posts a notice for everyone at the site: bitchat-bridge notice --urgent \"\(Self.notice)\"")
        let notice = try spawn(["notice", "--data-dir", directory + "/bridge", "--urgent", Self.notice], name: "notice")
        let noticeCode = try await notice.waitForExit()
        if noticeCode != 0 { say("  notice failed: " + (notice.stderrLines + notice.stdoutLines).joined(separator: " ")) }
        try await pump(seconds: 3, reader: reader, watcher: watcher, bridge: bridge)

        say("")
        say("moderation log (bitchat-bridge modlog):")
        let modlog = try spawn(["modlog", "--data-dir", directory + "/bridge"], name: "modlog")
        _ = try await modlog.waitForExit()
        for line in modlog.stdoutLines + modlog.stderrLines { print("    " + line) }

        let carried = reader.stdoutLines.filter { $0.contains("\"carrier\"") }.count
        let hidden = bridge.stderrLines.filter { $0.contains("\"msg\":\"hidden\"") }.count
        let noticeSeen = reader.stdoutLines.contains { $0.contains("\"event\":\"board\"") && $0.contains(Self.notice) }
        say("")
        say("summary: \(carried) channel messages reached the mesh, \(hidden) hidden by the bridge's judgement, "
            + "the operator's notice \(noticeSeen ? "is on the mesh's board" : "did NOT reach the mesh")")
        if keepRunning {
            say("still running: relay \(relayURL), island tcp://127.0.0.1:\(hubPort), console \(consoleURL)/console. Try:")
            say("  \(binary) mesh say --mesh tcp://127.0.0.1:\(hubPort) --ephemeral hi")
            say("  \(binary) nostr post --geohash \(DemoCommand.geohash) --relay \(relayURL) hello")
            say("Ctrl-C stops everything.")
            let stopRequested = Mutex(false)
            let handler = SignalHandler(ProcessSignal.termination) { _ in stopRequested.withLock { $0 = true } }
            defer { handler.cancel() }
            while bridge.isRunning, !stopRequested.withLock({ $0 }) {
                try await pump(seconds: 0.5, reader: reader, watcher: watcher, bridge: bridge)
            }
        }
        say("stopping everything the demo started")
        return carried > 0 && noticeSeen && expected.allSatisfy { id in reader.stdoutLines.contains { $0.contains(id) } } ? 0 : 1
    }

    /// Prints new output of the reader, the channel watcher and the bridge as a live view, for `seconds`.
    func pump(seconds: Double, reader: ChildProcess, watcher: ChildProcess, bridge: ChildProcess) async throws {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            for line in newLines(reader, stderr: false) { describeMesh(line) }
            for line in newLines(watcher, stderr: false) { describeNostr(line) }
            for line in newLines(bridge, stderr: true) { describeBridge(line) }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    func newLines(_ process: ChildProcess, stderr: Bool) -> [String] {
        let key = ObjectIdentifier(process)
        let lines = stderr ? process.stderrLines : process.stdoutLines
        var seen = shown[key] ?? (0, 0)
        let start = stderr ? seen.err : seen.out
        guard lines.count > start else { return [] }
        if stderr { seen.err = lines.count } else { seen.out = lines.count }
        shown[key] = seen
        return Array(lines[start...])
    }

    func describeMesh(_ line: String) {
        guard let value = try? JSONParser().parse(line) else { return }
        switch value["event"]?.stringValue {
        case "carrier":
            let event = value["nostrEvent"]
            let nick = event?["tags"]?.arrayValue?.first { $0.arrayValue?.first == .string("n") }?.arrayValue?.last?.stringValue ?? "anon"
            let content = event?["content"]?.stringValue ?? ""
            say("  mesh  ← \(value["direction"]?.stringValue ?? "carrier"): \(nick): \(content)")
        case "message":
            say("  mesh  ← radio: \(value["nickname"]?.stringValue ?? "?"): \(value["text"]?.stringValue ?? "")")
        case "board":
            let urgent = value["urgent"] == .bool(true) ? "URGENT " : ""
            say("  mesh  ← board post, \(urgent)signed by \(value["nickname"]?.stringValue ?? "?"): \(value["content"]?.stringValue ?? "")")
        default: break
        }
    }

    func describeNostr(_ line: String) {
        guard let value = try? JSONParser().parse(line), value["type"] == .string("event"),
            let event = value["event"], event["kind"] == .integer(20000)
        else { return }
        let nick = event["tags"]?.arrayValue?.first { $0.arrayValue?.first == .string("n") }?.arrayValue?.last?.stringValue ?? "anon"
        say("  nostr ← channel: \(nick): \(event["content"]?.stringValue ?? "")")
    }

    func describeBridge(_ line: String) {
        guard let value = try? JSONParser().parse(line) else { return }
        switch value["msg"]?.stringValue {
        case "hidden":
            let rule = value["hidden.rule"]?.stringValue ?? "?"
            let direction = value["hidden.direction"]?.stringValue ?? "?"
            let text = value["hidden.text"]?.stringValue.map { ": \($0)" } ?? ""
            say("  HIDDEN by \(rule) (\(direction))\(text)")
        case "published":
            say("  bridge → relays: published \(value["event.id"]?.stringValue?.prefix(12) ?? "")…")
        case "board post copied to nostr":
            say("  bridge → relays: the notice as a kind-1 note with an expiry (\(value["event.id"]?.stringValue?.prefix(12) ?? "")…)")
        default: break
        }
    }
}
