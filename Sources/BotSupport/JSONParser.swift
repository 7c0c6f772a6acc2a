/// Strict RFC 8259 parser with explicit limits. Every rejection is a named ``JSONParseError``.
public struct JSONParser: Sendable {
    /// Bounds that keep hostile input cheap to reject.
    public struct Limits: Sendable {
        /// Largest document accepted, in bytes (relay frames are bounded far below this by their callers).
        public var maxBytes: Int
        /// Deepest array/object nesting; recursion depth is bounded by it, so no stack overflow.
        public var maxDepth: Int

        public init(maxBytes: Int = 4 << 20, maxDepth: Int = 64) {
            self.maxBytes = maxBytes
            self.maxDepth = maxDepth
        }
    }

    public var limits: Limits

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Parses one complete JSON document (surrounding whitespace allowed, nothing else).
    public func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(JSONParseError) -> JSONValue in try self.parse(buffer) }
        }
        return try result.get()
    }

    /// Parses one complete JSON document from UTF-8 bytes.
    public func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> JSONValue in try self.parse(buffer) }
    }

    public func parse(_ buffer: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> JSONValue {
        guard buffer.count <= limits.maxBytes else { throw .tooLarge(buffer.count, limit: limits.maxBytes) }
        var cursor = Cursor(bytes: buffer, maxDepth: limits.maxDepth)
        cursor.skipWhitespace()
        let value = try cursor.parseValue(depth: 0)
        cursor.skipWhitespace()
        guard cursor.atEnd else { throw .trailingData(offset: cursor.offset) }
        return value
    }
}

/// Why a JSON document was rejected.
public enum JSONParseError: Error, Equatable, Sendable {
    case tooLarge(Int, limit: Int)
    case tooDeep(offset: Int)
    case unexpectedEnd
    case unexpectedCharacter(offset: Int)
    case trailingData(offset: Int)
    case invalidNumber(offset: Int)
    case invalidEscape(offset: Int)
    case invalidUTF8(offset: Int)
    case controlCharacterInString(offset: Int)
    case duplicateKey(String)
}

private struct Cursor {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var offset = 0

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    var atEnd: Bool { offset >= bytes.count }

    mutating func skipWhitespace() {
        while offset < bytes.count {
            switch bytes[offset] {
            case 0x20, 0x09, 0x0a, 0x0d: offset += 1
            default: return
            }
        }
    }

    func peek() throws(JSONParseError) -> UInt8 {
        guard offset < bytes.count else { throw .unexpectedEnd }
        return bytes[offset]
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard offset + count <= bytes.count else { throw .unexpectedEnd }
        let start = literal.utf8Start
        for i in 0..<count where bytes[offset + i] != start[i] {
            throw .unexpectedCharacter(offset: offset + i)
        }
        offset += count
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        switch try peek() {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw .unexpectedCharacter(offset: offset)
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= maxDepth else { throw .tooDeep(offset: offset) }
        offset += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if try peek() == UInt8(ascii: "]") {
            offset += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            switch try peek() {
            case UInt8(ascii: ","): offset += 1
            case UInt8(ascii: "]"): offset += 1; return .array(elements)
            default: throw .unexpectedCharacter(offset: offset)
            }
        }
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= maxDepth else { throw .tooDeep(offset: offset) }
        offset += 1
        var members: [(String, JSONValue)] = []
        var keys = Set<String>()
        skipWhitespace()
        if try peek() == UInt8(ascii: "}") {
            offset += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard try peek() == UInt8(ascii: "\"") else { throw .unexpectedCharacter(offset: offset) }
            let key = try parseString()
            guard keys.insert(key).inserted else { throw .duplicateKey(key) }
            skipWhitespace()
            guard try peek() == UInt8(ascii: ":") else { throw .unexpectedCharacter(offset: offset) }
            offset += 1
            skipWhitespace()
            members.append((key, try parseValue(depth: depth)))
            skipWhitespace()
            switch try peek() {
            case UInt8(ascii: ","): offset += 1
            case UInt8(ascii: "}"): offset += 1; return .object(members)
            default: throw .unexpectedCharacter(offset: offset)
            }
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = offset
        var isInteger = true
        if bytes[offset] == UInt8(ascii: "-") { offset += 1 }
        guard offset < bytes.count else { throw .invalidNumber(offset: start) }
        if bytes[offset] == UInt8(ascii: "0") {
            offset += 1
        } else if isDigit(bytes[offset]) {
            while offset < bytes.count, isDigit(bytes[offset]) { offset += 1 }
        } else {
            throw .invalidNumber(offset: start)
        }
        if offset < bytes.count, bytes[offset] == UInt8(ascii: ".") {
            isInteger = false
            offset += 1
            guard offset < bytes.count, isDigit(bytes[offset]) else { throw .invalidNumber(offset: start) }
            while offset < bytes.count, isDigit(bytes[offset]) { offset += 1 }
        }
        if offset < bytes.count, bytes[offset] == UInt8(ascii: "e") || bytes[offset] == UInt8(ascii: "E") {
            isInteger = false
            offset += 1
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "+") || bytes[offset] == UInt8(ascii: "-") {
                offset += 1
            }
            guard offset < bytes.count, isDigit(bytes[offset]) else { throw .invalidNumber(offset: start) }
            while offset < bytes.count, isDigit(bytes[offset]) { offset += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<offset]), as: UTF8.self)
        if isInteger, let value = Int64(text) { return .integer(value) }
        guard let value = Double(text), value.isFinite else { throw .invalidNumber(offset: start) }
        return .double(value)
    }

    @inline(__always)
    func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

    mutating func parseString() throws(JSONParseError) -> String {
        offset += 1  // opening quote
        let start = offset
        // Fast path: no escapes, plain UTF-8 validated by String(validating:).
        while offset < bytes.count {
            let c = bytes[offset]
            if c == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<offset])
                guard let s = String(validating: slice, as: UTF8.self) else { throw .invalidUTF8(offset: start) }
                offset += 1
                return s
            }
            if c == UInt8(ascii: "\\") { break }
            if c < 0x20 { throw .controlCharacterInString(offset: offset) }
            offset += 1
        }
        guard offset < bytes.count else { throw .unexpectedEnd }
        // Slow path with escapes.
        var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<offset]))
        while true {
            guard offset < bytes.count else { throw .unexpectedEnd }
            let c = bytes[offset]
            if c == UInt8(ascii: "\"") {
                offset += 1
                guard let s = String(validating: out, as: UTF8.self) else { throw .invalidUTF8(offset: start) }
                return s
            }
            if c < 0x20 { throw .controlCharacterInString(offset: offset) }
            if c != UInt8(ascii: "\\") {
                out.append(c)
                offset += 1
                continue
            }
            offset += 1
            guard offset < bytes.count else { throw .unexpectedEnd }
            let escape = bytes[offset]
            offset += 1
            switch escape {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5c)
            case UInt8(ascii: "/"): out.append(0x2f)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0c)
            case UInt8(ascii: "n"): out.append(0x0a)
            case UInt8(ascii: "r"): out.append(0x0d)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    // A high surrogate must be followed by an escaped low surrogate.
                    guard offset + 1 < bytes.count, bytes[offset] == UInt8(ascii: "\\"),
                        bytes[offset + 1] == UInt8(ascii: "u")
                    else { throw .invalidEscape(offset: offset) }
                    offset += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw .invalidEscape(offset: offset) }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw .invalidEscape(offset: offset)
                }
                guard let unicode = Unicode.Scalar(scalar) else { throw .invalidEscape(offset: offset) }
                out.append(contentsOf: Array(String(Character(unicode)).utf8))
            default:
                throw .invalidEscape(offset: offset - 1)
            }
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard offset + 4 <= bytes.count else { throw .unexpectedEnd }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[offset]
            let digit: UInt32
            switch c {
            case 0x30...0x39: digit = UInt32(c - 0x30)
            case 0x61...0x66: digit = UInt32(c - 0x61 + 10)
            case 0x41...0x46: digit = UInt32(c - 0x41 + 10)
            default: throw .invalidEscape(offset: offset)
            }
            value = value << 4 | digit
            offset += 1
        }
        return value
    }
}
