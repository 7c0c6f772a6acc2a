/// postID → the event id of the bridge's kind-1 copy of a board post (BOARD.md §11 "Ours"), in memory; the
/// executor persists each ``Change`` (`BoardNostrLedger` in the bridge database) and restores the rows at start,
/// so a tombstone that comes after a restart still deletes the copy. Rows live until the post's expiry;
/// bounded by ``Limits/maxRows``, the soonest-expiring dropped first (as the durable table drops them).
public struct BoardLedger: Sendable {
    public enum Limits {
        /// Live posts the board holds (200) plus as many again for copies of posts since evicted locally whose
        /// tombstone may still come.
        public static let maxRows = 400
    }

    public struct Entry: Sendable, Equatable {
        public var postID: [UInt8]
        public var eventID: [UInt8]
        /// The post's expiry (ms).
        public var expiresAt: UInt64

        public init(postID: [UInt8], eventID: [UInt8], expiresAt: UInt64) {
            self.postID = postID
            self.eventID = eventID
            self.expiresAt = expiresAt
        }
    }

    /// What to persist.
    public enum Change: Sendable, Equatable {
        case record(Entry, now: UInt64)
        case forget(postID: [UInt8])
    }

    private var rows: [[UInt8]: Entry] = [:]

    public init(_ entries: [Entry] = []) {
        for entry in entries { rows[entry.postID] = entry }
    }

    public var count: Int { rows.count }

    /// The copy's event id, if one was published and the post has not expired.
    public func eventID(forPost postID: [UInt8], now: UInt64) -> [UInt8]? {
        rows[postID].flatMap { $0.expiresAt > now ? $0.eventID : nil }
    }

    public mutating func record(_ entry: Entry, now: UInt64) -> Change {
        rows = rows.filter { $0.value.expiresAt > now }
        rows[entry.postID] = entry
        if rows.count > Limits.maxRows {
            for victim in rows.values.sorted(by: { $0.expiresAt < $1.expiresAt }).prefix(rows.count - Limits.maxRows) {
                rows[victim.postID] = nil
            }
        }
        return .record(entry, now: now)
    }

    public mutating func forget(postID: [UInt8]) -> Change {
        rows[postID] = nil
        return .forget(postID: postID)
    }
}
