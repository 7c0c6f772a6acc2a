import BotCompression

/// One bitchat packet ("frame" once encoded), MESH-WIRE §2.
///
/// ```
///  0       1      2     3                 11      12                      14 (v1) / 16 (v2)
/// +-------+------+-----+-----------------+-------+-----------------------+
/// |version| type | TTL | timestamp u64 ms| flags | payloadLength u16/u32 |
/// +-------+------+-----+-----------------+-------+-----------------------+
/// | sender 8 | [recipient 8] | [v2 route: count u8, count × 8] |
/// | payload region: raw payload, or originalSize (u16 v1 / u32 v2) + raw DEFLATE |
/// | [signature 64] | [PKCS#7 padding, ignored] |
/// flags: 0x01 recipient, 0x02 signature, 0x04 compressed, 0x08 route (v2 only), 0x10 RSR
/// ```
///
/// ``payload`` is always the decoded (inflated) payload. When a frame arrived compressed, the exact
/// DEFLATE body is kept in ``receivedCompressedBody`` so that relaying and signature checks reuse the
/// sender's bytes instead of our re-compression (MESH-WIRE §4.4).
public struct MeshPacket: Sendable, Equatable {
    public enum Limits {
        /// iOS cap on payloadLength and on a declared original size: 1 MiB file + 131 088 TLV + 96 framing.
        public static let maxPayloadLength = 1_179_760
        /// Reject originalSize / compressedSize above this (zip-bomb guard shared by both apps).
        public static let maxCompressionRatio = 50_000
        /// Smallest frame: v1 header (14) + sender (8).
        public static let minimumFrameV1 = 22
        /// Smallest v2 frame: v2 header (16) + sender (8).
        public static let minimumFrameV2 = 24
        /// Payloads shorter than this are never compressed (§2.5 test 1).
        public static let compressionThreshold = 100
        /// A route count is one byte.
        public static let maxRouteHops = 255
        /// Ed25519 signature size.
        public static let signatureLength = 64
        /// The TTL every originated packet carries (and the value that marks a first-hop packet).
        public static let originTTL: UInt8 = 7
    }

    public enum Flags {
        public static let hasRecipient: UInt8 = 0x01
        public static let hasSignature: UInt8 = 0x02
        public static let isCompressed: UInt8 = 0x04
        public static let hasRoute: UInt8 = 0x08
        public static let isRSR: UInt8 = 0x10
    }

    /// How the encoder treats the payload.
    public enum Compression: Sendable {
        /// Reuse ``receivedCompressedBody`` if present, else apply the §2.5 decision (level 5).
        case standard
        /// Apply the §2.5 decision afresh, ignoring any received body.
        case recompress
        /// Never compress.
        case none
    }

    public var version: UInt8
    public var type: MessageType
    public var ttl: UInt8
    /// Milliseconds since the Unix epoch.
    public var timestamp: UInt64
    public var sender: MeshPeerID
    /// nil = broadcast (as iOS sends); `FF×8` is also broadcast (as Android sends).
    public var recipient: MeshPeerID?
    /// v2 only: intermediate hops. Ignored when encoding v1.
    public var route: [MeshPeerID]
    public var payload: [UInt8]
    /// 64 bytes when present.
    public var signature: [UInt8]?
    /// iOS "request-sync response" flag; not covered by the signature.
    public var isRSR: Bool
    /// The raw DEFLATE body as received, when the frame was compressed.
    public var receivedCompressedBody: [UInt8]?

    public init(
        version: UInt8 = 1,
        type: MessageType,
        ttl: UInt8 = Limits.originTTL,
        timestamp: UInt64,
        sender: MeshPeerID,
        recipient: MeshPeerID? = nil,
        route: [MeshPeerID] = [],
        payload: [UInt8],
        signature: [UInt8]? = nil,
        isRSR: Bool = false
    ) {
        self.version = version
        self.type = type
        self.ttl = ttl
        self.timestamp = timestamp
        self.sender = sender
        self.recipient = recipient
        self.route = route
        self.payload = payload
        self.signature = signature
        self.isRSR = isRSR
        self.receivedCompressedBody = nil
    }

    /// A wall-clock time in seconds as the packet's ms timestamp, truncated as iOS does (`UInt64(s × 1000)`).
    public static func timestampMs(fromSeconds seconds: Double) -> UInt64 {
        seconds <= 0 ? 0 : UInt64(seconds * 1_000)
    }

    /// True when there is no recipient or the recipient is `FF×8`.
    public var isBroadcast: Bool { recipient.map(\.isBroadcast) ?? true }

    // MARK: Encoding

    /// The frame bytes. `padding` applies PKCS#7 to the §2.6 bucket (only Noise types are padded on the air).
    public func encode(padding: Bool = false, compression: Compression = .standard) throws(WireError) -> [UInt8] {
        guard version == 1 || version == 2 else { throw .unsupportedVersion(version) }
        let sizeField = version == 2 ? 4 : 2
        let useRoute = version == 2 && !route.isEmpty
        if useRoute, route.count > Limits.maxRouteHops { throw .routeTooLong(route.count) }

        var flags: UInt8 = 0
        if recipient != nil { flags |= Flags.hasRecipient }
        if signature != nil { flags |= Flags.hasSignature }
        if useRoute { flags |= Flags.hasRoute }
        if isRSR { flags |= Flags.isRSR }

        let body = compressedBody(for: compression)
        if body != nil { flags |= Flags.isCompressed }
        let regionLength = body.map { sizeField + $0.count } ?? payload.count
        if version == 1, regionLength > 0xFFFF { throw .payloadTooLargeForVersion(regionLength) }
        if regionLength > Limits.maxPayloadLength { throw .payloadTooLarge(regionLength) }

        var out: [UInt8] = []
        out.reserveCapacity(16 + 8 + 8 + regionLength + 64 + (useRoute ? 1 + 8 * route.count : 0))
        out.append(version)
        out.append(type.rawValue)
        out.append(ttl)
        out.appendBigEndian(timestamp, size: 8)
        out.append(flags)
        out.appendBigEndian(UInt64(regionLength), size: sizeField)
        out.appendBigEndian(sender.rawValue, size: 8)
        if let recipient { out.appendBigEndian(recipient.rawValue, size: 8) }
        if useRoute {
            out.append(UInt8(route.count))
            for hop in route { out.appendBigEndian(hop.rawValue, size: 8) }
        }
        if let body {
            out.appendBigEndian(UInt64(payload.count), size: sizeField)
            out += body
        } else {
            out += payload
        }
        if let signature { out += signature }
        return padding ? MessagePadding.pad(out) : out
    }

    /// The DEFLATE body the encoder will use, or nil to send the payload raw.
    func compressedBody(for compression: Compression) -> [UInt8]? {
        switch compression {
        case .none:
            return nil
        case .standard:
            if let receivedCompressedBody { return receivedCompressedBody }
            return Self.compressIfWorthwhile(payload, version: version)
        case .recompress:
            return Self.compressIfWorthwhile(payload, version: version)
        }
    }

    /// The §2.5 decision: ≥ 100 bytes, fewer than 90 % distinct byte values, and the level-5 raw DEFLATE
    /// output strictly shorter than the input. v1 also needs the original size to fit its u16 field.
    public static func compressIfWorthwhile(_ payload: [UInt8], version: UInt8) -> [UInt8]? {
        guard payload.count >= Limits.compressionThreshold else { return nil }
        if version == 1, payload.count > 0xFFFF { return nil }
        guard isLowEntropyEnough(payload) else { return nil }
        guard let body = RawDeflate.compress(payload), !body.isEmpty, body.count < payload.count else { return nil }
        return body
    }

    /// `distinctByteValues / min(count, 256) < 0.9`.
    static func isLowEntropyEnough(_ payload: [UInt8]) -> Bool {
        var seen = [Bool](repeating: false, count: 256)
        var distinct = 0
        for byte in payload where !seen[Int(byte)] {
            seen[Int(byte)] = true
            distinct += 1
        }
        // Integer form of distinct / min(n, 256) < 0.9.
        return distinct * 10 < min(payload.count, 256) * 9
    }

    // MARK: Decoding

    /// Decodes a frame: the raw bytes first, then — only if that fails and PKCS#7 unpadding removes
    /// something — the unpadded bytes (MESH-WIRE §2.4). Trailing bytes after the last field are ignored.
    public static func decode(_ bytes: [UInt8]) throws(WireError) -> MeshPacket {
        do {
            return try decodeCore(bytes)
        } catch {
            guard let unpadded = MessagePadding.unpad(bytes) else { throw error }
            do {
                return try decodeCore(unpadded)
            } catch _ {
                // The raw attempt's reason describes the frame as received.
                throw error
            }
        }
    }

    static func decodeCore(_ bytes: [UInt8]) throws(WireError) -> MeshPacket {
        guard bytes.count >= Limits.minimumFrameV1 else { throw .frameTooShort(bytes.count) }
        let version = bytes[0]
        guard version == 1 || version == 2 else { throw .unsupportedVersion(version) }
        if version == 2, bytes.count < Limits.minimumFrameV2 { throw .frameTooShort(bytes.count) }
        var reader = ByteReader(bytes, offset: 1)
        let type = MessageType(rawValue: try reader.u8(.header))
        let ttl = try reader.u8(.header)
        let timestamp = try reader.uint(8, .header)
        let flags = try reader.u8(.header)
        let sizeField = version == 2 ? 4 : 2
        let payloadLength = Int(try reader.uint(sizeField, .header))
        guard payloadLength <= Limits.maxPayloadLength else { throw .payloadTooLarge(payloadLength) }

        let sender = MeshPeerID(rawValue: try reader.uint(8, .sender))
        var recipient: MeshPeerID?
        if flags & Flags.hasRecipient != 0 { recipient = MeshPeerID(rawValue: try reader.uint(8, .recipient)) }
        var route: [MeshPeerID] = []
        if version == 2, flags & Flags.hasRoute != 0 {
            let count = Int(try reader.u8(.routeCount))
            try reader.require(count * 8, .route)
            route.reserveCapacity(count)
            for _ in 0..<count { route.append(MeshPeerID(rawValue: try reader.uint(8, .route))) }
        }

        try reader.require(payloadLength, .payload)
        var payload: [UInt8]
        var receivedBody: [UInt8]?
        if flags & Flags.isCompressed != 0 {
            guard payloadLength > sizeField else { throw .compressedBodyMissing }
            let originalSize = Int(try reader.uint(sizeField, .originalSize))
            let body = try reader.take(payloadLength - sizeField, .payload)
            guard originalSize <= Limits.maxPayloadLength else { throw .payloadTooLarge(originalSize) }
            guard originalSize / body.count <= Limits.maxCompressionRatio else { throw .compressionRatioTooHigh }
            payload = try inflate(body, originalSize: originalSize)
            receivedBody = body
        } else {
            payload = try reader.take(payloadLength, .payload)
        }
        var signature: [UInt8]?
        if flags & Flags.hasSignature != 0 { signature = try reader.take(Limits.signatureLength, .signature) }

        var packet = MeshPacket(
            version: version, type: type, ttl: ttl, timestamp: timestamp, sender: sender, recipient: recipient,
            route: route, payload: payload, signature: signature, isRSR: flags & Flags.isRSR != 0
        )
        packet.receivedCompressedBody = receivedBody
        return packet
    }

    /// Raw DEFLATE first; a zlib-wrapped body (Android tolerates those) as the fallback.
    private static func inflate(_ body: [UInt8], originalSize: Int) throws(WireError) -> [UInt8] {
        let inflated: [UInt8]
        if let raw = try? RawDeflate.decompress(body, cap: originalSize) {
            inflated = raw
        } else if looksZlibWrapped(body), let wrapped = try? RawDeflate.decompressZlibWrapped(body, cap: originalSize) {
            inflated = wrapped
        } else {
            throw .inflateFailed
        }
        guard inflated.count == originalSize else {
            throw .originalSizeMismatch(declared: originalSize, actual: inflated.count)
        }
        return inflated
    }

    private static func looksZlibWrapped(_ body: [UInt8]) -> Bool {
        guard body.count >= 2 else { return false }
        let cmf = UInt16(body[0]), flg = UInt16(body[1])
        return cmf & 0x0F == 8 && (cmf << 8 | flg) % 31 == 0
    }
}

/// PKCS#7 padding to the 256/512/1024/2048 buckets with 16 bytes of headroom (MESH-WIRE §2.6).
public enum MessagePadding {
    public enum Limits {
        /// The bucket sizes both apps pad to.
        public static let buckets = [256, 512, 1024, 2048]
        /// Headroom added before choosing a bucket, so a real pad is always 16…255 bytes.
        public static let headroom = 16
    }

    /// `frame` padded to the smallest bucket ≥ count + 16; unchanged if none fits or the pad would exceed 255.
    public static func pad(_ frame: [UInt8]) -> [UInt8] {
        guard let target = Limits.buckets.first(where: { $0 >= frame.count + Limits.headroom }) else { return frame }
        let padLength = target - frame.count
        guard (1...255).contains(padLength) else { return frame }
        return frame + [UInt8](repeating: UInt8(padLength), count: padLength)
    }

    /// The frame without its PKCS#7 tail, or nil if the tail is not valid padding (nothing to remove).
    public static func unpad(_ frame: [UInt8]) -> [UInt8]? {
        guard let last = frame.last, last >= 1, Int(last) <= frame.count else { return nil }
        let n = Int(last)
        for i in (frame.count - n)..<frame.count where frame[i] != last { return nil }
        return Array(frame[..<(frame.count - n)])
    }
}

extension MeshPacket {
    /// A stored packet as a gossip-sync reply (BOARD.md §8, §9.4): unchanged except TTL 0 and IS_RSR set;
    /// the recipient field stays as it was (usually broadcast), since "directed" is a link-layer choice.
    public var asSyncReply: MeshPacket {
        var copy = self
        copy.ttl = 0
        copy.isRSR = true
        return copy
    }

    /// ``asSyncReply`` on an encoded, unpadded frame: byte 2 (TTL) = 0 and flag 0x10 set in byte 11 — the
    /// other bytes, the sender's compressed body and signature included, are kept exactly. Nil when `frame`
    /// is shorter than a v1 header.
    public static func syncReplyFrame(_ frame: [UInt8]) -> [UInt8]? {
        guard frame.count >= Limits.minimumFrameV1 else { return nil }
        var out = frame
        out[2] = 0
        out[11] |= Flags.isRSR
        return out
    }
}
