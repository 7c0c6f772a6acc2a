public import BotSupport

/// One line of a recorded stream (SPAM-FILTER.md §9): a candidate plus the time it arrived.
///
/// `{"id": "…", "sender": "…", "created_at": 1750000000.5, "received_at": 1750000001, "text": "…",
///   "attachment": false, "direction": "nostr-to-mesh"}` — `received_at` defaults to `created_at`,
/// `direction` to `nostr-to-mesh`; `attachment: true` (or no/empty text) makes it a media row. Unknown
/// keys are ignored so recordings may carry extra context (display names, channels).
public struct RecordedCandidate: Sendable, Equatable {
    public var candidate: SpamCandidate
    /// The filter's "now" for this line.
    public var receivedAt: Double

    public init(candidate: SpamCandidate, receivedAt: Double) {
        self.candidate = candidate
        self.receivedAt = receivedAt
    }

    /// Why a line is not valid input.
    public enum DecodeError: Error, Equatable, Sendable, CustomStringConvertible {
        case notJSON(String)
        case notAnObject
        case missing(field: String)
        case wrongType(field: String, expected: String)
        case invalid(field: String, reason: String)

        public var description: String {
            switch self {
            case .notJSON(let reason): "not valid JSON (\(reason))"
            case .notAnObject: "not a JSON object"
            case .missing(let field): "missing '\(field)'"
            case .wrongType(let field, let expected): "'\(field)' must be \(expected)"
            case .invalid(let field, let reason): "'\(field)' \(reason)"
            }
        }
    }

    /// Parses one line.
    public init(line: String) throws(DecodeError) {
        let value: JSONValue
        do {
            value = try JSONParser(limits: .init(maxBytes: 1 << 20, maxDepth: 8)).parse(line)
        } catch {
            throw .notJSON("\(error)")
        }
        try self.init(json: value)
    }

    public init(json: JSONValue) throws(DecodeError) {
        guard json.objectValue != nil else { throw .notAnObject }
        func string(_ key: String) throws(DecodeError) -> String? {
            guard let v = json[key], v != .null else { return nil }
            guard let s = v.stringValue else { throw .wrongType(field: key, expected: "a string") }
            return s
        }
        func number(_ key: String) throws(DecodeError) -> Double? {
            guard let v = json[key], v != .null else { return nil }
            guard let d = v.numberValue, d.isFinite else { throw .wrongType(field: key, expected: "a number") }
            return d
        }
        guard let id = try string("id") else { throw .missing(field: "id") }
        guard !id.isEmpty else { throw .invalid(field: "id", reason: "is empty") }
        guard let sender = try string("sender") else { throw .missing(field: "sender") }
        guard !sender.isEmpty else { throw .invalid(field: "sender", reason: "is empty") }
        guard let createdAt = try number("created_at") else { throw .missing(field: "created_at") }
        let receivedAt = try number("received_at") ?? createdAt
        let text = try string("text") ?? ""
        var attachment = false
        if let v = json["attachment"], v != .null {
            guard let b = v.boolValue else { throw .wrongType(field: "attachment", expected: "true or false") }
            attachment = b
        }
        var direction = SpamDirection.nostrToMesh
        if let d = try string("direction") {
            guard let parsed = SpamDirection(text: d) else {
                throw .invalid(field: "direction", reason: "must be nostr-to-mesh or mesh-to-nostr")
            }
            direction = parsed
        }
        let content: SpamContent = attachment || text.isEmpty ? .attachment : .text(text)
        self.init(
            candidate: SpamCandidate(senderKey: sender, messageID: id, timestamp: createdAt, content: content, direction: direction),
            receivedAt: receivedAt)
    }

    /// The line's id if it has a usable one (for error output).
    public static func id(inLine line: String) -> String? {
        (try? JSONParser().parse(line))?["id"]?.stringValue
    }
}
