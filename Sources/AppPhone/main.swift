import AppModels
import BitchatWire
import BotCrypto
import BotSupport
import Foundation
import Mesh
import MeshRuntime
import VirtualRadio

// AppPhone: a phone that behaves as a bitchat app's own code treats what a bridge sends (`AppModels.AppPhoneModel`:
// link binding, ingress guard, gossip store, what it shows), on radio-hub segments, for the end-to-end tests of
// issue 33. A test tool, not part of the product: every radio hub it joins stands for one BLE link of the phone.
//
//   AppPhone --app ios|android --mesh tcp://127.0.0.1:PORT [--nickname NAME] --seconds N
//
// JSON lines on stdout: {"event":"ready","peerID":…}, {"event":"owner","link":L,"peer":…} when a link changes
// owner, {"event":"shown","sender":…,"name":…,"text":…,"bySync":…} for each line it shows, and last
// {"event":"report","drops":{…},"answered":{…},"replies":[[requester, sender, type]…],"owners":{…},"peers":{…}}.

func emit(_ value: JSONValue) {
    let line = Array((JSONWriter.compact(value) + "\n").utf8)
    line.withUnsafeBytes { _ = write(1, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("AppPhone: \(message)\n".utf8))
    exit(64)
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let name = arguments.popFirst() {
    guard name.hasPrefix("--"), let value = arguments.popFirst() else { fail("usage: --app ios|android --mesh URL [--nickname NAME] --seconds N") }
    options[name] = value
}
guard let app = options["--app"].flatMap(AppPhoneModel.App.init(rawValue:)) else { fail("--app must be ios or android") }
guard let url = options["--mesh"], let endpoint = try? RadioClientTransport.Endpoint(url: url) else { fail("--mesh must be tcp://HOST:PORT") }
guard let seconds = options["--seconds"].flatMap(Int.init), (1...3_600).contains(seconds) else { fail("--seconds must be 1…3600") }
let nickname = options["--nickname"] ?? app.rawValue

let clock = SystemTime()
let model = AppPhoneModel(app: app, nickname: nickname, noiseKey: .generate(), signingKey: .generate(), start: clock.nowMs())
let transport: RadioClientTransport
do {
    transport = try RadioClientTransport.connect([endpoint])
} catch {
    fail("cannot join \(url): \(error)")
}
let node = MeshNodeOf(engine: model, transport: transport, clock: clock, seed: SecureRandom.bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
emit(.object([("event", .string("ready")), ("peerID", .string(model.peerID.hex)), ("app", .string(app.rawValue))]))

let running = Task { await node.run() }
var shownSoFar = 0
var eventsSoFar = 0
let deadline = ContinuousClock.now + .seconds(seconds)
while ContinuousClock.now < deadline {
    try? await Task.sleep(for: .milliseconds(250))
    let report = await node.machine.report
    for shown in report.shown.dropFirst(shownSoFar) {
        emit(.object([
            ("event", .string("shown")), ("sender", .string(shown.sender.hex)), ("name", .string(shown.name)), ("text", .string(shown.text)),
            ("bySync", .bool(shown.bySync)),
        ]))
    }
    shownSoFar = report.shown.count
    for case .linkOwner(let link, let peer) in report.events.dropFirst(eventsSoFar) {
        emit(.object([("event", .string("owner")), ("link", .integer(Int64(link.rawValue))), ("peer", .string(peer.hex))]))
    }
    eventsSoFar = report.events.count
}
let final = await node.machine
transport.close()
await running.value
let report = final.report
emit(.object([
    ("event", .string("report")),
    ("drops", .object(report.drops.sortedByLabel.map { ($0.key.label, .integer(Int64($0.count))) })),
    ("answered", .object(report.answered.sorted { $0.key < $1.key }.map { ($0.key.hex, .integer(Int64($0.value))) })),
    ("replies", .array(report.replies.map { .array([.string($0.requester.hex), .string($0.sender.hex), .integer(Int64($0.type.rawValue))]) })),
    ("owners", .object(final.links.sorted { $0.key < $1.key }.map { ($0.key.description, .string($0.value?.hex ?? "")) })),
    ("disconnected", .array(report.events.compactMap { if case .disconnected(let peer) = $0 { .string(peer.hex) } else { nil } })),
    ("dropped", .array(report.dropped.map {
        .string("\($0.reason.rawValue) \($0.type) from \($0.sender.hex) ttl \($0.ttl) ts \($0.timestamp)")
    })),
]))
