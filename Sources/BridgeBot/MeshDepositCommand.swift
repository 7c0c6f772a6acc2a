import BridgeApp
import BitchatWire
import BotCrypto
import BotSupport
import Mesh
import MeshRuntime
import Nostr
import VirtualRadio

/// `bitchat-bridge mesh deposit`: what a mesh-only phone does when it has no internet (NOSTR-GEO §8.1, §9):
/// sign its message as a Nostr event with its own per-place key and hand it, packet-signed and directed, to
/// the first reachable bridge (rendezvous, `toBridge`) or gateway (channel, `toGateway`) peer. In the
/// rendezvous case it first broadcasts the normal radio copy and names it in the event's `m` hint, as iOS
/// does, so bridges on the same island do not bring the bridged copy back.
enum MeshDepositCommand {
    static let spec = CommandSpec(
        path: "mesh deposit",
        summary: "Deposit a signed Nostr event with a bridge (toBridge) or gateway (toGateway) peer, as a mesh-only phone.",
        positionals: [.text("TEXT")],
        options: MeshCommand.commonOptions + [
            .value("--cell", "CELL", "Rendezvous deposit (toBridge) for this 6-character cell."),
            .value("--channel", "GEOHASH", "Channel deposit (toGateway) for this geohash channel."),
            .value("--nostr-seed", "HEX", "32-byte seed for the phone's Nostr keys (default: random, like a new phone)."),
            .value("--wait", "SECONDS", "How long to wait for a bridge/gateway peer (default 10)."),
        ],
        note: "(one of --cell or --channel)"
    )

    static func run(_ args: ParsedArguments) throws(CommandExit) {
        let text = args.positionals[0]
        guard !text.isEmpty else { throw .usage("TEXT must not be empty") }
        let cell = args.value("--cell")
        let channel = args.value("--channel")
        guard (cell == nil) != (channel == nil) else { throw .usage("give exactly one of --cell or --channel") }
        let place = (cell ?? channel)!
        guard (1...12).contains(place.count), place.allSatisfy({ "0123456789bcdefghjkmnpqrstuvwxyz".contains($0) }) else {
            throw .usage("'\(place)' is not a lowercase geohash")
        }
        let seed: [UInt8]
        if let hex = args.value("--nostr-seed") {
            guard let bytes = try? Hex.decode(hex, expectedCount: 32) else { throw .usage("--nostr-seed must be 64 hex digits") }
            seed = bytes
        } else {
            seed = SecureRandom.bytes(32)
        }
        let waitSeconds = Int(args.value("--wait") ?? "10") ?? -1
        guard waitSeconds > 0 else { throw .usage("--wait must be a positive number of seconds") }
        let setup = try MeshCommand.setup(args)
        let (node, transport) = try MeshCommand.connect(setup)
        try runBlocking { () async throws(CommandExit) in
            do {
                try await deposit(
                    node: node, transport: transport, setup: setup, text: text, cell: cell, channel: channel, seed: seed,
                    waitMs: waitSeconds * 1000)
            } catch let exit as CommandExit {
                throw exit
            } catch {
                throw .failure("\(error)")
            }
        }
    }

    private static func deposit(
        node: MeshNode, transport: any MeshTransport, setup: MeshCommand.Setup, text: String, cell: String?,
        channel: String?, seed: [UInt8], waitMs: Int
    ) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await node.run() }
            let wanted: PeerCapabilities = cell != nil ? .bridge : .gateway
            var target: MeshPeer?
            var waited = 0
            while target == nil {
                target = await node.peers.values.filter { $0.capabilities?.contains(wanted) == true }.min { $0.id < $1.id }
                if target != nil { break }
                guard waited < waitMs else {
                    transport.close()
                    throw CommandExit.failure("no \(cell != nil ? "bridge" : "gateway") peer announced itself within \(waitMs / 1000) s")
                }
                try? await Task.sleep(for: .milliseconds(10))
                waited += 10
            }
            guard let target else { return }
            let nickname = setup.identity.nickname
            let key: SchnorrSecretKey
            var tags: [[String]]
            let direction: NostrCarrierPayload.Direction
            let place: String
            if let cell {
                key = try NostrKeyDerivation.secretKey(seed: seed, label: NostrKeyDerivation.rendezvousLabel(cell: cell))
                let timestamp = await node.submit(.sendPublicMessage(text))
                let sender = setup.identity.peerID.hex
                let stable = MeshMessageIdentity.stableID(senderHex: sender, timestampMs: timestamp, content: text)
                tags = [["r", cell], ["n", nickname], ["m", stable, sender, String(timestamp)]]
                direction = .toBridge
                place = cell
            } else {
                let geohash = channel ?? ""
                key = try NostrKeyDerivation.secretKey(seed: seed, label: NostrKeyDerivation.channelLabel(geohash: geohash))
                tags = [["g", geohash], ["n", nickname]]
                direction = .toGateway
                place = geohash
            }
            var unsigned = UnsignedEvent(
                pubkey: key.publicKey, createdAt: Int64(WallClock.nowSeconds()), kind: NostrKind.ephemeralChat, tags: tags,
                content: text)
            if direction == .toGateway { unsigned = try NostrPoW.mine(unsigned, target: 8).event }  // as iOS mines chat
            let event = try unsigned.signed(with: key)
            let payload = try NostrCarrierPayload(direction: direction, geohash: place, eventJSON: event.jsonBytes).encode()
            let packet = MeshPacket(
                type: .nostrCarrier, timestamp: WallClock.nowMs(), sender: setup.identity.peerID, recipient: target.id,
                payload: payload)
            await node.submit(.originate(packet, sign: true))
            emitLine(.object([
                ("event", .string("deposited")), ("direction", .string(direction.name)), ("to", .string(target.id.hex)),
                ("eventID", .string(event.id.hex)), ("pubkey", .string(event.pubkey.hex)),
            ]))
            // A deposit above the link's MTU leaves as fragments paced 30 ms apart: let them go first.
            _ = await node.flush(timeoutMs: 5_000)
            transport.close()
            try await group.waitForAll()
        }
    }
}
