/// A bounds-checked cursor over untrusted bytes. Every read throws ``WireError/truncated(field:needed:available:)``
/// instead of trapping.
struct ByteReader {
    let bytes: [UInt8]
    private(set) var offset: Int
    let end: Int

    init(_ bytes: [UInt8], offset: Int = 0, end: Int? = nil) {
        self.bytes = bytes
        self.offset = offset
        self.end = min(end ?? bytes.count, bytes.count)
    }

    var remaining: Int { max(0, end - offset) }
    var isAtEnd: Bool { offset >= end }

    mutating func require(_ count: Int, _ field: WireError.Field) throws(WireError) {
        guard count >= 0, remaining >= count else {
            throw .truncated(field: field, needed: count, available: remaining)
        }
    }

    mutating func u8(_ field: WireError.Field) throws(WireError) -> UInt8 {
        try require(1, field)
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint(_ size: Int, _ field: WireError.Field) throws(WireError) -> UInt64 {
        try require(size, field)
        var value: UInt64 = 0
        for i in 0..<size { value = value << 8 | UInt64(bytes[offset + i]) }
        offset += size
        return value
    }

    mutating func take(_ count: Int, _ field: WireError.Field) throws(WireError) -> [UInt8] {
        try require(count, field)
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// One TLV element: a 1-byte type, a big-endian length of `lengthSize` bytes (chosen per type), the value.
    /// A length that runs past the end is ``WireError/tlvOverrun(type:)``.
    mutating func tlv(lengthSize: (UInt8) -> Int) throws(WireError) -> (type: UInt8, value: [UInt8]) {
        let type = try u8(.payload)
        let length = Int(try uint(lengthSize(type), .payload))
        guard remaining >= length else { throw .tlvOverrun(type: type) }
        return (type, try take(length, .payload))
    }

    mutating func rest() -> [UInt8] {
        defer { offset = end }
        return offset < end ? Array(bytes[offset..<end]) : []
    }
}

extension Array where Element == UInt8 {
    mutating func appendBigEndian(_ value: UInt64, size: Int) {
        for i in (0..<size).reversed() { append(UInt8(truncatingIfNeeded: value >> UInt64(8 * i))) }
    }

    /// A TLV with a 1-byte type and a 2-byte big-endian length (carrier, board, sync and file payloads).
    mutating func appendTLV16(_ type: UInt8, _ value: [UInt8]) {
        append(type)
        appendBigEndian(UInt64(value.count), size: 2)
        self += value
    }
}

/// Strict UTF-8 decoding: nil for invalid input (no replacement characters).
func decodeUTF8(_ bytes: [UInt8]) -> String? {
    String(validating: bytes, as: UTF8.self)
}
