/// A key a module counts by: an enum (or a small struct of enums) naming what can happen, whose ``label``
/// is the value of the metric label it becomes. Modules keep their counters as ``Tally`` values of such
/// keys; the metric names and label names are chosen in one place (the bridge's metrics catalogue), never
/// by string concatenation where the counting happens.
public protocol CounterKey: Hashable, Sendable {
    /// The metric label value (lowercase snake case, stable across releases: dashboards key on it).
    var label: String { get }
}

extension CounterKey where Self: RawRepresentable, RawValue == String {
    public var label: String { rawValue }
}

/// Counts per typed key. A plain value: the owner mutates its copy; readers get a copy.
public struct Tally<Key: CounterKey>: Sendable, Equatable {
    public private(set) var counts: [Key: Int] = [:]

    public init() {}

    public subscript(_ key: Key) -> Int { counts[key] ?? 0 }

    public mutating func add(_ key: Key, _ amount: Int = 1) { counts[key, default: 0] += amount }

    /// The sum over every key.
    public var total: Int { counts.values.reduce(0, +) }

    public var isEmpty: Bool { counts.isEmpty }

    /// (key, count) ordered by label, for stable rendering.
    public var sortedByLabel: [(key: Key, count: Int)] {
        counts.map { (key: $0.key, count: $0.value) }.sorted { $0.key.label < $1.key.label }
    }

    /// Adds every count of `other` to this tally.
    public mutating func merge(_ other: Tally<Key>) {
        for (key, count) in other.counts { counts[key, default: 0] += count }
    }
}

extension Tally {
    /// `label → count`: the neutral form a tally crosses module boundaries in (to the metrics catalogue).
    public var byLabel: [String: Int] {
        var out: [String: Int] = [:]
        for (key, count) in counts { out[key.label, default: 0] += count }
        return out
    }
}
