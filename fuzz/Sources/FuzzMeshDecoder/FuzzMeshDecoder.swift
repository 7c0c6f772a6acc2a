import BitchatWire

/// Input: the first byte picks the decoder, the rest is its input.
/// - selector 0: a whole frame through `MeshPacket.decode`, then the payload decoder its type names, then
///   re-encoding: what decodes and re-encodes must decode again (a round-trip oracle, not just "no trap").
/// - selectors 1…: each payload decoder on raw bytes (reaches their length fields directly).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMeshDecoder(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch selector % 11 {
    case 0: decodeFrame(bytes)
    case 1: _ = try? AnnouncePayload.decode(bytes)
    case 2: _ = try? AnnounceV2Payload.decode(bytes)
    case 3: _ = try? BitchatMessagePayload.decode(bytes, layout: .android)
    case 4: _ = try? BitchatMessagePayload.decode(bytes, layout: .iOS)
    case 5: _ = try? FragmentPayload.decode(bytes)
    case 6: _ = try? NostrCarrierPayload.decode(bytes)
    case 7: _ = try? RequestSyncPayload.decode(bytes)
    case 8: _ = try? NoisePayload.decode(bytes)
    case 9: _ = try? PrivateMessagePayload.decode(bytes)
    default:
        _ = try? FilePacketPayload.decode(bytes)
        _ = try? PingPayload.decode(bytes)
    }
    return 0
}

private func decodeFrame(_ bytes: [UInt8]) {
    guard let packet = try? MeshPacket.decode(bytes) else { return }
    _ = MeshMessageIdentity.dedupKey(packet)
    _ = try? packet.signingBytes()
    switch packet.type {
    case .announce: _ = try? AnnouncePayload.decode(packet.payload)
    case .announceV2: _ = try? AnnounceV2Payload.decode(packet.payload)
    case .message: _ = try? BitchatMessagePayload.decode(packet.payload)
    case .fragment: _ = try? FragmentPayload.decode(packet.payload)
    case .nostrCarrier: _ = try? NostrCarrierPayload.decode(packet.payload)
    case .requestSync:
        if let sync = try? RequestSyncPayload.decode(packet.payload) {
            _ = GCSFilter.decode(p: Int(sync.p), m: UInt64(sync.m), data: sync.data)
        }
    case .ping, .pong: _ = try? PingPayload.decode(packet.payload)
    default: break
    }
    // Round trip: a frame we accept and can re-encode must decode again to the same packet content.
    guard let again = try? packet.encode(padding: packet.type.isNoise) else { return }
    let back: MeshPacket
    do {
        back = try MeshPacket.decode(again)
    } catch {
        fatalError("re-encoded packet does not decode: \(error)")
    }
    guard back.type == packet.type, back.sender == packet.sender, back.payload == packet.payload,
        back.timestamp == packet.timestamp, back.signature == packet.signature
    else { fatalError("re-encoded packet decodes differently") }
}
