import BotCrypto

/// Golomb-Coded Set of REQUEST_SYNC (MESH-WIRE §8.2 as corrected by BOARD.md §9.2, §9.3, §13.4–5): sorted
/// mapped values in [1, M), as deltas written as q = (x − 1) >> P one-bits, a zero bit, then the low P bits of
/// x − 1, MSB first; bytes packed MSB-first, the last byte zero-filled.
public enum GCSFilter {
    public enum Limits {
        /// The decoder's parameter range; outside it the set is empty (iOS `maxP`).
        public static let pRange: ClosedRange<Int> = 1...32
        /// The false-positive rate iOS and Android build with (1 % → P = 7).
        public static let targetFalsePositiveRate = 0.01
        /// iOS's filter size budget (Android: 256).
        public static let iOSMaxBytes = 400
        /// iOS candidate caps when a request is *exactly* that one type, otherwise ``unionCapacity``.
        public static let fragmentCapacity = 600
        public static let fileTransferCapacity = 200
        public static let prekeyCapacity = 200
        public static let boardCapacity = 200
        /// iOS `seenCapacity`: the cap for every other request (union requests included).
        public static let unionCapacity = 1000
    }

    /// A built filter: the TLV values and how many of the newest-first inputs it covers.
    public struct Built: Sendable, Equatable {
        public var p: Int
        public var m: UInt32
        public var data: [UInt8]
        /// The first `includedCount` inputs (newest first) are encoded.
        public var includedCount: Int
    }

    /// `max(1, ceil(log2(1 / clamp(fpr, 1e-6, 0.25))))`: 7 for 1 %.
    public static func deriveP(targetFPR: Double) -> Int {
        let f = max(0.000001, min(0.25, targetFPR))
        var p = 0
        // ceil(log2(1/f)) without Foundation: the smallest p with 2^p ≥ 1/f.
        while Double(UInt64(1) << UInt64(p)) < 1.0 / f { p += 1 }
        return max(1, p)
    }

    /// `max(1, max(8, 8·maxBytes) ÷ max(3, P + 2))`: 355 for 400 bytes, 227 for 256, 28 for 32.
    public static func estimateMaxElements(sizeBytes: Int, p: Int) -> Int {
        max(1, max(8, sizeBytes * 8) / max(3, p + 2))
    }

    /// `N·2^P` saturating at 2^32 − 1; 1 for N = 0.
    public static func hashRange(count: Int, p: Int) -> UInt32 {
        guard count > 0 else { return 1 }
        let (product, overflow) = UInt64(count).multipliedReportingOverflow(by: UInt64(1) << UInt64(min(p, 63)))
        if overflow || product > UInt64(UInt32.max) { return .max }
        return product == 0 ? 1 : UInt32(product)
    }

    /// `SHA-256(id16)[0..8]` as a big-endian u64 with the top bit cleared.
    public static func h64(_ id: [UInt8]) -> UInt64 {
        let digest = SHA256.hash(id)
        var x: UInt64 = 0
        for i in 0..<8 { x = x << 8 | UInt64(digest[i]) }
        return x & 0x7fff_ffff_ffff_ffff
    }

    /// `h64 mod M`, with 0 → 1; 0 (never a member) when M ≤ 1.
    public static func bucket(h64: UInt64, m: UInt64) -> UInt64 {
        guard m > 1 else { return 0 }
        let value = h64 % m
        return value == 0 ? 1 : value
    }

    /// iOS `GCSFilter.buildFilter` over IDs ordered newest first: N = min(count, estimate), M = N·2^P fixed,
    /// then trim to `max(1, count·9/10)` while over `maxBytes` (never fires in practice, §13.4); one ID that
    /// still overflows gives empty data covering nothing.
    public static func build(ids: [[UInt8]], maxBytes: Int, p: Int) -> Built {
        guard !ids.isEmpty else { return Built(p: p, m: 1, data: [], includedCount: 0) }
        let cap = estimateMaxElements(sizeBytes: maxBytes, p: p)
        let range = max(1, hashRange(count: min(ids.count, cap), p: p))
        let hashes = ids.prefix(min(ids.count, cap)).map(h64)
        func encodeFirst(_ count: Int) -> [UInt8] {
            let mapped = Set(hashes.prefix(count).map { bucket(h64: $0, m: UInt64(range)) }).filter { $0 > 0 }.sorted()
            return mapped.isEmpty ? [] : encode(p: p, values: mapped)
        }
        var count = min(ids.count, cap)
        var encoded = encodeFirst(count)
        while encoded.count > maxBytes && count > 1 {
            count = max(1, count * 9 / 10)
            encoded = encodeFirst(count)
        }
        if encoded.count > maxBytes { return Built(p: p, m: range, data: [], includedCount: 0) }
        return Built(p: p, m: range, data: encoded, includedCount: encoded.isEmpty ? 0 : count)
    }

    /// iOS `decodeToSortedSet`: empty when P ∉ 1…32 or M ≤ 1. Repeat: read the unary q (stop at the end of the
    /// data), read P bits (stop at the end), `acc += (q << P) + r + 1`; stop when `acc ≥ M`, else record it.
    /// Zero fill bits decode as extra deltas of 1 when P < 7, as on iOS (§9.3). Bounded by the data size.
    public static func decode(p: Int, m: UInt64, data: [UInt8]) -> [UInt64] {
        guard Limits.pRange.contains(p), m > 1 else { return [] }
        // A byte at a time, not a bit at a time: the run of ones and the P remainder bits are taken from each
        // byte with a shift and a count (the responder decodes one filter per request; bench sync).
        let totalBits = data.count * 8
        var bit = 0
        var values: [UInt64] = []
        var running: UInt64 = 0
        data.withUnsafeBufferPointer { bytes in
            while true {
                var q: UInt64 = 0
                var sawZero = false
                while bit < totalBits {
                    let offset = bit & 7
                    let available = 8 - offset
                    let ones = min((~(bytes[bit >> 3] << UInt8(offset))).leadingZeroBitCount, available)
                    q += UInt64(ones)
                    if ones < available {
                        bit += ones + 1
                        sawZero = true
                        break
                    }
                    bit += available
                }
                guard sawZero, bit + p <= totalBits else { break }
                var r: UInt64 = 0
                var needed = p
                while needed > 0 {
                    let available = 8 - (bit & 7)
                    let take = min(available, needed)
                    let chunk = UInt64(bytes[bit >> 3]) >> UInt64(available - take) & (UInt64(1) << UInt64(take) - 1)
                    r = r << UInt64(take) | chunk
                    needed -= take
                    bit += take
                }
                // q < 8 192 (1 024 bytes) and P ≤ 32: neither the shift nor the sum can overflow; checked anyway.
                let (shifted, overflow) = q.multipliedReportingOverflow(by: 1 << UInt64(p))
                guard !overflow else { break }
                let (sum, overflow2) = running.addingReportingOverflow(shifted | r &+ 1)
                guard !overflow2, sum < m else { break }
                running = sum
                values.append(running)
            }
        }
        return values
    }

    /// Encodes sorted, distinct values in [1, M) (the inverse of ``decode(p:m:data:)``).
    public static func encode(p: Int, values: [UInt64]) -> [UInt8] {
        var out: [UInt8] = []
        var bitCount = 0
        func put(_ b: Int) {
            if bitCount % 8 == 0 { out.append(0) }
            if b != 0 { out[out.count - 1] |= 0x80 >> UInt8(bitCount % 8) }
            bitCount += 1
        }
        var previous: UInt64 = 0
        for value in values.sorted() where value > previous {
            let x = value - previous - 1
            for _ in 0..<(x >> UInt64(p)) { put(1) }
            put(0)
            for i in (0..<p).reversed() { put(Int(x >> UInt64(i) & 1)) }
            previous = value
        }
        return out
    }

    /// A decoded request filter, for membership tests by binary search (§9.3). An empty filter or M ≤ 1 holds
    /// nothing: "send me everything".
    public struct Membership: Sendable {
        public let m: UInt64
        /// Sorted, distinct (decode yields strictly increasing values).
        public let values: [UInt64]

        public init(p: Int, m: UInt32, data: [UInt8]) {
            self.m = UInt64(m)
            self.values = GCSFilter.decode(p: p, m: UInt64(m), data: data)
        }

        public init(_ request: RequestSyncPayload) { self.init(p: Int(request.p), m: request.m, data: request.data) }

        /// Whether a packet whose ID hashes to `h64` (``GCSFilter/h64(_:)``) might be in the requester's set.
        public func mightContain(h64: UInt64) -> Bool {
            let candidate = GCSFilter.bucket(h64: h64, m: m)
            guard candidate > 0 else { return false }
            var lo = 0
            var hi = values.count
            while lo < hi {
                let mid = (lo + hi) >> 1
                if values[mid] < candidate { lo = mid + 1 } else { hi = mid }
            }
            return lo < values.count && values[lo] == candidate
        }
    }
}

extension RequestSyncPayload {
    /// The same request with the packet `id` in its filter (the same P and M; a filter that covered nothing gets M
    /// for one element). For a packet the requester holds but its owner did not know of when it built the filter.
    public func covering(_ id: [UInt8]) -> RequestSyncPayload {
        guard GCSFilter.Limits.pRange.contains(Int(p)) else { return self }
        var copy = self
        if m <= 1 || data.isEmpty { copy.m = GCSFilter.hashRange(count: 1, p: Int(p)) }
        let value = GCSFilter.bucket(h64: GCSFilter.h64(id), m: UInt64(copy.m))
        var values = Set(m <= 1 || data.isEmpty ? [] : GCSFilter.decode(p: Int(p), m: UInt64(m), data: data))
        guard value > 0, values.insert(value).inserted else { return self }
        copy.data = GCSFilter.encode(p: Int(p), values: values.sorted())
        return copy
    }

    /// The candidate cap iOS applies to a request of exactly these types (BOARD.md §9.2 step 2).
    public static func capacity(for types: SyncTypes) -> Int {
        switch types {
        case .fragment: GCSFilter.Limits.fragmentCapacity
        case .fileTransfer: GCSFilter.Limits.fileTransferCapacity
        case .prekeyBundle: GCSFilter.Limits.prekeyCapacity
        case .board: GCSFilter.Limits.boardCapacity
        default: GCSFilter.Limits.unionCapacity
        }
    }

    /// iOS `buildGcsPayload` (BOARD.md §9.2): candidates as (packet ID, outer timestamp), in any order; sorted
    /// newest first (stable for equal timestamps), capped at min(estimate, capacity); `since` = the timestamp
    /// of the oldest covered candidate when the filter covers some but not all of them.
    public static func build(
        types: SyncTypes,
        candidates: [(id: [UInt8], timestamp: UInt64)],
        maxBytes: Int = GCSFilter.Limits.iOSMaxBytes,
        targetFPR: Double = GCSFilter.Limits.targetFalsePositiveRate,
        fragmentIDs: [UInt64] = []
    ) -> RequestSyncPayload {
        let p = GCSFilter.deriveP(targetFPR: targetFPR)
        let typeBits: UInt64? = types.rawValue == 0 ? nil : types.rawValue
        let sorted = candidates.enumerated().sorted {
            $0.element.timestamp != $1.element.timestamp ? $0.element.timestamp > $1.element.timestamp : $0.offset < $1.offset
        }.map(\.element)
        let takeN = min(sorted.count, GCSFilter.estimateMaxElements(sizeBytes: maxBytes, p: p), capacity(for: types))
        guard takeN > 0 else { return RequestSyncPayload(p: UInt8(p), m: 1, data: [], types: typeBits, fragmentIDs: fragmentIDs) }
        let included = Array(sorted.prefix(takeN))
        let built = GCSFilter.build(ids: included.map(\.id), maxBytes: maxBytes, p: p)
        let covered = built.includedCount
        let since: UInt64? = covered > 0 && covered < sorted.count ? included[covered - 1].timestamp : nil
        return RequestSyncPayload(
            p: UInt8(built.p), m: built.m, data: built.data, types: typeBits, sinceTimestamp: since, fragmentIDs: fragmentIDs)
    }
}
