import Bridge

/// Input: the config file's text, optionally followed by a NUL byte and `NAME=value` lines that become the
/// environment. Every input must resolve or throw a ``ConfigurationError`` — never trap.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfiguration(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let parts = bytes.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
    let fileText = parts.first.map { String(decoding: $0, as: UTF8.self) }
    var environment: [String: String] = [:]
    if parts.count > 1 {
        for line in String(decoding: parts[1], as: UTF8.self).split(separator: "\n") {
            guard let eq = line.firstIndex(of: "=") else { continue }
            environment[String(line[..<eq])] = String(line[line.index(after: eq)...])
        }
    }
    do {
        let configuration = try BridgeConfiguration.resolve(fileText: fileText, environment: environment)
        _ = configuration.described
        _ = configuration.rendezvousCell
    } catch {
        _ = error.description
    }
    return 0
}
