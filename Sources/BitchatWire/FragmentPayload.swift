/// The fragment payload (type 0x20), MESH-WIRE §6.1.
///
/// ```
/// 0               8          10         12            13
/// +---------------+----------+----------+-------------+----------------------------+
/// | fragment ID 8 | index u16| total u16| orig. type  | chunk of the original frame |
/// +---------------+----------+----------+-------------+----------------------------+
/// ```
public struct FragmentPayload: Sendable, Equatable {
    public enum Limits {
        /// ID + index + total + type.
        public static let headerLength = 13
        /// iOS accepts at most 10 000 fragments per set.
        public static let maxTotal = 10_000
    }

    public var fragmentID: UInt64
    public var index: UInt16
    public var total: UInt16
    public var originalType: MessageType
    public var chunk: [UInt8]

    public init(fragmentID: UInt64, index: UInt16, total: UInt16, originalType: MessageType, chunk: [UInt8]) {
        self.fragmentID = fragmentID
        self.index = index
        self.total = total
        self.originalType = originalType
        self.chunk = chunk
    }

    public func encode() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Limits.headerLength + chunk.count)
        out.appendBigEndian(fragmentID, size: 8)
        out.appendBigEndian(UInt64(index), size: 2)
        out.appendBigEndian(UInt64(total), size: 2)
        out.append(originalType.rawValue)
        out += chunk
        return out
    }

    /// Rejects payloads under 13 bytes, total 0 or above 10 000, and index ≥ total.
    public static func decode(_ bytes: [UInt8]) throws(WireError) -> FragmentPayload {
        guard bytes.count >= Limits.headerLength else {
            throw .truncated(field: .fragmentHeader, needed: Limits.headerLength, available: bytes.count)
        }
        var reader = ByteReader(bytes)
        let id = try reader.uint(8, .fragmentHeader)
        let index = UInt16(try reader.uint(2, .fragmentIndex))
        let total = UInt16(try reader.uint(2, .fragmentTotal))
        let type = MessageType(rawValue: try reader.u8(.fragmentHeader))
        guard total >= 1, Int(total) <= Limits.maxTotal else { throw .invalidValue(field: .fragmentTotal, value: Int(total)) }
        guard index < total else { throw .invalidValue(field: .fragmentIndex, value: Int(index)) }
        return FragmentPayload(fragmentID: id, index: index, total: total, originalType: type, chunk: reader.rest())
    }
}
