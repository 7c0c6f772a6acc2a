import BotSupport

/// Hex with spaces allowed, for transcribing spec vectors.
func bytes(_ hex: String) -> [UInt8] {
    let compact = hex.filter { !$0.isWhitespace }
    return (try? Hex.decode(compact)) ?? []
}

func repeated(_ byte: UInt8, _ count: Int) -> [UInt8] { [UInt8](repeating: byte, count: count) }
