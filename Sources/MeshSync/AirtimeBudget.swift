/// A sliding-window byte budget for sync replies: at most ``Configuration/bytesPerWindow`` bytes in any
/// window of ``Configuration/windowMs`` (kept as ``Configuration/slots`` equal slots, so the bound holds for
/// every slot-aligned window and overshoots an arbitrary one by at most one slot's worth).
///
/// Why: one REQUEST_SYNC can replay the whole store (≈ 230 kB for 1 000 messages and 200 posts), and up to
/// 8 per 30 s per peer are legal, so without a shared budget a crowd of requesters — or one spoofing many
/// IDs — would keep the bridge's radio busy with replays and starve live traffic. The budget is shared by
/// all requesters, so a storm from any number of peers costs bounded airtime.
public struct AirtimeBudget: Sendable, Equatable {
    public struct Configuration: Sendable, Equatable {
        /// Reply bytes per window. Default 256 KiB per 60 s ≈ 4.4 kB/s: a full answer of the default stores
        /// (1 000 messages + 200 posts) fits once, and it is a small fraction of what one BLE link carries
        /// (tens of kB/s), leaving the air to live traffic.
        public var bytesPerWindow: Int
        public var windowMs: UInt64
        /// Granularity of the sliding window.
        public var slots: Int

        public init(bytesPerWindow: Int = 262_144, windowMs: UInt64 = 60_000, slots: Int = 12) {
            self.bytesPerWindow = max(0, bytesPerWindow)
            self.windowMs = max(1, windowMs)
            self.slots = max(1, slots)
        }
    }

    public let configuration: Configuration
    /// Bytes spent per slot; `slotStart` is the slot index (time / slot length) of `spent[0]`.
    private var spent: [Int]
    private var slotIndex: UInt64 = 0

    public init(_ configuration: Configuration = Configuration()) {
        self.configuration = configuration
        spent = [Int](repeating: 0, count: configuration.slots)
    }

    private var slotLengthMs: UInt64 { max(1, configuration.windowMs / UInt64(configuration.slots)) }

    private mutating func advance(to now: UInt64) {
        let index = now / slotLengthMs
        guard index > slotIndex else { return }
        let steps = index - slotIndex
        if steps >= UInt64(spent.count) {
            for i in spent.indices { spent[i] = 0 }
        } else {
            for step in 1...steps { spent[Int((slotIndex + step) % UInt64(spent.count))] = 0 }
        }
        slotIndex = index
    }

    /// Bytes still available in the window ending at `now`.
    public mutating func available(now: UInt64) -> Int {
        advance(to: now)
        return max(0, configuration.bytesPerWindow - spent.reduce(0, +))
    }

    /// Spends `bytes` if they fit; false (nothing spent) otherwise.
    public mutating func spend(_ bytes: Int, now: UInt64) -> Bool {
        guard bytes <= available(now: now) else { return false }
        spent[Int(slotIndex % UInt64(spent.count))] += bytes
        return true
    }
}
