import BridgeApp
import BotSupport
import VirtualRadio

/// `bitchat-bridge radio-hub`: one segment of virtual "air" over loopback TCP.
enum RadioHubCommand {
    static let spec = CommandSpec(
        path: "radio-hub",
        summary: "Run a virtual radio segment: every frame one TCP client sends reaches every other client.",
        options: [
            .required("--listen", "HOST:PORT", "IPv4 address to listen on (port 0 picks a free port)."),
            .value("--mtu", "N", "Largest frame delivered; larger frames are dropped (default 512 = ATT MTU 517 − 3)."),
            .value("--loss", "P", "Probability 0…1 that one delivery is lost (default 0)."),
        ],
        details: """
            Framing (both directions): a 2-byte big-endian length, then exactly one bitchat packet (one BLE
            write's worth). Nodes join with --mesh tcp://HOST:PORT[?mtu=N]. Prints JSON lines on stdout:
            {"event":"listening","port":N} first, then connection changes. Stops on SIGINT/SIGTERM.
            """
    )

    static func run(_ args: ParsedArguments) throws(CommandExit) {
        guard let listen = args.value("--listen") else { throw .usage("--listen HOST:PORT is required") }
        var configuration = RadioHub.Configuration()
        if let text = args.value("--mtu") {
            guard let mtu = Int(text), (23...65_535).contains(mtu) else { throw .usage("--mtu must be 23…65535") }
            configuration.mtu = mtu
        }
        if let text = args.value("--loss") {
            guard let loss = Double(text), (0...1).contains(loss) else { throw .usage("--loss must be between 0 and 1") }
            configuration.loss = loss
        }
        guard let colon = listen.lastIndex(of: ":"), let port = UInt16(listen[listen.index(after: colon)...]) else {
            throw .usage("--listen must be HOST:PORT")
        }
        let hub: RadioHub
        do {
            hub = try RadioHub(host: String(listen[..<colon]), port: port, configuration: configuration) { event, fields in
                emitLine(.object([("event", .string(event))] + fields.map { ($0.0, .string($0.1)) }))
            }
        } catch {
            throw .failure("radio-hub: \(error)")
        }
        let signals = SignalHandler(ProcessSignal.termination) { _ in hub.stop() }
        emitLine(.object([
            ("event", .string("listening")), ("port", .integer(Int64(hub.port))),
            ("mtu", .integer(Int64(configuration.mtu))), ("loss", .double(configuration.loss)),
        ]))
        hub.run()
        signals.cancel()
        let stats = hub.stats
        emitLine(.object([
            ("event", .string("stopped")), ("framesIn", .integer(Int64(stats.framesIn))),
            ("deliveries", .integer(Int64(stats.deliveries))), ("droppedOverMTU", .integer(Int64(stats.droppedOverMTU))),
            ("droppedLoss", .integer(Int64(stats.droppedLoss))), ("droppedBacklog", .integer(Int64(stats.droppedBacklog))),
        ]))
    }
}
