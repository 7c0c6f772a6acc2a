import BitchatWire

/// Rebuilds frames from type-0x20 fragments (MESH-WIRE §6.3), with iOS's bounds.
///
/// Sets are keyed by (sender, fragment ID). A set whose fragments disagree on total or original type is
/// dropped (Android). Completed frames are returned as bytes; the caller decodes them.
struct Reassembler {
    enum Limits {
        /// iOS keeps at most 128 concurrent assemblies (oldest evicted).
        static let maxAssemblies = 128
        /// 1 MiB of chunk bytes per set; exceeding it drops the set.
        static let maxBytesPerSet = 1 << 20
        /// An incomplete set is dropped 30 s after its first fragment.
        static let timeoutMs: UInt64 = 30_000
    }

    enum Outcome: Equatable {
        case incomplete
        case complete([UInt8])
        case rejected(String)
    }

    private struct Key: Hashable {
        let sender: MeshPeerID
        let id: UInt64
    }

    private struct Assembly {
        let total: UInt16
        let type: MessageType
        let startedAt: UInt64
        var chunks: [UInt16: [UInt8]] = [:]
        var bytes = 0
    }

    private var sets: [Key: Assembly] = [:]
    private var order: [(key: Key, at: UInt64)] = []
    private var head = 0
    private(set) var evicted = 0

    var activeCount: Int { sets.count }

    mutating func add(_ fragment: FragmentPayload, from sender: MeshPeerID, now: UInt64) -> Outcome {
        sweep(now: now)
        guard !fragment.chunk.isEmpty else { return .rejected("fragment.emptyChunk") }
        let key = Key(sender: sender, id: fragment.fragmentID)
        var assembly: Assembly
        if let existing = sets[key] {
            guard existing.total == fragment.total, existing.type == fragment.originalType else {
                sets[key] = nil
                return .rejected("fragment.mismatch")
            }
            assembly = existing
        } else {
            if sets.count >= Limits.maxAssemblies { evictOldest() }
            assembly = Assembly(total: fragment.total, type: fragment.originalType, startedAt: now)
            order.append((key, now))
        }
        // Same index overwrites (duplicates do not break reassembly).
        assembly.bytes += fragment.chunk.count - (assembly.chunks[fragment.index]?.count ?? 0)
        assembly.chunks[fragment.index] = fragment.chunk
        guard assembly.bytes <= Limits.maxBytesPerSet else {
            sets[key] = nil
            return .rejected("fragment.setTooLarge")
        }
        guard assembly.chunks.count == Int(assembly.total) else {
            sets[key] = assembly
            return .incomplete
        }
        sets[key] = nil
        var frame: [UInt8] = []
        frame.reserveCapacity(assembly.bytes)
        for index in 0..<assembly.total {
            guard let chunk = assembly.chunks[index] else { return .rejected("fragment.missingIndex") }
            frame += chunk
        }
        compact()
        return .complete(frame)
    }

    /// Drops sets older than the timeout.
    mutating func sweep(now: UInt64) {
        while head < order.count, now >= order[head].at &+ Limits.timeoutMs {
            let entry = order[head]
            head += 1
            if let set = sets[entry.key], set.startedAt == entry.at {
                sets[entry.key] = nil
                evicted += 1
            }
        }
        compact()
    }

    private mutating func evictOldest() {
        while head < order.count {
            let entry = order[head]
            head += 1
            if let set = sets[entry.key], set.startedAt == entry.at {
                sets[entry.key] = nil
                evicted += 1
                return
            }
        }
    }

    private mutating func compact() {
        if head > 256, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
