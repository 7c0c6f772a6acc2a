import Nostr

/// Input: one WebSocket text frame from a relay. Every frame must parse or throw a ``NostrError``; a
/// parsed event also goes through canonical serialisation and the verifier (id hash, curve check, Schnorr).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRelayMessage(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let frame = Array(UnsafeBufferPointer(start: data, count: size))
    do {
        let message = try RelayMessage.parse(frame)
        if case .event(_, let event) = message {
            _ = event.canonicalBytes
            var verifier = EventVerifier()
            _ = try? verifier.verify(event, now: .now)
        }
    } catch {
        _ = "\(error)"
    }
    return 0
}
