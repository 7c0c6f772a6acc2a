import BitchatWire
import BridgeTesting
import Mesh
import Nostr
import BridgeCore
import Testing

/// Nostr → mesh in the in-process world.
@Suite("World: channel downlink")
struct DownlinkTests {
    @Test("a channel event reaches a phone as one fromGateway carrier after the hold, signed by the bridge's announced key")
    func channelEventReachesThePhone() async throws {
        let site = Site(name: "downlink")
        let relay = try site.relay()
        let air = site.segment()
        let bridge = try await site.bridge("gateway", relays: [relay], segments: [air])
        let phone = site.phone("reader", on: [air])
        #expect(await phone.knows(await bridge.peerID))
        let event = try site.poster("alice").post("hello from the internet", to: relay)
        #expect(await bridge.verdict(on: event.id.hex)?.kind == .passed)
        await site.advance(by: 2_000)
        let carrier = try #require(await phone.carrier(of: event.id))
        #expect(carrier.payload.direction == .fromGateway && carrier.packetSigned)
        #expect(phone.carriers(of: event.id).count == 1)
        await site.stop()
    }
}
