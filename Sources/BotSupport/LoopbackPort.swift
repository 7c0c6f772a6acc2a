import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP port on 127.0.0.1 for a process this one is about to start (a relay, a hub, a bridge's health listener):
/// nobody holds it now, and no outgoing connection will take it before that process binds it.
///
/// The kernel's own pick (bind to port 0, release) comes from the ephemeral range, which is also where every outgoing
/// connection on the machine draws its local port from. In a test run with thousands of loopback connections, a
/// port picked that way was taken by someone's connection before the bridge bound it (CI, 2026-12-02: the health
/// listener "cannot listen on 127.0.0.1:35425"). So ports come from the band just below the ephemeral range, which
/// nothing assigns on its own: each process walks it from its own start (spread by process id), never hands out the
/// same port twice, and checks each candidate by binding it.
public enum LoopbackPort {
    /// How many ports below the ephemeral range we use. 12,000 covers hundreds of runs in one process.
    static let bandWidth = 12_000
    /// The lowest port we ever hand out (privileged ports and the common service ports stay clear).
    static let bandFloor = 10_000

    private static let next = Mutex<Int?>(nil)

    public static func free() -> Int {
        guard let band = band() else { return kernelPick() }
        let start = Int(getpid()) &* 7919
        return next.withLock { pick(in: band, cursor: &$0, start: start, isFree: bindable) } ?? kernelPick()
    }

    /// The first port at or after the cursor (or `start`, on the first call) that `isFree` accepts; the cursor moves
    /// past every port looked at, so no port is handed out twice. Nil when the whole band is taken.
    static func pick(in band: Range<Int>, cursor: inout Int?, start: Int, isFree: (Int) -> Bool) -> Int? {
        for _ in 0..<band.count {
            let position = cursor ?? start % band.count
            cursor = (position + 1) % band.count
            if isFree(band.lowerBound + position) { return band.lowerBound + position }
        }
        return nil
    }

    /// The band below the ephemeral range (Linux: /proc/sys/net/ipv4/ip_local_port_range), nil where the range is
    /// unknown or leaves no room below it.
    static func band() -> Range<Int>? {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8),
              let low = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap({ Int($0) })
        else { return nil }
        let lower = max(bandFloor, low - bandWidth)
        return lower < low ? lower..<low : nil
    }

    /// Binds 127.0.0.1:port (0: the kernel picks) without SO_REUSEADDR and releases it; the bound port, or nil.
    private static func bind(port: Int) -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
        guard bound == 0 else { return nil }
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return named == 0 ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }

    static func bindable(_ port: Int) -> Bool { bind(port: port) == port }

    private static func kernelPick() -> Int {
        guard let port = bind(port: 0) else { preconditionFailure("cannot bind a socket on 127.0.0.1") }
        return port
    }
}
