import BitchatWire
import BotCrypto
import Mesh
import Testing

/// Issue 16 part 4: a broadcast downlink carrier says whether its packet signature verifies under the sender's
/// announced key (`MeshCarrier.packetSigned`), so a phone model can check the bridge's carriers the way
/// Android's open carrier change (PR #770) would.
@Suite("Carrier packet signatures")
struct CarrierSignatureTests {
    @Test("signed by the announced key: true; unsigned or signed by another key: false (shown either way, as iOS does)")
    func packetSigned() throws {
        let phone = Phone()
        var h = try HostileTrafficTests.engine(gated: false, phone: phone)
        let payload = try NostrCarrierPayload(direction: .fromGateway, geohash: "u4pruy", eventJSON: Array(#"{"id":"x"}"#.utf8)).encode()
        func carrier(_ packet: MeshPacket) throws -> MeshCarrier? {
            h.now += 10
            for case .carrier(let carrier) in h.feed(try packet.encode()) { return carrier }
            return nil
        }
        let base = { (t: UInt64) in MeshPacket(type: .nostrCarrier, timestamp: t, sender: phone.id, payload: payload) }
        #expect(try carrier(try base(h.now + 10).signed(with: phone.signing))?.packetSigned == true)
        #expect(try carrier(base(h.now + 10))?.packetSigned == false)
        #expect(try carrier(try base(h.now + 10).signed(with: .generate()))?.packetSigned == false)
    }
}
