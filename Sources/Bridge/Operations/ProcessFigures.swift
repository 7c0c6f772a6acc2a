import BotSupport

#if canImport(Glibc)
import Glibc
#endif

/// The process's own figures for `/metrics` (the `process_*` families every Prometheus client exposes), read from
/// `/proc/self` when scraped: CPU seconds (`stat` fields 14 and 15), resident memory (`statm` × the page size),
/// the start time (`stat` field 22 after boot, plus `btime` from `/proc/stat`), open descriptors (`/proc/self/fd`)
/// and the descriptor limit (`RLIMIT_NOFILE`). Nil when `/proc` does not read (not Linux).
public struct ProcessFigures: Sendable, Equatable {
    public var cpuSeconds: Double
    public var residentBytes: Double
    public var startTime: Double
    public var openFDs: Double
    public var maxFDs: Double

    public static func read() -> ProcessFigures? {
        guard let stat = Self.text("/proc/self/stat"), let close = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces): state is field 3, so index 0 here is field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard fields.count > 19, ticks > 0, let user = Double(fields[11]), let system = Double(fields[12]),
            let started = Double(fields[19]),
            let statm = Self.text("/proc/self/statm")?.split(separator: " "), statm.count > 1, let pages = Double(statm[1]),
            let boot = Self.text("/proc/stat")?.split(separator: "\n").first(where: { $0.hasPrefix("btime ") })
                .flatMap({ Double($0.dropFirst(6)) })
        else { return nil }
        var limit = rlimit()
        let maxFDs = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Double(limit.rlim_cur) : 0
        return ProcessFigures(
            cpuSeconds: (user + system) / ticks, residentBytes: pages * Double(sysconf(Int32(_SC_PAGESIZE))),
            startTime: boot + started / ticks, openFDs: Double(Self.openDescriptors()), maxFDs: maxFDs)
    }

    /// Entries of `/proc/self/fd` (the one the listing itself opens is not counted).
    private static func openDescriptors() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { count += 1 }
        }
        return max(0, count - 1)
    }

    private static func text(_ path: String) -> String? {
        (try? FileIO.read(path, maxBytes: 1 << 20)).map { String(decoding: $0, as: UTF8.self) }
    }
}
