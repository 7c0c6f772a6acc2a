/// Serialises ``JSONValue`` compactly (or indented for people), with the NIP-01 canonical string escaping.
public enum JSONWriter {
    /// Compact form: no whitespace at all. Used for every byte that gets hashed or sent.
    public static func compact(_ value: JSONValue) -> String {
        var out: [UInt8] = []
        write(value, into: &out, indent: nil, level: 0)
        return String(decoding: out, as: UTF8.self)
    }

    /// Indented form for operators (two spaces, one member per line).
    public static func pretty(_ value: JSONValue) -> String {
        var out: [UInt8] = []
        write(value, into: &out, indent: 2, level: 0)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `string` as a JSON string literal with the canonical escaping.
    public static func appendString(_ string: String, into out: inout [UInt8]) {
        // Fast path: a native string whose bytes need no escape (the usual chat text, hex, tags) is copied
        // in one block; anything else (or a bridged string without contiguous UTF-8) takes the byte loop,
        // which writes exactly the same bytes for escape-free input.
        let copied: Bool? = string.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes where byte < 0x20 || byte == 0x22 || byte == 0x5c { return false }
            out.reserveCapacity(out.count + bytes.count + 2)
            out.append(0x22)
            out.append(contentsOf: bytes)
            out.append(0x22)
            return true
        }
        if copied == true { return }
        appendStringEscaping(string, into: &out)
    }

    /// The byte-at-a-time form of ``appendString(_:into:)``: the reference the fast path is tested against.
    static func appendStringEscaping(_ string: String, into out: inout [UInt8]) {
        out.append(0x22)
        for byte in string.utf8 {
            switch byte {
            case 0x22: out.append(0x5c); out.append(0x22)
            case 0x5c: out.append(0x5c); out.append(0x5c)
            case 0x0a: out.append(0x5c); out.append(UInt8(ascii: "n"))
            case 0x0d: out.append(0x5c); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(0x5c); out.append(UInt8(ascii: "t"))
            case 0x08: out.append(0x5c); out.append(UInt8(ascii: "b"))
            case 0x0c: out.append(0x5c); out.append(UInt8(ascii: "f"))
            case 0x00..<0x20:
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0f)])
            default: out.append(byte)
            }
        }
        out.append(0x22)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    private static func write(_ value: JSONValue, into out: inout [UInt8], indent: Int?, level: Int) {
        switch value {
        case .null: out.append(contentsOf: Array("null".utf8))
        case .bool(let b): out.append(contentsOf: Array((b ? "true" : "false").utf8))
        case .integer(let i): out.append(contentsOf: Array(String(i).utf8))
        case .double(let d): out.append(contentsOf: Array(format(d).utf8))
        case .string(let s): appendString(s, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(into: &out, indent: indent, level: level + 1)
                write(element, into: &out, indent: indent, level: level + 1)
            }
            if !elements.isEmpty { newline(into: &out, indent: indent, level: level) }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, member)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                newline(into: &out, indent: indent, level: level + 1)
                appendString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                if indent != nil { out.append(0x20) }
                write(member, into: &out, indent: indent, level: level + 1)
            }
            if !members.isEmpty { newline(into: &out, indent: indent, level: level) }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func newline(into out: inout [UInt8], indent: Int?, level: Int) {
        guard let indent else { return }
        out.append(0x0a)
        out.append(contentsOf: repeatElement(0x20, count: indent * level))
    }

    /// Shortest round-tripping decimal; integral values keep a trailing `.0` dropped (`3` not `3.0`).
    private static func format(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        if d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) }
        return "\(d)"
    }
}
