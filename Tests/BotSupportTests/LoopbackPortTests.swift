@testable import BotSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// ``LoopbackPort``: ports for the processes tests start come from below the ephemeral range, so an outgoing
/// connection cannot take one between the pick and the child's bind.
@Suite("Loopback port")
struct LoopbackPortTests {
    @Test("ports come from the band below the ephemeral range, are never handed out twice, and can be bound")
    func band() throws {
        let band = try #require(LoopbackPort.band(), "this Linux machine states its ephemeral range")
        let text = try String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        let ephemeralLow = try #require(Int(text.split(whereSeparator: \.isWhitespace)[0]))
        #expect(band.upperBound == ephemeralLow)
        #expect(band.lowerBound >= LoopbackPort.bandFloor)

        let ports = (0..<200).map { _ in LoopbackPort.free() }
        #expect(Set(ports).count == ports.count, "no port handed out twice")
        #expect(ports.allSatisfy { band.contains($0) })

        // A port someone listens on is skipped; the walk wraps around at the band's end.
        let held = try Listener(port: ports[0])
        defer { held.close() }
        #expect(!LoopbackPort.bindable(ports[0]))
        let position = ports[0] - band.lowerBound
        var cursor: Int? = nil
        let skipped = LoopbackPort.pick(in: band, cursor: &cursor, start: position, isFree: { $0 != ports[0] })
        #expect(skipped == band.lowerBound + (position + 1) % band.count)
        var last: Int? = band.count - 1
        #expect(LoopbackPort.pick(in: band, cursor: &last, start: 0, isFree: { _ in true }) == band.upperBound - 1)
        #expect(LoopbackPort.pick(in: band, cursor: &last, start: 0, isFree: { _ in true }) == band.lowerBound)
        var none: Int? = nil
        #expect(LoopbackPort.pick(in: 100..<110, cursor: &none, start: 3, isFree: { _ in false }) == nil)
    }

    /// A listening socket on 127.0.0.1:port, closed by `close()`.
    struct Listener {
        let fd: Int32
        init(port: Int) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0, listen(fd, 1) == 0 else { throw POSIXError(.EADDRINUSE) }
        }
        func close() { _ = Glibc.close(fd) }
    }
}
