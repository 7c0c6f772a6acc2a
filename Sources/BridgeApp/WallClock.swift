#if canImport(Glibc)
import Glibc
#endif

/// The system wall clock in ms since the Unix epoch (the only clock reads in the mesh commands).
public enum WallClock {
    public static func nowMs() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(spec.tv_sec) * 1_000 + UInt64(spec.tv_nsec) / 1_000_000
    }

    /// Seconds since the Unix epoch, with sub-second precision.
    public static func nowSeconds() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}
