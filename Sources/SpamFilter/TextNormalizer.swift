import Foundation

/// Normalisation before any text rule (SPAM-FILTER.md §3): NFKD; drop combining marks (Mn, Mc, Me),
/// format characters (Cf: zero-width spaces, joiners, BOM, soft hyphen) and every control (Cc) but
/// newline and tab — carriage return, vertical tab, form feed and NEL (U+0085) too, though Unicode counts
/// them as whitespace, so `"fr\ree"` is `"free"`; lowercase; collapse whitespace runs (newline, tab and
/// the non-control Unicode spaces: U+0020, U+00A0, U+2028, U+3000, …) to one space; trim. The result is
/// Unicode scalar values.
///
/// Foundation is used for one thing only: the compatibility decomposition (NFKD) of non-ASCII text,
/// which the Swift standard library does not expose and which is what turns mathematical bold and
/// fullwidth letters into plain ones. ASCII text is already in NFKD and skips it.
/// Case folding uses each scalar's full lowercase mapping (Unicode `Lowercase_Mapping`), which agrees
/// with simple case folding for every cased letter a disguise would use.
public enum TextNormalizer {
    public static func normalize(_ text: String) -> [UInt32] {
        // ASCII fast path over the string's contiguous UTF-8 (native strings always have it).
        // nil: no contiguous storage; .some(nil): not all ASCII.
        let fast = text.utf8.withContiguousStorageIfAvailable(normalizeASCII)
        if let fast, let ascii = fast { return ascii }
        var out: [UInt32] = []
        out.reserveCapacity(text.utf8.count)
        var pendingSpace = false
        if fast == nil, text.utf8.allSatisfy({ $0 < 0x80 }) {
            for byte in text.utf8 {
                appendASCII(UInt32(byte), to: &out, pendingSpace: &pendingSpace)
            }
            return out
        }
        let decomposed = text.decomposedStringWithCompatibilityMapping
        for scalar in decomposed.unicodeScalars {
            if scalar.value < 0x80 {
                appendASCII(scalar.value, to: &out, pendingSpace: &pendingSpace)
                continue
            }
            let properties = scalar.properties
            switch properties.generalCategory {
            case .nonspacingMark, .spacingMark, .enclosingMark, .format, .control: continue  // NEL, C1 controls
            default: break
            }
            if properties.isWhitespace {
                pendingSpace = !out.isEmpty
                continue
            }
            for lower in properties.lowercaseMapping.unicodeScalars {
                switch lower.properties.generalCategory {
                case .nonspacingMark, .spacingMark, .enclosingMark, .format, .control:
                    continue
                default:
                    if lower.properties.isWhitespace {
                        pendingSpace = !out.isEmpty
                        continue
                    }
                    if pendingSpace {
                        out.append(0x20)
                        pendingSpace = false
                    }
                    out.append(lower.value)
                }
            }
        }
        return out
    }

    /// The ASCII rules of ``appendASCII(_:to:pendingSpace:)`` written straight into the result (at most
    /// one scalar per byte), or nil when `bytes` is not all ASCII.
    private static func normalizeASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt32]? {
        var high: UInt8 = 0
        for byte in bytes { high |= byte }
        guard high < 0x80 else { return nil }
        // Filled in place then cut to length (the zero fill is cheaper than the unspecialised
        // `init(unsafeUninitializedCapacity:)`, which looks the array type up at run time).
        var result = [UInt32](repeating: 0, count: bytes.count)
        let kept = result.withUnsafeMutableBufferPointer { out -> Int in
            var n = 0
            var pendingSpace = false
            for byte in bytes {
                if byte > 0x20, byte != 0x7F {
                    // A space is written only before a kept byte that follows a whitespace byte, so `n`
                    // never passes the number of bytes read.
                    if pendingSpace {
                        out[n] = 0x20
                        n &+= 1
                        pendingSpace = false
                    }
                    out[n] = UInt32(byte &- 0x41 < 26 ? byte &+ 0x20 : byte)
                    n &+= 1
                } else if byte == 0x20 || byte &- 0x09 < 2 {
                    pendingSpace = n != 0  // tab, line feed, space
                }
                // other controls (below 0x20, carriage return among them, and 0x7F) are dropped
            }
            return n
        }
        result.removeLast(bytes.count - kept)
        return result
    }

    @inline(__always)
    private static func appendASCII(_ value: UInt32, to out: inout [UInt32], pendingSpace: inout Bool) {
        switch value {
        case 0x09, 0x0A, 0x20:
            pendingSpace = !out.isEmpty
        case 0x00..<0x20, 0x7F:
            return  // other controls (carriage return, vertical tab, form feed among them) are dropped
        default:
            if pendingSpace {
                out.append(0x20)
                pendingSpace = false
            }
            out.append(value >= 0x41 && value <= 0x5A ? value + 0x20 : value)
        }
    }

    /// The normalised scalars as a String (for display and logs).
    public static func string(_ scalars: [UInt32]) -> String {
        var s = String.UnicodeScalarView()
        for v in scalars { if let u = Unicode.Scalar(v) { s.append(u) } }
        return String(s)
    }
}
