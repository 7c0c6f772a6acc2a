public import Identity

/// What a policy reload changed, list by list.
public struct PolicyChange: Equatable, Sendable {
    public enum Limits {
        /// Keys named per list in the reload's log line (the counts are always complete): a 10,000-key file
        /// must not become one enormous line.
        public static let keysLogged = 50
    }

    public var blockAdded: [IdentityKey]
    public var blockRemoved: [IdentityKey]
    public var allowAdded: [IdentityKey]
    public var allowRemoved: [IdentityKey]
    public var verifyAdded: [IdentityKey]
    public var verifyRemoved: [IdentityKey]

    public init(old: OperatorLists, new: OperatorLists) {
        func sorted(_ keys: Set<IdentityKey>) -> [IdentityKey] { keys.sorted { $0.qualified < $1.qualified } }
        blockAdded = sorted(new.blocked.subtracting(old.blocked))
        blockRemoved = sorted(old.blocked.subtracting(new.blocked))
        allowAdded = sorted(new.allowed.subtracting(old.allowed))
        allowRemoved = sorted(old.allowed.subtracting(new.allowed))
        verifyAdded = sorted(new.verified.subtracting(old.verified))
        verifyRemoved = sorted(old.verified.subtracting(new.verified))
    }

    public var isEmpty: Bool { listed.isEmpty }

    /// Non-empty changes as (log key, keys).
    public var listed: [(String, [IdentityKey])] {
        [
            ("policy.block.added", blockAdded), ("policy.block.removed", blockRemoved),
            ("policy.allow.added", allowAdded), ("policy.allow.removed", allowRemoved),
            ("policy.verify.added", verifyAdded), ("policy.verify.removed", verifyRemoved),
        ].filter { !$0.1.isEmpty }
    }
}
