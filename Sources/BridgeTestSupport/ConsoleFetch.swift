public import BotSupport
import Foundation

/// One HTTP exchange from Python's urllib (a real client, with the headers a browser or script would send).
public struct ConsoleFetch: Sendable {
    public struct Failed: Error, CustomStringConvertible {
        public let description: String
    }

    public let status: Int
    /// Header names lowercased.
    public let headers: [String: String]
    public let body: String

    public var json: JSONValue? { try? JSONParser().parse(body) }

    public static func run(_ url: String, method: String = "GET", headers: [String: String] = [:], body: String = "") async throws -> ConsoleFetch {
        let script = """
            import sys, json, urllib.request, urllib.error
            url, method, headers, body, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
            req = urllib.request.Request(url, method=method, headers=headers, data=body.encode() if method == "POST" else None)
            try:
                r = urllib.request.urlopen(req, timeout=5)
                code, hdrs, data = r.status, dict(r.headers), r.read()
            except urllib.error.HTTPError as e:
                code, hdrs, data = e.code, dict(e.headers), e.read()
            json.dump({"status": code, "headers": hdrs, "body": data.decode()}, open(out, "w"))
            """
        let resultFile = TestEnvironment.temporaryDirectory("console-fetch") + "/result.json"
        let headerJSON = JSONWriter.compact(.object(headers.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))
        let child = try ChildProcess("/usr/bin/python3", ["-c", script, url, method, headerJSON, body, resultFile])
        let exit = try await child.waitForExit(timeout: .seconds(20))
        guard exit == 0 else { throw Failed(description: "console fetch \(method) \(url): exit \(exit): \(child.transcript)") }
        let value = try JSONParser().parse(try FileIO.read(resultFile))
        var parsed: [String: String] = [:]
        for (k, v) in value["headers"]?.objectValue ?? [] { parsed[k.lowercased()] = v.stringValue }
        return ConsoleFetch(status: Int(value["status"]?.integerValue ?? -1), headers: parsed, body: value["body"]?.stringValue ?? "")
    }
}

