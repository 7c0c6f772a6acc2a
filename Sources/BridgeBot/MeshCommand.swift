import BitchatWire
import BotCrypto
import BotSupport
import Bridge
import Mesh
import VirtualRadio

/// `bitchat-bridge mesh listen|say`: join a mesh as a bitchat peer (signed announces, relaying) from the
/// command line. Operator tools, and the scripted phones of the end-to-end tests.
enum MeshCommand {
    static let commonOptions: [OptionSpec] = [
        .value("--mesh", "URL", "Transport: tcp://HOST:PORT[?mtu=N] (a radio-hub; repeat to join several islands)."),
        .value("--data-dir", "DIR", "Use the bridge identity from this data directory (default: as for 'keys')."),
        .flag("--ephemeral", "Use a fresh in-memory identity instead (scripted test phones)."),
        .value("--nickname", "NAME", "Nickname in announces (default: bridge)."),
        .value("--bridge-cell", "GEOHASH", "Advertise the bridge capability with this rendezvous cell (TLV 0x06)."),
    ]

    static let listenSpec = CommandSpec(
        path: "mesh listen",
        summary: "Join the mesh as a peer and print peers and public messages as JSON lines.",
        usage: ["--mesh tcp://127.0.0.1:PORT [--ephemeral] [--nickname NAME]"],
        options: commonOptions,
        details: """
            Lines: {"event":"ready",...}, {"event":"peer",...}, {"event":"peerLost",...}, {"event":"message",...},
            {"event":"carrier",...}. Sends a signed leave and stops on SIGINT/SIGTERM.
            """
    )

    static let saySpec = CommandSpec(
        path: "mesh say",
        summary: "Send one signed public message (after a signed announce) and exit.",
        usage: ["--mesh tcp://127.0.0.1:PORT [--ephemeral] [--nickname NAME] TEXT"],
        options: commonOptions
    )

    static func run(_ arguments: [String]) throws(CommandExit) {
        guard let sub = arguments.first else { throw .usage("mesh needs 'listen' or 'say'") }
        let rest = Array(arguments.dropFirst())
        switch sub {
        case "listen": try listen(rest)
        case "say": try say(rest)
        case "deposit": try MeshDepositCommand.run(rest)
        case "--help", "-h": print(listenSpec.helpText + "\n\n" + saySpec.helpText)
        default: throw .usage("unknown mesh subcommand '\(sub)' (listen, say)")
        }
    }

    struct Setup: Sendable {
        let identity: MeshIdentity
        let endpoints: [RadioClientTransport.Endpoint]
    }

    static func setup(_ args: ParsedArguments) throws(CommandExit) -> Setup {
        let urls = args.allValues("--mesh")
        guard !urls.isEmpty else { throw .usage("--mesh tcp://HOST:PORT is required") }
        var endpoints: [RadioClientTransport.Endpoint] = []
        for url in urls {
            do {
                endpoints.append(try RadioClientTransport.Endpoint(url: url))
            } catch {
                throw .usage("--mesh: \(error)")
            }
        }
        let noise: X25519PrivateKey
        let signing: Ed25519PrivateKey
        if args.has("--ephemeral") {
            noise = .generate()
            signing = .generate()
        } else {
            do {
                let keys = try KeyStore(dataDirectory: Paths.dataDirectory(option: args.value("--data-dir"))).loadOrCreate().keys
                noise = keys.noiseKey
                signing = keys.signingKey
            } catch {
                throw .failure(error.description)
            }
        }
        let nickname = args.value("--nickname") ?? "bridge"
        guard !nickname.isEmpty, nickname.utf8.count <= 255 else { throw .usage("--nickname must be 1…255 bytes") }
        var capabilities = PeerCapabilities()
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
        return Setup(identity: identity, endpoints: endpoints)
    }

    static func connect(_ setup: Setup) throws(CommandExit) -> (MeshNode, RadioClientTransport) {
        let transport: RadioClientTransport
        do {
            transport = try RadioClientTransport.connect(setup.endpoints)
        } catch {
            throw .failure("cannot join the mesh: \(error)")
        }
        let seed = SecureRandom.bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let node = MeshNode(
            engine: MeshPeerEngine(identity: setup.identity), transport: transport, wallClock: { WallClock.nowMs() }, seed: seed
        )
        return (node, transport)
    }

    private static func listen(_ arguments: [String]) throws(CommandExit) {
        let args = try ParsedArguments.parse(arguments, spec: listenSpec)
        _ = try args.requirePositionals([])
        let setup = try setup(args)
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
        _ = try runBlocking { () async throws(CommandExit) in
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await node.run() }
                group.addTask {
                    for await action in node.actions { emitLine(line(for: action)) }
                }
            }
        }
        emitLine(.object([("event", .string("stopped"))]))
    }

    private static func say(_ arguments: [String]) throws(CommandExit) {
        let args = try ParsedArguments.parse(arguments, spec: saySpec)
        let text = try args.requirePositionals(["text"])[0]
        guard !text.isEmpty else { throw .usage("TEXT must not be empty") }
        let setup = try setup(args)
        let (node, transport) = try connect(setup)
        try runBlocking { () async throws(CommandExit) in
            do {
                try await sayInGroup(node: node, transport: transport, setup: setup, text: text)
            } catch let exit as CommandExit {
                throw exit
            } catch {
                throw .failure("\(error)")
            }
        }
    }

    static func sayInGroup(node: MeshNode, transport: RadioClientTransport, setup: Setup, text: String) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await node.run() }
            // Links come up on the node's first event; the engine announces on each new link at once.
            var waited = 0
            while await node.linkCount < setup.endpoints.count {
                guard waited < 5_000 else {
                    transport.close()
                    throw CommandExit.failure("links did not come up within 5 s")
                }
                try? await Task.sleep(for: .milliseconds(5))
                waited += 5
            }
            let timestamp = await node.submit(.sendPublicMessage(text))
            emitLine(.object([
                ("event", .string("sent")), ("peerID", .string(setup.identity.peerID.hex)),
                ("timestamp", .integer(Int64(timestamp))),
                ("stableID", .string(MeshMessageIdentity.stableID(senderHex: setup.identity.peerID.hex, timestampMs: timestamp, content: text))),
            ]))
            // close() flushes everything queued (announce, message, any fragments) before disconnecting.
            transport.close()
            try await group.waitForAll()
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
            return .object([("event", .string("peerLost")), ("peerID", .string(id.hex)), ("reason", .string(reason))])
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
                ("nostrEvent", event),
            ])
        case .transmit:
            return .null
        }
    }
}
