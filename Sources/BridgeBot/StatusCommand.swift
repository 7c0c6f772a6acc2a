import BridgeApp
import Bridge
import BotSupport
import Courier

#if canImport(Glibc)
import Glibc
#endif

/// `bitchat-bridge status`: reads a running bridge's `/healthz` and `/metrics` and prints a summary.
/// Exit 0 when healthy, 1 when unhealthy or unreachable (so it works as a Docker/systemd health probe).
enum StatusCommand {
    static let defaultListen = "127.0.0.1:9477"

    static let spec = CommandSpec(
        path: "status",
        summary: "Show a running bridge's health and metrics (exit 1 when unhealthy or unreachable).",
        options: [
            .value("--http", "HOST:PORT", "The bridge's status listener (default: $BRIDGE_HTTP_LISTEN, else \(defaultListen))."),
            .value("--data-dir", "DIR", "The bridge running on this data directory: its control socket says where its listener is."),
            .value("--config", "FILE", "The configuration the bridge runs with: its http_listen (BRIDGE_* variables apply as for run)."),
            .flag("--json", "Print one JSON object: address, healthy, health (the /healthz body), metrics."),
            .flag("--all", "Also list metric series whose value is 0."),
            .flag("--site", "Also list every stage of the site as this bridge last heard it (bridges holding the operator key)."),
        ],
        details: """
            Reads GET /healthz (200 healthy, 503 unhealthy with reasons) and GET /metrics (Prometheus text
            0.0.4) from the loopback listener the bridge opens (config http_listen / BRIDGE_HTTP_LISTEN), and names
            the bridge that answered (its nickname and geohash). With several bridges on one host, pick one with
            --data-dir (asks the bridge running there), --config (its http_listen) or --http.
            """
    )

    /// Where the bridge's status listener is: `--http`; the bridge running on `--data-dir` (its control socket's
    /// `ping`); `--config`'s http_listen; `BRIDGE_HTTP_LISTEN`; the default.
    static func listenAddress(_ args: ParsedArguments) throws(CommandExit) -> String {
        if let http = args.value("--http") { return http }
        if let directory = args.value("--data-dir") {
            let answer: JSONValue
            do {
                answer = try ControlSocket.request(.object([("op", .string("ping"))]), dataDirectory: directory)
            } catch {
                throw .failure("no bridge answers on \(directory): \(error.description)")
            }
            guard let listen = answer["http_listen"]?.stringValue else {
                throw .failure("the bridge on \(directory) (\(answer["name"]?.stringValue ?? "?")) runs without a status listener (http_listen off)")
            }
            return listen
        }
        var listen: String
        if let path = args.value("--config") {
            guard let configured = try DataFiles.loadConfiguration(path: path).httpListen else {
                throw .usage("\(path): http_listen is off, so the bridge has no status listener; pass --http HOST:PORT")
            }
            listen = configured
        } else {
            listen = ProcessEnvironment.value("BRIDGE_HTTP_LISTEN") ?? defaultListen
        }
        if listen.isEmpty { listen = defaultListen }
        if listen == "off" {
            throw .usage("the status listener is off (BRIDGE_HTTP_LISTEN=off); pass --http HOST:PORT")
        }
        return listen
    }

    static func run(_ args: ParsedArguments) throws(CommandExit) {
        let listen = try listenAddress(args)
        let host: String
        let port: UInt16
        do {
            let parsed = try NetworkURL.hostAndPort(listen, allowPortZero: false, requirePort: true)
            (host, port) = (parsed.host, UInt16(parsed.port ?? 0))
        } catch {
            throw .usage("--http must be HOST:PORT or [IPv6]:PORT, not '\(listen)': \(error)")
        }

        let healthResponse: SimpleHTTPClient.Response
        let metricsResponse: SimpleHTTPClient.Response
        do {
            healthResponse = try SimpleHTTPClient.get(host: host, port: port, path: "/healthz")
            metricsResponse = try SimpleHTTPClient.get(host: host, port: port, path: "/metrics")
        } catch {
            throw .failure("cannot reach the bridge's status listener at \(listen): \(error)")
        }
        guard healthResponse.status == 200 || healthResponse.status == 503 else {
            throw .failure("GET /healthz at \(listen) answered HTTP \(healthResponse.status)")
        }
        let health: JSONValue
        do {
            health = try JSONParser().parse(String(decoding: healthResponse.body, as: UTF8.self))
        } catch {
            throw .failure("GET /healthz at \(listen): not JSON (\(error))")
        }
        guard metricsResponse.status == 200 else {
            throw .failure("GET /metrics at \(listen) answered HTTP \(metricsResponse.status)")
        }
        let metrics: MetricsSnapshot
        do {
            metrics = try PrometheusText.parse(String(decoding: metricsResponse.body, as: UTF8.self))
        } catch {
            throw .failure("GET /metrics at \(listen): \(error)")
        }
        let healthy = healthResponse.status == 200 && health["status"] == .string("ok")

        if args.has("--json") {
            printJSON(.object([
                ("address", .string(listen)), ("name", health["name"] ?? .null), ("healthy", .bool(healthy)), ("health", health),
                ("metrics", metricsJSON(metrics)),
            ]))
        } else {
            printSummary(listen: listen, healthy: healthy, health: health, metrics: metrics, all: args.has("--all"))
            if args.has("--site") { printSite(health["site"]) }
        }
        if !healthy {
            let reasons = health["reasons"]?.arrayValue?.compactMap(\.stringValue) ?? []
            throw .failure("unhealthy" + (reasons.isEmpty ? "" : ": " + reasons.joined(separator: "; ")))
        }
    }

    static func metricsJSON(_ metrics: MetricsSnapshot) -> JSONValue {
        .object(metrics.families.map { family in
            (family.name, .object([
                ("type", .string(family.kind.rawValue)),
                ("help", .string(family.help)),
                ("samples", .array(family.samples.map { sample in
                    .object([
                        ("labels", .object(sample.labels.map { ($0.name, .string($0.value)) })),
                        ("value", jsonNumber(sample.value)),
                    ])
                })),
            ]))
        })
    }

    private static func jsonNumber(_ value: Double) -> JSONValue {
        if value.isNaN || value.isInfinite { return .string(PrometheusText.formatValue(value)) }
        if value == value.rounded(), abs(value) < 1e15 { return .integer(Int64(value)) }
        return .double(value)
    }

    private static func printSummary(listen: String, healthy: Bool, health: JSONValue, metrics: MetricsSnapshot, all: Bool) {
        let name = health["name"]?.stringValue.map { " \($0)" } ?? ""
        print("bitchat-bridge\(name) at \(listen): \(healthy ? "healthy" : "UNHEALTHY")")
        for check in health["checks"]?.arrayValue ?? [] {
            let ok = check["ok"] == .bool(true)
            print("  [\(ok ? "ok" : "FAIL")] \(check["name"]?.stringValue ?? "?"): \(check["detail"]?.stringValue ?? "")")
        }
        print(courierLine(metrics))
        var hiddenZeros = 0
        var lines: [String] = []
        for family in metrics.families {
            for sample in family.samples {
                if sample.value == 0 && !all {
                    hiddenZeros += 1
                    continue
                }
                let labels = sample.labels.isEmpty
                    ? "" : "{" + sample.labels.map { "\($0.name)=\($0.value)" }.joined(separator: ", ") + "}"
                lines.append("  " + (family.name + labels).padding(toLength: 56) + " " + PrometheusText.formatValue(sample.value))
            }
        }
        print("Metrics:")
        if lines.isEmpty { print("  (none reported yet)") }
        lines.forEach { print($0) }
        if hiddenZeros > 0 { print("  (\(hiddenZeros) series at 0 not shown; --all lists them)") }
    }
}

extension StatusCommand {
    /// `--site`: one line per stage, from the bridge's `/healthz` (`site`): heard or not, when, and its figures.
    static func printSite(_ site: JSONValue?) {
        guard let stages = site?.arrayValue else {
            print("Site: this bridge holds no operator key, so it makes and reads no site records (no stages to show)")
            return
        }
        print("Site: \(stages.count) stage\(stages.count == 1 ? "" : "s")")
        for stage in stages {
            let status = stage["status"]
            func figure(_ key: String) -> String { status?[key]?.integerValue.map(String.init) ?? "-" }
            let name = (stage["stage"]?.stringValue ?? "?") + (stage["this"]?.boolValue == true ? " (this one)" : "")
            let heard = stage["heard"]?.boolValue == true ? "heard" : "NOT HEARD"
            print("  \(name.padding(toLength: 24)) \(heard) \(stage["seen_s_ago"]?.integerValue ?? 0) s ago; relays \(figure("relays")), "
                + "mesh peers \(figure("mesh_peers")), queue \(figure("queue")), courier held \(figure("courier_held")) pending \(figure("courier_pending"))")
        }
    }

    /// The courier gateway in one line: off, or what it watches, holds and handed over (counts only).
    static func courierLine(_ metrics: MetricsSnapshot) -> String {
        guard let watched = metrics.value("bitchat_bridge_courier_watched_peers") else { return "Courier gateway: off" }
        func value(_ name: String, _ label: String, _ text: String) -> Int {
            Int(metrics.value(name, labels: [.init(label, text)]) ?? 0)
        }
        return "Courier gateway: on — \(Int(watched)) watched peers, "
            + "\(value("bitchat_bridge_courier_mail", "state", "held")) held, \(value("bitchat_bridge_courier_mail", "state", "pending")) pending, "
            + "\(value("bitchat_bridge_courier_deliveries_total", "outcome", "delivered")) handed over, "
            + "\(value("bitchat_bridge_courier_publishes_total", "outcome", "confirmed")) drops published"
            + filters(metrics.value("bitchat_bridge_courier_filter_tags"))
    }

    /// The watch's filters, when a relay made them smaller than they start.
    private static func filters(_ tags: Double?) -> String {
        guard let tags, Int(tags) < CourierGateway.Configuration.defaultTagsPerFilter else { return "" }
        return ", filters cut to \(Int(tags)) tags by a relay"
    }
}

/// A minimal blocking HTTP/1.1 GET over a TCP socket, enough to read our own status listener without
/// FoundationNetworking (which would pull libcurl into the static binary).
enum SimpleHTTPClient {
    enum Limits {
        /// Largest response read: a full metrics snapshot is about 1 MB.
        static let maxResponseBytes = 16 << 20
        /// Seconds for connect, send and each read.
        static let timeoutSeconds = 5
    }

    struct Response {
        var status: Int
        var body: [UInt8]
    }

    enum Failure: Error, CustomStringConvertible {
        case resolve(String)
        case system(String, Int32)
        case malformed(String)
        case tooLarge

        var description: String {
            switch self {
            case .resolve(let message): "cannot resolve host: \(message)"
            case .system(let call, let code): "\(call): \(String(cString: strerror(code)))"
            case .malformed(let reason): "malformed HTTP response (\(reason))"
            case .tooLarge: "response over \(Limits.maxResponseBytes) bytes"
            }
        }
    }

    static func get(host: String, port: UInt16, path: String) throws(Failure) -> Response {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let first = result else { throw .resolve(String(cString: gai_strerror(rc))) }
        defer { freeaddrinfo(result) }
        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .system("socket", errno) }
        defer { close(fd) }
        var timeout = timeval(tv_sec: Limits.timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else { throw .system("connect", errno) }
        let hostHeader = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(hostHeader)\r\nUser-Agent: bitchat-bridge-status\r\nAccept: */*\r\nConnection: close\r\n\r\n".utf8)
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw .system("send", errno) }
            sent += n
        }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            guard n > 0 else {
                if errno == EINTR { continue }
                throw .system("recv", errno)
            }
            data.append(contentsOf: chunk[0..<n])
            guard data.count <= Limits.maxResponseBytes else { throw .tooLarge }
            if let response = try complete(data) { return response }
        }
        guard let response = try complete(data, atEOF: true) else { throw .malformed("connection closed early") }
        return response
    }

    /// The response once the header and `Content-Length` bytes of body are in; nil while more is needed.
    static func complete(_ data: [UInt8], atEOF: Bool = false) throws(Failure) -> Response? {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let headerEnd = data.indices.dropLast(3).first(where: { data[$0..<($0 + 4)].elementsEqual(separator) })
        else {
            if atEOF { throw .malformed("no header end") }
            return nil
        }
        let head = String(decoding: data[..<headerEnd], as: UTF8.self)
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusWords = lines.first?.split(separator: " ") ?? []
        guard statusWords.count >= 2, statusWords[0].hasPrefix("HTTP/1."), let status = Int(statusWords[1]) else {
            throw .malformed("bad status line")
        }
        var contentLength: Int?
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: " ")
            if name == "content-length" {
                guard let length = Int(value), length >= 0 else { throw .malformed("bad content-length") }
                contentLength = length
            } else if name == "transfer-encoding", value.lowercased() != "identity" {
                throw .malformed("transfer-encoding \(value) not supported")
            }
        }
        let bodyStart = headerEnd + 4
        if let contentLength {
            if data.count - bodyStart >= contentLength {
                return Response(status: status, body: Array(data[bodyStart..<(bodyStart + contentLength)]))
            }
            if atEOF { throw .malformed("body shorter than content-length") }
            return nil
        }
        return atEOF ? Response(status: status, body: Array(data[bodyStart...])) : nil
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: Character) -> String {
        var text = self
        while text.first == set { text = text.dropFirst() }
        while text.last == set { text = text.dropLast() }
        return String(text)
    }
}
