import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// Issue 16 part 5 on `bitchat-bridge run`: a deposit for a region-level geohash reaches that geohash's nearest
/// relays (NOSTR-GEO §8: a gateway publishes a deposit to the 5 relays nearest the carrier's geohash).
///
/// The directory's relays are real relays named as the directory requires (`wss://`, a DNS name, no IP, no
/// local name), so the world has what a site has: names, TLS and a CA. The names are mapped to 127.0.0.1 by a
/// hosts file bind-mounted over /etc/hosts in a mount namespace of the bridge's own (`unshare --mount`, root:
/// CI runs as root); nothing else on the machine sees it, and nothing leaves loopback. The certificate is a
/// throw-away one the bridge trusts through `relay_ca_file`.
///
/// Geometry: five relays at the channel's cell (`near1…5`, ports nobody listens on: chosen, never connected)
/// and one at the centre of the region cell `u4` (`region`, a real TLS relay). For the channel, its city and
/// neighbourhood levels and the ring, the five near ones are the nearest five; only the region level `u4` has
/// `region` among its nearest five (shown by `relays GEOHASH` on the same directory). So a deposit reaching
/// `region` went there because the bridge serves the region level's nearest relays.
/// Root and unshare(1): what mapping the directory's names to 127.0.0.1 for the bridge alone takes.
private let canMapNames = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")

@Suite(
    "A region-level deposit reaches the region's nearest relays (directory relays by name, TLS)", TestEnvironment.needsVenv,
    .serialized, .enabled(if: canMapNames, "needs root and unshare(1) to map the directory's names to 127.0.0.1"))
struct RegionDepositTests {
    static let region = "region.relays.test"
    static let near = (1...5).map { "near\($0).relays.test" }

    @Test("a phone's channel deposit for u4 is published on u4's nearest relay, which only the region level selects")
    func regionDepositReachesTheRegionsNearestRelay() async throws {
        let world = World()
        try await world.startRelay()
        let island = try await world.startIsland()

        let names = [Self.region] + Self.near
        let tls = try await TestCertificate.make(
            in: world.directory, commonName: "relays.test", subjectAltName: (names.map { "DNS:" + $0 } + ["IP:127.0.0.1"]).joined(separator: ","))
        let regionPort = LoopbackPort.free()
        let regionData = world.directory + "/region-relay"
        try FileManager.default.createDirectory(atPath: regionData, withIntermediateDirectories: true)
        let regionRelay = try await Peers.start(.nostrRelay, port: regionPort, directory: regionData, tls: tls)
        world.processes.append(regionRelay)
        let nearPorts = Self.near.map { _ in LoopbackPort.free() }

        // The directory, as `relays import` makes it from the iOS CSV: u4's centre (59.0625, 5.625), the channel
        // cell u4pruy's (57.648, 10.415).
        let csv = world.directory + "/relays.csv"
        try ("Relay URL,Latitude,Longitude\n" + "\(Self.region):\(regionPort),59.0625,5.625\n"
            + zip(Self.near, nearPorts).enumerated().map { i, relay in "\(relay.0):\(relay.1),57.64\(i),10.41\(i)\n" }.joined())
            .write(toFile: csv, atomically: true, encoding: .utf8)
        let directory = world.directory + "/relays.json"
        let importer = try world.spawn(["relays", "import", csv, "--output", directory], name: "relays-import")
        #expect(try await importer.waitForExit() == 0, "\(importer.transcript)")
        let regionURL = "wss://\(Self.region):\(regionPort)"
        func chosen(_ geohash: String) async throws -> String {
            let show = try world.spawn(["relays", geohash, "--directory", directory], name: "relays-\(geohash)")
            #expect(try await show.waitForExit() == 0, "\(show.transcript)")
            return show.stdoutLines.joined(separator: "\n")
        }
        #expect(try await chosen("u4").contains(Self.region), "the region relay is among u4's nearest five")
        for level in ["u4pr", "u4pru", "u4pruy"] {
            #expect(try await !chosen(level).contains(Self.region), "the region relay is not among \(level)'s nearest five")
        }

        // The bridge, in a mount namespace whose /etc/hosts names the directory's relays.
        let hosts = world.directory + "/hosts"
        try ("127.0.0.1 localhost\n" + names.map { "127.0.0.1 \($0)\n" }.joined()).write(toFile: hosts, atomically: true, encoding: .utf8)
        let environment = [
            "BRIDGE_GEOHASH": "u4pruy", "BRIDGE_DATA_DIR": "\(world.directory)/gateway", "BRIDGE_RELAYS": world.relayURL,
            "BRIDGE_RELAY_DIRECTORY": "on", "BRIDGE_RELAY_FILE": directory, "BRIDGE_RELAY_CA_FILE": tls.cert,
            "BRIDGE_MESH": "tcp://127.0.0.1:\(island)", "BRIDGE_HTTP_LISTEN": "off", "BRIDGE_NICKNAME": "gateway", "BRIDGE_POW_BITS": "8",
        ]
        let bridge = try ChildProcess(
            "/usr/bin/unshare",
            ["--mount", "--propagation", "private", "/bin/sh", "-c", #"mount --bind "$0" /etc/hosts && exec "$1" run"#, hosts,
             TestEnvironment.bridgeExecutable],
            environment: environment, name: "gateway")
        world.processes.append(bridge)
        try await bridge.waitForLine(stderr: true, timeout: .seconds(30), "the region relay connected over TLS by name") {
            $0.contains("relay connected") && $0.contains(regionURL)
        }
        let reader = try await world.startReader("reader", island: island)
        try await world.waitForBridges(reader, count: 1)

        // A mesh-only phone viewing the region level deposits its line with the gateway (toGateway, geohash u4).
        let phone = try world.spawn(
            ["mesh", "deposit", "--mesh", "tcp://127.0.0.1:\(island)", "--ephemeral", "--nickname", "hiker", "--channel", "u4",
             "--wait", "30", "anyone heading down to the fjord tonight?"],
            name: "phone")
        let deposited = try await phone.waitForLine(timeout: .seconds(40), "deposited") { $0.contains("\"deposited\"") }
        let id = try #require(try JSONParser().parse(deposited)["eventID"]?.stringValue)
        // Asked for by id on the region's relay (over TLS, trusting the same certificate), until it is there.
        let query = """
            import asyncio, json, ssl, sys, websockets
            async def main():
                context = ssl.create_default_context(cafile=sys.argv[2])
                async with websockets.connect(sys.argv[1], ssl=context) as ws:
                    await ws.send(json.dumps(["REQ", "q", {"ids": [sys.argv[3]]}]))
                    async for frame in ws:
                        print(frame, flush=True)
                        if frame.startswith('["EOSE"'):
                            return
            asyncio.run(main())
            """
        var event: String?
        let deadline = ContinuousClock.now + .seconds(30)
        while event == nil, ContinuousClock.now < deadline {
            let ask = try ChildProcess(
                TestEnvironment.venvBinary("python"), ["-c", query, "wss://127.0.0.1:\(regionPort)", tls.cert, id], name: "query")
            _ = try await ask.waitForExit(timeout: .seconds(10))
            event = ask.stdoutLines.first { $0.hasPrefix("[\"EVENT\"") && $0.contains(id) }
            if event == nil { try await Task.sleep(for: .milliseconds(300)) }
        }
        guard let event else {
            Issue.record("""
                deposit \(id) never on the region's relay
                the bridge: \(bridge.transcript.suffix(6_000))
                the relay: \(regionRelay.transcript.suffix(4_000))
                """)
            return
        }
        #expect(event.contains(#"["g","u4"]"#), "\(event)")
        // The near relays are in the bridge's set too (nobody listens on their ports here).
        let starting = try #require(bridge.stderrLines.first { $0.contains("bridge starting") })
        let relays = try JSONParser().parse(starting)["relays"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(Set(relays) == Set([world.relayURL, regionURL] + zip(Self.near, nearPorts).map { "wss://\($0):\($1)" }), "\(relays)")
    }
}
