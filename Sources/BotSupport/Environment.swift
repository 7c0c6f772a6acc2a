#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Process environment access in one place, so configuration code can take a plain dictionary instead.
public enum ProcessEnvironment {
    /// The value of `name`, or nil when unset.
    public static func value(_ name: String) -> String? {
        guard let raw = getenv(name) else { return nil }
        return String(cString: raw)
    }

    /// Every `BRIDGE_*`-style variable with the given prefix.
    public static func variables(withPrefix prefix: String) -> [String: String] {
        var result: [String: String] = [:]
        var cursor = environ
        while let entry = cursor.pointee {
            let text = String(cString: entry)
            if text.hasPrefix(prefix), let eq = text.firstIndex(of: "=") {
                result[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
            cursor += 1
        }
        return result
    }
}
