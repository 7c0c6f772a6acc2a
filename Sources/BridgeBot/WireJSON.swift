import BridgeApp
import BitchatWire
import BotCrypto
import BotSupport

/// The JSON form of a bitchat packet used by `wire decode` / `wire encode` (and by scripted test phones).
///
/// ```json
/// {"version":1,"type":"message","typeValue":2,"ttl":7,"timestamp":1750000000123,"flags":2,
///  "sender":"4457134794559182","recipient":null,"route":[],"isCompressed":false,"isRSR":false,
///  "payloadHex":"68656c6c6f","payload":{"text":"hello"},"signature":"…128 hex…","signatureValid":true}
/// ```
/// `payload` is the decoded form for known types (announce TLVs, text, fragment header, request-sync, carrier
/// with its embedded event); `encode` takes either `payload` or `payloadHex`.
///
/// Round trip: `encode` of what `decode` printed gives the same frame byte for byte. For that the JSON also
/// carries what the packet fields alone do not fix: `compressedHex` (the frame's own DEFLATE body — another
/// encoder's bytes, e.g. Android's level 6, differ from our level-5 output and signatures cover them,
/// MESH-WIRE §4.4), `trailingHex` (bytes after the last field: PKCS#7 padding, §2.6, or anything else
/// decoders ignore; `padded` says whether it is exactly the bucket padding) and, in `flags`, the bits decoders
/// ignore (5–7; and 3 on v1). The other flag bits follow from the fields. One form is not reproduced: a v2
/// frame with HAS_ROUTE and a route count of 0 (decoded as no route) encodes without the count byte; `decode`
/// then leaves `trailingHex` out rather than print a tail that would not rebuild the frame.
enum WireJSON {
    static func json(for packet: MeshPacket, frame: [UInt8], signingKey: Ed25519PublicKey?) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("version", .integer(Int64(packet.version))),
            ("type", .string(packet.type.description)),
            ("typeValue", .integer(Int64(packet.type.rawValue))),
            ("ttl", .integer(Int64(packet.ttl))),
            ("timestamp", .integer(Int64(bitPattern: packet.timestamp))),
            ("flags", .integer(Int64(frame.count > 11 ? frame[11] : 0))),
            ("sender", .string(packet.sender.hex)),
            ("recipient", packet.recipient.map { .string($0.hex) } ?? .null),
            ("route", .array(packet.route.map { .string($0.hex) })),
            ("isCompressed", .bool(packet.receivedCompressedBody != nil)),
            ("isRSR", .bool(packet.isRSR)),
            ("frameLength", .integer(Int64(frame.count))),
            ("payloadHex", .string(Hex.encode(packet.payload))),
        ]
        if let body = packet.receivedCompressedBody { members.append(("compressedHex", .string(Hex.encode(body)))) }
        if let (trailing, padded) = tail(of: frame, packet: packet) {
            members.append(("trailingHex", .string(Hex.encode(trailing))))
            members.append(("padded", .bool(padded)))
        }
        var announcedKey: Ed25519PublicKey?
        switch decodedPayload(packet) {
        case .success(let value):
            members.append(("payload", value))
            if packet.type == .announce, let key = try? AnnouncePayload.decode(packet.payload).signingPublicKey {
                announcedKey = try? Ed25519PublicKey(rawRepresentation: key)
            }
        case .failure(let error):
            members.append(("payloadError", .string(error.name)))
        }
        members.append(("signature", packet.signature.map { .string(Hex.encode($0)) } ?? .null))
        if let key = signingKey ?? announcedKey {
            let check = packet.verifySignature(key)
            members.append(("signatureValid", .bool(check.isValid)))
            if case .valid(let variant) = check { members.append(("signaturePreimage", .string(variant.rawValue))) }
        }
        return .object(members)
    }

    /// The flag bits decoders ignore (MESH-WIRE §2.2): reserved bits 5–7, and HAS_ROUTE on v1.
    static func ignoredFlags(version: UInt8) -> UInt8 { version == 1 ? 0xE8 : 0xE0 }

    /// The bytes after the packet's last field, when the packet's own encoding (with `frame`'s flag byte)
    /// is exactly the frame's start; `padded` when they are the §2.6 PKCS#7 padding of that encoding.
    static func tail(of frame: [UInt8], packet: MeshPacket) -> (bytes: [UInt8], padded: Bool)? {
        guard var core = try? packet.encode(), core.count < frame.count, core.count > 11 else { return nil }
        core[11] = frame[11]
        guard frame.starts(with: core) else { return nil }
        return (Array(frame[core.count...]), MessagePadding.pad(core) == frame)
    }

    /// The frame for `packet` as `wire encode` prints it: the JSON's `compressedHex` reused (unless
    /// `compress` is off), its ignored `flags` bits and `trailingHex` kept, `pad` applied when asked.
    static func frame(_ packet: MeshPacket, json: JSONValue, pad: Bool, compress: Bool) throws(InputError) -> [UInt8] {
        var packet = packet
        func hex(_ key: String) throws(InputError) -> [UInt8]? {
            guard let member = json[key], member != .null else { return nil }
            guard let text = member.stringValue, let bytes = try? Hex.decode(text) else { throw InputError("'\(key)' is not hex") }
            return bytes
        }
        if compress, let body = try hex("compressedHex") {
            guard !body.isEmpty else { throw InputError("'compressedHex' is empty") }
            packet.receivedCompressedBody = body
        }
        let trailing = try hex("trailingHex")
        if trailing != nil && pad { throw InputError("--pad and 'trailingHex' both give the frame's tail; drop one") }
        var frame: [UInt8]
        do {
            frame = try packet.encode(padding: pad, compression: compress ? .standard : .none)
        } catch {
            throw InputError("\(error)")
        }
        if packet.receivedCompressedBody != nil {
            // A body that does not inflate to the payload would make a frame that no decoder accepts as this packet.
            guard let again = try? MeshPacket.decode(frame), again.payload == packet.payload else {
                throw InputError("'compressedHex' does not inflate to the payload")
            }
        }
        if let flags = json["flags"]?.integerValue, let byte = UInt8(exactly: flags) {
            frame[11] |= byte & ignoredFlags(version: packet.version)
        }
        return frame + (trailing ?? [])
    }

    static func decodedPayload(_ packet: MeshPacket) -> Result<JSONValue, WireError> {
        do throws(WireError) {
            switch packet.type {
            case .announce:
                let a = try AnnouncePayload.decode(packet.payload)
                var members: [(String, JSONValue)] = [
                    ("nickname", .string(a.nickname)),
                    ("noisePublicKey", .string(Hex.encode(a.noisePublicKey))),
                    ("signingPublicKey", .string(Hex.encode(a.signingPublicKey))),
                    ("peerIDMatches", .bool(MeshPeerID(noisePublicKey: a.noisePublicKey) == packet.sender)),
                ]
                if let caps = a.capabilities {
                    members.append(("capabilities", .object([
                        ("raw", .integer(Int64(bitPattern: caps.rawValue))),
                        ("names", .array(caps.names.map { .string($0) })),
                    ])))
                }
                if let cell = a.bridgeGeohash { members.append(("bridgeGeohash", .string(cell))) }
                if !a.directNeighbors.isEmpty { members.append(("directNeighbors", .array(a.directNeighbors.map { .string($0.hex) }))) }
                if !a.unknownTLVs.isEmpty {
                    members.append(("unknownTLVs", .array(a.unknownTLVs.map {
                        .object([("type", .integer(Int64($0.type))), ("valueHex", .string(Hex.encode($0.value)))])
                    })))
                }
                return .success(.object(members))
            case .message:
                guard let text = String(validating: packet.payload, as: UTF8.self) else {
                    throw WireError.invalidUTF8(field: .text)
                }
                return .success(.object([("text", .string(text))]))
            case .leave:
                return .success(.object([]))
            case .fragment:
                let f = try FragmentPayload.decode(packet.payload)
                return .success(.object([
                    ("fragmentID", .string(MeshPeerID(rawValue: f.fragmentID).hex)),
                    ("index", .integer(Int64(f.index))), ("total", .integer(Int64(f.total))),
                    ("originalType", .string(f.originalType.description)),
                    ("chunkHex", .string(Hex.encode(f.chunk))),
                ]))
            case .requestSync:
                let r = try RequestSyncPayload.decode(packet.payload)
                var members: [(String, JSONValue)] = [
                    ("p", .integer(Int64(r.p))), ("m", .integer(Int64(r.m))), ("dataHex", .string(Hex.encode(r.data))),
                ]
                if let types = r.types { members.append(("types", .integer(Int64(bitPattern: types)))) }
                if let since = r.sinceTimestamp { members.append(("sinceTimestamp", .integer(Int64(bitPattern: since)))) }
                if !r.fragmentIDs.isEmpty {
                    members.append(("fragmentIDs", .array(r.fragmentIDs.map { .string(MeshPeerID(rawValue: $0).hex) })))
                }
                return .success(.object(members))
            case .nostrCarrier:
                let c = try NostrCarrierPayload.decode(packet.payload)
                let eventText = String(decoding: c.eventJSON, as: UTF8.self)
                let event = (try? JSONParser().parse(c.eventJSON)) ?? .string(eventText)
                return .success(.object([
                    ("direction", .string(c.direction.name)), ("geohash", .string(c.geohash)), ("event", event),
                ]))
            default:
                return .success(.null)
            }
        } catch {
            return .failure(error)
        }
    }

    // MARK: JSON → packet

    struct InputError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func packet(from json: JSONValue, now: UInt64) throws(InputError) -> MeshPacket {
        guard case .object = json else { throw InputError("expected a JSON object") }
        let type: MessageType
        if let name = json["type"]?.stringValue {
            if let known = MessageType(name: name) {
                type = known
            } else if name.hasPrefix("0x"), let value = UInt8(name.dropFirst(2), radix: 16) {
                type = MessageType(rawValue: value)
            } else {
                throw InputError("unknown type '\(name)'")
            }
        } else if let value = json["typeValue"]?.integerValue, let byte = UInt8(exactly: value) {
            type = MessageType(rawValue: byte)
        } else {
            throw InputError("missing 'type'")
        }
        func uint(_ key: String, default value: UInt64) throws(InputError) -> UInt64 {
            guard let member = json[key], member != .null else { return value }
            guard let integer = member.integerValue, integer >= 0 else { throw InputError("'\(key)' must be a non-negative integer") }
            return UInt64(integer)
        }
        func peer(_ text: String?, _ key: String) throws(InputError) -> MeshPeerID? {
            guard let text else { return nil }
            do { return try MeshPeerID(hex: text) } catch { throw InputError("'\(key)' must be 16 hex characters") }
        }
        func hex(_ text: String, _ key: String) throws(InputError) -> [UInt8] {
            do { return try Hex.decode(text) } catch { throw InputError("'\(key)' is not hex") }
        }
        let version = try uint("version", default: 1)
        let ttl = try uint("ttl", default: 7)
        guard version == 1 || version == 2, ttl <= 255 else { throw InputError("version must be 1 or 2, ttl 0…255") }
        guard let sender = try peer(json["sender"]?.stringValue, "sender") else { throw InputError("missing 'sender'") }
        var route: [MeshPeerID] = []
        for hop in json["route"]?.arrayValue ?? [] {
            guard let id = try peer(hop.stringValue, "route") else { throw InputError("route entries must be hex strings") }
            route.append(id)
        }
        let payload: [UInt8]
        if let text = json["payloadHex"]?.stringValue {
            payload = try hex(text, "payloadHex")
        } else if let decoded = json["payload"], decoded != .null {
            payload = try encodePayload(decoded, type: type)
        } else {
            payload = []
        }
        var packet = MeshPacket(
            version: UInt8(version), type: type, ttl: UInt8(ttl), timestamp: try uint("timestamp", default: now),
            sender: sender, recipient: try peer(json["recipient"]?.stringValue, "recipient"), route: route,
            payload: payload, isRSR: json["isRSR"]?.boolValue ?? false
        )
        if let signature = json["signature"]?.stringValue {
            packet.signature = try hex(signature, "signature")
            guard packet.signature?.count == 64 else { throw InputError("'signature' must be 64 bytes") }
        }
        return packet
    }

    private static func encodePayload(_ json: JSONValue, type: MessageType) throws(InputError) -> [UInt8] {
        do {
            return try encodePayloadUntyped(json, type: type)
        } catch let error as InputError {
            throw error
        } catch {
            throw InputError("payload: \(error)")
        }
    }

    private static func encodePayloadUntyped(_ json: JSONValue, type: MessageType) throws -> [UInt8] {
        func string(_ key: String) throws(InputError) -> String {
            guard let value = json[key]?.stringValue else { throw InputError("payload needs '\(key)'") }
            return value
        }
        func hexField(_ key: String) throws(InputError) -> [UInt8] {
            do { return try Hex.decode(try string(key)) } catch { throw InputError("payload '\(key)' is not hex") }
        }
        do {
            switch type {
            case .message:
                return Array(try string("text").utf8)
            case .leave:
                return []
            case .announce:
                var announce = AnnouncePayload(
                    nickname: try string("nickname"), noisePublicKey: try hexField("noisePublicKey"),
                    signingPublicKey: try hexField("signingPublicKey")
                )
                if let caps = json["capabilities"] {
                    if let raw = caps["raw"]?.integerValue ?? caps.integerValue {
                        announce.capabilities = PeerCapabilities(rawValue: UInt64(bitPattern: raw))
                    } else if let names = caps["names"]?.arrayValue ?? caps.arrayValue {
                        var set = PeerCapabilities()
                        for name in names {
                            guard let bit = PeerCapabilities.namedBits.first(where: { $0.1 == name.stringValue }) else {
                                throw InputError("unknown capability \(name)")
                            }
                            set.insert(bit.0)
                        }
                        announce.capabilities = set
                    }
                }
                announce.bridgeGeohash = json["bridgeGeohash"]?.stringValue
                for neighbor in json["directNeighbors"]?.arrayValue ?? [] {
                    guard let text = neighbor.stringValue, let id = try? MeshPeerID(hex: text) else {
                        throw InputError("directNeighbors entries must be 16 hex characters")
                    }
                    announce.directNeighbors.append(id)
                }
                return try announce.encode()
            case .fragment:
                guard let index = json["index"]?.integerValue, let total = json["total"]?.integerValue,
                    let i = UInt16(exactly: index), let t = UInt16(exactly: total)
                else { throw InputError("fragment needs integer 'index' and 'total'") }
                let original = MessageType(name: try string("originalType")) ?? .message
                let id = try MeshPeerID(hex: try string("fragmentID"))
                return FragmentPayload(fragmentID: id.rawValue, index: i, total: t, originalType: original, chunk: try hexField("chunkHex")).encode()
            case .nostrCarrier:
                guard let direction = NostrCarrierPayload.Direction(name: try string("direction")) else {
                    throw InputError("direction must be toGateway, fromGateway, toBridge or fromBridge")
                }
                let event: [UInt8]
                switch json["event"] {
                case .string(let text)?: event = Array(text.utf8)
                case let value?: event = Array(JSONWriter.compact(value).utf8)
                case nil: throw InputError("carrier needs 'event'")
                }
                return try NostrCarrierPayload(direction: direction, geohash: try string("geohash"), eventJSON: event).encode()
            default:
                throw InputError("type \(type) needs 'payloadHex'")
            }
        }
    }
}

/// Splits a byte stream into the JSON documents it holds one after another (`wire decode` output: pretty,
/// multi-line objects or one object per line), so each can go to the strict parser. A document here is an
/// object or array; brackets inside strings (with their escapes) do not count.
enum JSONDocuments {
    struct SplitError: Error, CustomStringConvertible {
        let description: String
    }

    static func split(_ bytes: [UInt8]) throws(SplitError) -> [[UInt8]] {
        var documents: [[UInt8]] = []
        var depth = 0
        var start = 0
        var inString = false
        var escaped = false
        for (offset, byte) in bytes.enumerated() {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                if depth == 0 { start = offset }
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard depth > 0 else { throw SplitError(description: "unexpected '\(Character(Unicode.Scalar(byte)))' at byte \(offset)") }
                depth -= 1
                if depth == 0 { documents.append(Array(bytes[start...offset])) }
            case UInt8(ascii: "\""):
                guard depth > 0 else { throw SplitError(description: "expected a JSON object at byte \(offset)") }
                inString = true
            case 0x20, 0x09, 0x0A, 0x0D:
                break
            default:
                guard depth > 0 else { throw SplitError(description: "expected a JSON object at byte \(offset)") }
            }
        }
        guard depth == 0, !inString else { throw SplitError(description: "the last JSON document is cut off at byte \(bytes.count)") }
        return documents
    }
}
