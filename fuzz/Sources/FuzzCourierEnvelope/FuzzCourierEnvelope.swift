import BitchatWire
import BotSupport

/// The courier envelope decoder (COURIER.md §1.3), as it meets bytes from a 0x04 deposit and from a kind-1401 drop's
/// base64 content. Input: the first byte picks the path, the rest is its input.
/// - selector even: raw envelope bytes.
/// - selector odd: the bytes as drop content text, through strict base64 first.
/// Oracle: whatever decodes re-encodes canonically (when its fields are encodable) to bytes that decode to the same
/// envelope, and the relay-drop form (copies 1) decodes with copies 1 — not just "no trap".
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCourierEnvelope(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    var bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    if data[0] & 1 == 1 {
        guard let decoded = try? Base64.decode(String(decoding: bytes, as: UTF8.self)) else { return 0 }
        bytes = decoded
    }
    guard let envelope = try? CourierEnvelope.decode(bytes) else { return 0 }
    guard let canonical = try? envelope.encode() else {
        fatalError("a decoded envelope must encode: \(envelope.recipientTag.count)-byte tag, \(envelope.ciphertext.count)-byte ciphertext")
    }
    guard let again = try? CourierEnvelope.decode(canonical), again == envelope else { fatalError("canonical form does not round-trip") }
    guard let drop = try? envelope.withCopies(1).encode(), (try? CourierEnvelope.decode(drop))?.copies == 1 else {
        fatalError("the relay-drop form does not round-trip")
    }
    return 0
}
