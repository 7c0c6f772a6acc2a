/// A JSON document tree with a strict, bounded parser and a deterministic writer.
///
/// Written by hand because the bytes matter: the writer's string escaping is the NIP-01 canonical form
/// (`"` `\` and C0 controls escaped — `\b \t \n \f \r` short, others as lowercase `\u00xx` — while `/`,
/// U+007F and all non-ASCII stay raw UTF-8), and the parser must reject hostile input with a reason
/// instead of trapping. Object member order is preserved as parsed or built.
public enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    /// A number written without fraction or exponent that fits in 64 bits.
    case integer(Int64)
    /// Any other number.
    case double(Double)
    case string(String)
    case array([JSONValue])
    /// Members in order; duplicate keys are rejected by the parser.
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.integer(a), .integer(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }
}

extension JSONValue {
    /// The member named `key` of an object, or nil.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var integerValue: Int64? {
        if case .integer(let i) = self { return i }
        return nil
    }

    /// Integers and doubles alike, as a Double.
    public var numberValue: Double? {
        switch self {
        case .integer(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var objectValue: [(String, JSONValue)]? {
        if case .object(let o) = self { return o }
        return nil
    }
}
