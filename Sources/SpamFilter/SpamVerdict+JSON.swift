public import BotSupport

extension SpamFigures {
    /// The figures as a JSON object (moderation log, `spam check`, `spam explain`). Absent rules are omitted.
    public var jsonValue: JSONValue {
        func round(_ x: Double) -> JSONValue { .double((x * 10_000).rounded() / 10_000) }
        // The level rounded down (`BucketFigures.level(roundedDownTo:)`): below the cost iff the bucket refused,
        // and to thousandths, so the moderation log's table (3 decimals) shows it unchanged.
        func bucket(_ b: BucketFigures) -> JSONValue {
            .object([
                ("level", .double(b.level(roundedDownTo: 3))), ("cost", .integer(Int64(b.cost))), ("capacity", round(b.capacity)),
            ])
        }
        func copies(_ c: CopyFigures) -> JSONValue {
            var members: [(String, JSONValue)] = [
                ("count", .integer(Int64(c.count))), ("best_similarity", round(c.bestSimilarity)),
            ]
            if let id = c.matchedMessageID { members.append(("matched_id", .string(id))) }
            members += [
                ("comparisons", .integer(Int64(c.comparisons))), ("alignments", .integer(Int64(c.alignments))),
                ("capped", .bool(c.capped)),
            ]
            return .object(members)
        }
        var members: [(String, JSONValue)] = [
            ("normalized_length", .integer(Int64(normalizedLength))), ("links", .integer(Int64(links))),
            ("clamped_timestamp", round(clampedTimestamp)),
        ]
        if let messageBucket { members.append(("message_bucket", bucket(messageBucket))) }
        if let characterBucket { members.append(("character_bucket", bucket(characterBucket))) }
        if let linkBucket { members.append(("link_bucket", bucket(linkBucket))) }
        if let repeated { members.append(("repeated", copies(repeated))) }
        if let crossUser { members.append(("cross_user", copies(crossUser))) }
        if let autocorrelation {
            members.append((
                "autocorrelation",
                .object([
                    ("value", round(autocorrelation.value)), ("shift", .integer(Int64(autocorrelation.shift))),
                    ("length", .integer(Int64(autocorrelation.length))),
                ])
            ))
        }
        return .object(members)
    }

    /// The one figure that explains `rule` in a sentence (for tables).
    public func summary(for rule: SpamRule) -> String {
        func level(_ b: BucketFigures?) -> String {
            guard let b else { return "-" }
            return "needs \(b.cost), has \(format(b.level(roundedDownTo: 3))) of \(format(b.capacity))"
        }
        switch rule {
        case .messageRate: return level(messageBucket)
        case .characterRate: return level(characterBucket)
        case .linkRate: return level(linkBucket)
        case .repeatedMessage, .crossUserCopy:
            guard let c = rule == .repeatedMessage ? repeated : crossUser else { return "-" }
            return "\(c.count) near-copies, best \(format(c.bestSimilarity))" + (c.matchedMessageID.map { " (\($0))" } ?? "")
        case .repeatedCharacters:
            guard let a = autocorrelation else { return "-" }
            return "A(\(a.shift)) = \(format(a.value)) over \(a.length)"
        }
    }
}

func format(_ x: Double) -> String {
    if x == x.rounded(), abs(x) < 1e15 { return String(Int64(x)) }
    return String((x * 1000).rounded() / 1000)
}

extension SpamVerdict {
    /// `{"hidden":…, "outcome":…, "rule":…, "cached":…, "figures":{…}}`.
    public var jsonMembers: [(String, JSONValue)] {
        [
            ("hidden", .bool(isHidden)), ("outcome", .string(outcome.rawValue)),
            ("rule", rule.map { .string($0.rawValue) } ?? .null), ("cached", .bool(fromCache)),
            ("figures", figures.jsonValue),
        ]
    }
}
