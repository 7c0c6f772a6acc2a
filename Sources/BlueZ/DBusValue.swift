/// A D-Bus value as plain data: what the BlueZ module reads from and writes to sd-bus messages.
///
/// Containers carry their element signatures so that empty arrays and dictionaries still have a type.
/// Dictionaries are arrays of ``dictEntry`` values (`a{sv}` = `.array("{sv}", [.dictEntry(.string, .variant)])`).
public indirect enum DBusValue: Sendable, Equatable, CustomStringConvertible {
    case byte(UInt8)
    case bool(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// `ay`, kept as bytes (the GATT values).
    case bytes([UInt8])
    /// `a<element>`; `element` is the element signature (`s`, `o`, `{sv}`, …).
    case array(element: String, [DBusValue])
    case dictEntry(DBusValue, DBusValue)
    case variant(DBusValue)
    case structure([DBusValue])

    /// The value's D-Bus signature.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .bool: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .bytes: "ay"
        case .array(let element, _): "a" + element
        case .dictEntry(let key, let value): "{" + key.signature + value.signature + "}"
        case .variant: "v"
        case .structure(let members): "(" + members.map(\.signature).joined() + ")"
        }
    }

    public var description: String {
        switch self {
        case .byte(let v): "\(v)"
        case .bool(let v): "\(v)"
        case .int16(let v): "\(v)"
        case .uint16(let v): "\(v)"
        case .int32(let v): "\(v)"
        case .uint32(let v): "\(v)"
        case .int64(let v): "\(v)"
        case .uint64(let v): "\(v)"
        case .double(let v): "\(v)"
        case .string(let v): "\"\(v)\""
        case .objectPath(let v): v
        case .signature(let v): "g\"\(v)\""
        case .bytes(let v): "[\(v.count) bytes]"
        case .array(_, let items): "[" + items.map(\.description).joined(separator: ", ") + "]"
        case .dictEntry(let k, let v): "\(k): \(v)"
        case .variant(let v): "<\(v)>"
        case .structure(let m): "(" + m.map(\.description).joined(separator: ", ") + ")"
        }
    }

    // MARK: Builders

    /// `a{sv}` from name/value pairs (values are wrapped in variants).
    public static func properties(_ pairs: [(String, DBusValue)]) -> DBusValue {
        .array(element: "{sv}", pairs.map { .dictEntry(.string($0.0), .variant($0.1)) })
    }

    public static func strings(_ items: [String]) -> DBusValue { .array(element: "s", items.map { .string($0) }) }
    public static func objectPaths(_ items: [String]) -> DBusValue { .array(element: "o", items.map { .objectPath($0) }) }

    // MARK: Accessors (nil when the value has another type)

    /// Unwraps any number of variant layers.
    public var unwrapped: DBusValue {
        if case .variant(let inner) = self { return inner.unwrapped }
        return self
    }

    public var stringValue: String? {
        switch unwrapped {
        case .string(let s), .objectPath(let s), .signature(let s): s
        default: nil
        }
    }

    public var boolValue: Bool? {
        if case .bool(let b) = unwrapped { return b }
        return nil
    }

    public var integerValue: Int? {
        switch unwrapped {
        case .byte(let v): Int(v)
        case .int16(let v): Int(v)
        case .uint16(let v): Int(v)
        case .int32(let v): Int(v)
        case .uint32(let v): Int(v)
        case .int64(let v): Int(exactly: v)
        case .uint64(let v): Int(exactly: v)
        default: nil
        }
    }

    public var bytesValue: [UInt8]? {
        switch unwrapped {
        case .bytes(let b): return b
        case .array(element: "y", let items):
            var out: [UInt8] = []
            for item in items {
                guard case .byte(let b) = item else { return nil }
                out.append(b)
            }
            return out
        default: return nil
        }
    }

    public var arrayItems: [DBusValue]? {
        switch unwrapped {
        case .array(_, let items): items
        case .bytes(let b): b.map { .byte($0) }
        default: nil
        }
    }

    public var stringArray: [String]? { arrayItems?.compactMap(\.stringValue) }

    /// A dictionary (`a{s…}` or `a{o…}`) keyed by its string keys; nil for anything else.
    public var dictionary: [String: DBusValue]? {
        guard let items = arrayItems else { return nil }
        var out: [String: DBusValue] = [:]
        for item in items {
            guard case .dictEntry(let key, let value) = item, let name = key.stringValue else { return nil }
            out[name] = value
        }
        return out
    }
}
