/// Framing on a virtual-radio TCP connection: each frame is a 2-byte big-endian length followed by exactly
/// that many bytes — one bitchat packet, i.e. one BLE write's worth.
///
/// ```
/// +----------------+------------------------------+
/// | length u16 BE  | frame (length bytes, 1…65535) |
/// +----------------+------------------------------+
/// ```
/// A zero length is a keep-alive and carries no frame.
public enum RadioFraming {
    public enum Limits {
        /// The 2-byte length field bounds a frame.
        public static let maxFrame = 0xFFFF
    }

    /// The bytes that carry `frame`, or nil if it is too long for the length field.
    public static func encode(_ frame: [UInt8]) -> [UInt8]? {
        guard frame.count <= Limits.maxFrame else { return nil }
        return [UInt8(frame.count >> 8), UInt8(frame.count & 0xFF)] + frame
    }

    /// Incremental decoder over a byte stream. Bounded: it never buffers more than one frame plus header.
    public struct Decoder: Sendable {
        private var buffer: [UInt8] = []
        private var start = 0

        public init() {}

        /// Appends received bytes and returns the complete frames they finish.
        public mutating func push(_ bytes: some Collection<UInt8>) -> [[UInt8]] {
            buffer.append(contentsOf: bytes)
            var frames: [[UInt8]] = []
            while buffer.count - start >= 2 {
                let length = Int(buffer[start]) << 8 | Int(buffer[start + 1])
                guard buffer.count - start - 2 >= length else { break }
                if length > 0 { frames.append(Array(buffer[(start + 2)..<(start + 2 + length)])) }
                start += 2 + length
            }
            if start > 0 {
                buffer.removeFirst(start)
                start = 0
            }
            return frames
        }
    }
}
