import BridgeApp
import BitchatWire
import BotCrypto
import BotSupport
import BlueZ
import Bridge
import Mesh
import MeshRuntime
import VirtualRadio
import BridgeCore

/// `bitchat-bridge mesh listen|say`: join a mesh as a bitchat peer (signed announces, relaying) from the
/// command line. Operator tools, and the scripted phones of the end-to-end tests.
enum MeshCommand {
    enum Limits {
        /// `mesh listen` samples the transport's status this often (a state change shows within it).
        static let statusSampleInterval: Duration = .seconds(1)
    }

    static let commonOptions: [OptionSpec] = [
        .required("--mesh", "URL", "Transport: tcp://HOST:PORT[?mtu=N] (a radio-hub; repeat to join several islands), or bluez[:hciN] (BLE)."),
        .value("--data-dir", "DIR", "Use the bridge identity from this data directory (default: as for 'keys')."),
        .flag("--ephemeral", "Use a fresh in-memory identity instead (scripted test phones)."),
        .value("--nickname", "NAME", "Nickname in announces (default: bridge)."),
        .value("--bridge-cell", "GEOHASH", "Advertise the bridge capability with this rendezvous cell (TLV 0x06)."),
    ]

    static let listenSpec = CommandSpec(
        path: "mesh listen",
        summary: "Join the mesh as a peer and print peers and public messages as JSON lines.",
        options: commonOptions + [
            .value("--say", "TEXT", "Send TEXT as a public message once the first peer is verified (repeatable; scripted tests)."),
            .value("--say-every", "SECONDS", "With --say: send the texts this many seconds apart (default 0: all at once)."),
            .value("--announce-interval", "SECONDS", "Seconds between periodic announces (default 15, as iOS; Android: 30–300)."),
            .value("--model", "ios|android", "Which app this phone behaves as (default ios). android: Android main as its sources have it — capabilities 0x0100 (private media) in announces, no carrier type 0x28 (carriers are relayed, never shown), announces every 30 s unless --announce-interval, silent peers kept 180 s."),
            .flag("--new-signing-key", "With --data-dir: keep its Noise key, sign with a fresh key (an impostor; tests)."),
        ],
        details: """
            Lines: {"event":"ready",...}, {"event":"peer",...}, {"event":"peerLost",...}, {"event":"message",...},
            {"event":"carrier",...}, {"event":"pinRefused",...} (an announce refused against a pin),
            {"event":"transport","up":false,"detail":...} when the transport's state
            changes, and {"event":"stopped","counters":{...}} last. Sends a signed leave and stops on SIGINT/SIGTERM.
            """
    )

    static let saySpec = CommandSpec(
        path: "mesh say",
        summary: "Send one signed public message (after a signed announce) and exit.",
        positionals: [.text("TEXT")],
        options: commonOptions + [
            .value("--wait", "SECONDS", "With bluez: wait this long for a verified peer before sending (default 30)."),
        ]
    )

    static let group = CommandGroup(
        name: "mesh",
        summary: "Join a bitchat mesh as a peer: listen (JSON lines), say one signed public message, or deposit as a mesh-only phone.",
        subcommands: [
            Subcommand("listen", listenSpec, run: listen),
            Subcommand("say", saySpec, run: say),
            Subcommand("deposit", MeshDepositCommand.spec, run: MeshDepositCommand.run),
        ])

    /// The app a scripted phone behaves as (`mesh listen --model`).
    enum PhoneModel: String, Sendable {
        /// iOS (MESH-WIRE §4.7.5: announces every 15 ± 4 s, peers forgotten after 60 s; carriers shown).
        case ios
        /// Android main `09b481f1`: `BinaryProtocol.kt` has no carrier type 0x28 (relayed blindly, never
        /// shown), announces advertise capabilities 0x0100 (private media, MESH-WIRE §4.4 / BOARD.md §1),
        /// `PowerManager.kt` announces every 30 s in the foreground (60 s background, 120–300 s low battery:
        /// `--announce-interval`) and peers are kept 180 s.
        case android
    }

    struct Setup: Sendable {
        let identity: MeshIdentity
        var model = PhoneModel.ios
        var engine = MeshPeerEngine.Configuration()
        let endpoints: [RadioClientTransport.Endpoint]
        /// Set for `--mesh bluez[:hciN]`: the adapter (nil = first powered one).
        let bluez: BlueZTransport.Options?
    }

    /// Parses `bluez` / `bluez:hciN`; nil for anything else.
    static func parseBlueZ(_ url: String) throws(CommandExit) -> BlueZTransport.Options? {
        guard url == "bluez" || url.hasPrefix("bluez:") else { return nil }
        guard url != "bluez" else { return BlueZTransport.Options() }
        let adapter = String(url.dropFirst("bluez:".count))
        guard adapter.hasPrefix("hci"), adapter.count > 3, adapter.dropFirst(3).allSatisfy(\.isASCII), Int(adapter.dropFirst(3)) != nil else {
            throw .usage("--mesh: adapter must look like hci0 (got '\(adapter)')")
        }
        return BlueZTransport.Options(adapter: adapter)
    }

    static func setup(_ args: ParsedArguments) throws(CommandExit) -> Setup {
        let urls = args.allValues("--mesh")
        guard !urls.isEmpty else { throw .usage("--mesh tcp://HOST:PORT or --mesh bluez[:hciN] is required") }
        var endpoints: [RadioClientTransport.Endpoint] = []
        var bluez: BlueZTransport.Options?
        for url in urls {
            if let options = try parseBlueZ(url) {
                guard urls.count == 1 else { throw .usage("--mesh bluez cannot be combined with other --mesh values") }
                bluez = options
                continue
            }
            do {
                endpoints.append(try RadioClientTransport.Endpoint(url: url))
            } catch {
                throw .usage("--mesh: \(error)")
            }
        }
        let noise: X25519PrivateKey
        var signing: Ed25519PrivateKey
        if args.has("--ephemeral") {
            noise = .generate()
            signing = .generate()
        } else {
            let keys = try KeysCommand.load(KeyStore(dataDirectory: Paths.dataDirectory(option: args.value("--data-dir")))).keys
            noise = keys.noiseKey
            signing = keys.signingKey
        }
        // A copied Noise key with another signing key: what a pin must refuse (STRANGER-CACHE §4).
        if args.has("--new-signing-key") {
            guard !args.has("--ephemeral") else { throw .usage("--new-signing-key needs an identity to copy (--data-dir), not --ephemeral") }
            signing = .generate()
        }
        let nickname = args.value("--nickname") ?? "bridge"
        guard !nickname.isEmpty, nickname.utf8.count <= 255 else { throw .usage("--nickname must be 1…255 bytes") }
        let modelName = args.value("--model") ?? PhoneModel.ios.rawValue
        guard let model = PhoneModel(rawValue: modelName) else { throw .usage("--model must be ios or android (got '\(modelName)')") }
        var capabilities = PeerCapabilities()
        if model == .android { capabilities.insert(.privateMedia) }
        var cell: String?
        if let text = args.value("--bridge-cell") {
            guard (1...12).contains(text.count), text.allSatisfy({ "0123456789bcdefghjkmnpqrstuvwxyz".contains($0) }) else {
                throw .usage("--bridge-cell must be a lowercase geohash of 1–12 characters")
            }
            capabilities.insert(.bridge)
            cell = text
        }
        let identity = MeshIdentity(
            noisePublicKey: noise.publicKey, signingKey: signing, nickname: nickname, capabilities: capabilities,
            bridgeGeohash: cell
        )
        var setup = Setup(identity: identity, endpoints: endpoints, bluez: bluez)
        setup.model = model
        if model == .android {
            setup.engine.announceIntervalMs = 30_000
            setup.engine.peerTimeoutMs = 180_000
        }
        if let text = args.value("--announce-interval") {
            guard let seconds = Int(text), (1...3_600).contains(seconds) else { throw .usage("--announce-interval must be 1…3600 seconds") }
            setup.engine.announceIntervalMs = UInt64(seconds) * 1_000
            // The engine's jitter (±4 s) stays below a quarter of the interval.
            setup.engine.announceJitterMs = min(setup.engine.announceJitterMs, setup.engine.announceIntervalMs / 4)
        }
        return setup
    }

    static func connect(_ setup: Setup) throws(CommandExit) -> (MeshNode, any MeshTransport) {
        let transport: any MeshTransport
        if let options = setup.bluez {
            do {
                transport = try BlueZTransport.start(options: options, logger: Logger(label: "bluez", level: .info))
            } catch {
                throw .failure(error.description)
            }
        } else {
            do {
                transport = try RadioClientTransport.connect(setup.endpoints)
            } catch {
                throw .failure("cannot join the mesh: \(error)")
            }
        }
        let seed = SecureRandom.bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let node = MeshNode(
            engine: MeshPeerEngine(identity: setup.identity, configuration: setup.engine), transport: transport, wallClock: { WallClock.nowMs() }, seed: seed
        )
        return (node, transport)
    }

    private static func listen(_ args: ParsedArguments) throws(CommandExit) {
        let setup = try setup(args)
        let sayTexts = args.allValues("--say")
        var sayEverySeconds = 0
        if let text = args.value("--say-every") {
            guard let seconds = Int(text), (0...3_600).contains(seconds) else { throw .usage("--say-every must be 0…3600 seconds") }
            sayEverySeconds = seconds
        }
        let sayEvery = Duration.seconds(sayEverySeconds)
        let (node, transport) = try connect(setup)
        let signals = SignalHandler(ProcessSignal.termination) { _ in
            Task {
                await node.submit(.sendLeave)
                transport.close()
            }
        }
        defer { signals.cancel() }
        emitLine(.object([
            ("event", .string("ready")), ("peerID", .string(setup.identity.peerID.hex)),
            ("nickname", .string(setup.identity.nickname)),
            ("signingPublicKey", .string(Hex.encode(setup.identity.signingKey.publicKey.rawRepresentation))),
            ("links", .integer(Int64(setup.endpoints.count))),
        ]))
        let counters = try runBlocking { () async throws(CommandExit) -> JSONValue in
            // The transport's state, sampled once a second like the bridge's health publisher; printed when
            // it changes (a lost hub, bluetoothd gone, the adapter powered off, and their return).
            let watcher = Task {
                var last = transport.status
                while !Task.isCancelled {
                    try? await Task.sleep(for: Limits.statusSampleInterval)
                    let now = transport.status
                    guard now.isUp != last.isUp || now.detail != last.detail, !Task.isCancelled else { continue }
                    emitLine(.object([("event", .string("transport")), ("up", .bool(now.isUp)), ("detail", .string(now.detail)),
                                      ("links", .integer(Int64(now.linksUp)))]))
                    last = now
                }
            }
            await withTaskGroup(of: Void.self) { group in
                let (firstPeer, peerSeen) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
                group.addTask {
                    for await action in node.actions {
                        if setup.model == .android, case .carrier = action { continue }
                        emitLine(line(for: action))
                        if case .peerVerified = action { peerSeen.yield() }
                    }
                    peerSeen.finish()
                }
                if !sayTexts.isEmpty {
                    group.addTask {
                        for await _ in firstPeer { break }
                        for (index, text) in sayTexts.enumerated() {
                            if index > 0, sayEvery > .zero { try? await Task.sleep(for: sayEvery) }
                            guard !Task.isCancelled else { return }
                            let timestamp = await node.submit(.sendPublicMessage(text))
                            emitLine(sentLine(setup, text, timestamp))
                        }
                    }
                }
                // The node runs until SIGINT/SIGTERM closes the transport; a pending --say-every wait ends then.
                await node.run()
                group.cancelAll()
            }
            watcher.cancel()
            await watcher.value
            return countersJSON(await node.counters, transport.status.counters)
        }
        emitLine(.object([("event", .string("stopped")), ("counters", counters)]))
    }

    private static func say(_ args: ParsedArguments) throws(CommandExit) {
        let text = args.positionals[0]
        guard !text.isEmpty else { throw .usage("TEXT must not be empty") }
        let setup = try setup(args)
        var waitMs = 30_000
        if let text = args.value("--wait") {
            guard let seconds = Int(text), (1...600).contains(seconds) else { throw .usage("--wait must be 1…600 seconds") }
            waitMs = seconds * 1_000
        }
        let (node, transport) = try connect(setup)
        try runBlocking { [waitMs] () async throws(CommandExit) in
            do {
                try await sayInGroup(node: node, transport: transport, setup: setup, text: text, waitMs: waitMs)
            } catch let exit as CommandExit {
                throw exit
            } catch {
                throw .failure("\(error)")
            }
        }
    }

    private static func sentLine(_ setup: Setup, _ text: String, _ timestamp: UInt64) -> JSONValue {
        .object([
            ("event", .string("sent")), ("peerID", .string(setup.identity.peerID.hex)),
            ("timestamp", .integer(Int64(timestamp))),
            ("stableID", .string(MeshMessageIdentity.stableID(senderHex: setup.identity.peerID.hex, timestampMs: timestamp, content: text))),
        ])
    }

    private static func sayInGroup(node: MeshNode, transport: any MeshTransport, setup: Setup, text: String, waitMs: Int) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await node.run() }
            // Links come up on the node's first event; the engine announces on each new link at once.
            // Over BLE links come and go: wait for a verified peer (its announce also opens the link gate).
            var waited = 0
            let limit = setup.bluez == nil ? 5_000 : waitMs
            while setup.bluez == nil ? await node.linkCount < setup.endpoints.count : await node.peers.isEmpty {
                guard waited < limit else {
                    transport.close()
                    throw CommandExit.failure(setup.bluez == nil ? "links did not come up within 5 s" : "no verified peer within \(limit / 1000) s")
                }
                try? await Task.sleep(for: .milliseconds(5))
                waited += 5
            }
            let timestamp = await node.submit(.sendPublicMessage(text))
            emitLine(sentLine(setup, text, timestamp))
            // Fragments are paced by the node: let them leave before closing.
            _ = await node.flush(timeoutMs: 5_000)
            // close() flushes everything queued (announce, message, any fragments) before disconnecting.
            transport.close()
            try await group.waitForAll()
        }
    }

    /// The engine's counters under their dotted names and the transport's drops by reason (`mesh listen`'s
    /// `stopped` line: what a run dropped, and why).
    static func countersJSON(_ engine: MeshCounters, _ transport: MeshTransportCounters) -> JSONValue {
        var members = engine.named.map { ($0.name, JSONValue.integer(Int64($0.count))) }
        members += transport.inboundDrops.sortedByLabel.map { ("transport.inbound." + $0.key.label, .integer(Int64($0.count))) }
        members += transport.outboundDrops.sortedByLabel.map { ("transport.outbound." + $0.key.label, .integer(Int64($0.count))) }
        members.append(("transport.framesIn", .integer(Int64(transport.framesIn))))
        return .object(members)
    }

    /// A board packet as a phone's board shows it (BOARD.md §3–§5): a post or a tombstone whose inner signature
    /// verifies under the key it carries; anything else is `boardRejected` with the reason, so a test or an
    /// operator sees what a phone would have dropped.
    static func boardLine(_ packet: MeshPacket) -> JSONValue {
        let payload: BoardPayload
        do {
            payload = try BoardPayload.decode(packet.payload)
        } catch {
            return .object([("event", .string("boardRejected")), ("sender", .string(packet.sender.hex)), ("reason", .string("\(error)"))])
        }
        guard payload.isSignatureValid else {
            return .object([("event", .string("boardRejected")), ("sender", .string(packet.sender.hex)), ("reason", .string("inner signature"))])
        }
        switch payload {
        case .post(let post):
            return .object([
                ("event", .string("board")), ("postID", .string(Hex.encode(post.postID))), ("geohash", .string(post.geohash)),
                ("nickname", .string(post.nickname)), ("content", .string(post.content)), ("urgent", .bool(post.isUrgent)),
                ("author", .string(Hex.encode(post.authorKey))), ("createdAt", .integer(Int64(post.createdAt))),
                ("expiresAt", .integer(Int64(post.expiresAt))),
            ])
        case .tombstone(let tombstone):
            return .object([
                ("event", .string("boardDeleted")), ("postID", .string(Hex.encode(tombstone.postID))),
                ("author", .string(Hex.encode(tombstone.authorKey))),
            ])
        }
    }

    static func line(for action: MeshAction) -> JSONValue {
        switch action {
        case .peerVerified(let peer):
            var members: [(String, JSONValue)] = [
                ("event", .string("peer")), ("peerID", .string(peer.id.hex)), ("nickname", .string(peer.nickname)),
                ("signingPublicKey", .string(Hex.encode(peer.signingPublicKey.rawRepresentation))),
                ("direct", .bool(peer.isDirect)),
            ]
            if let caps = peer.capabilities { members.append(("capabilities", .array(caps.names.map { .string($0) }))) }
            if let cell = peer.bridgeGeohash { members.append(("bridgeGeohash", .string(cell))) }
            return .object(members)
        case .peerLost(let id, let reason):
            return .object([("event", .string("peerLost")), ("peerID", .string(id.hex)), ("reason", .string(reason.rawValue))])
        case .peersResync(let peers):
            // This listener fell behind and missed peer lines: the whole live table, to replace what was shown.
            return .object([("event", .string("peersResync")), ("peerIDs", .array(peers.map(\.id.hex).sorted().map { .string($0) }))])
        case .publicMessage(let message):
            return .object([
                ("event", .string("message")), ("sender", .string(message.sender.hex)),
                ("nickname", .string(message.nickname)), ("text", .string(message.text)),
                ("timestamp", .integer(Int64(bitPattern: message.timestamp))), ("stableID", .string(message.stableID)),
                ("ttl", .integer(Int64(message.ttl))),
            ])
        case .carrier(let carrier):
            let event = (try? JSONParser().parse(carrier.payload.eventJSON)) ?? .string(String(decoding: carrier.payload.eventJSON, as: UTF8.self))
            return .object([
                ("event", .string("carrier")), ("sender", .string(carrier.sender.hex)),
                ("direction", .string(carrier.payload.direction.name)), ("geohash", .string(carrier.payload.geohash)),
                ("packetSigned", .bool(carrier.packetSigned)),
                ("nostrEvent", event),
            ])
        case .pinRefused(let announced):
            return .object([
                ("event", .string("pinRefused")), ("peerID", .string(announced.peerID.hex)),
                ("nickname", .string(announced.nickname)),
                ("signingPublicKey", .string(Hex.encode(announced.signingPublicKey.rawRepresentation))),
            ])
        case .boardHeard(let packet):
            return boardLine(packet)
        case .transmit, .courierSent:
            return .null
        case .courierDeposit(let from, let envelope):
            // Sealed mail: who handed it over and its size, never its bytes.
            return .object([("event", .string("courier_deposit")), ("from", .string(from.hex)), ("bytes", .integer(Int64(envelope.count)))])
        // The mesh command's engine runs without gossip sync (``MeshPeerEngine/Configuration/sync`` nil).
        case .syncRequest, .syncRoundDue, .syncStore, .originated, .boardPacket:
            return .null
        }
    }
}
