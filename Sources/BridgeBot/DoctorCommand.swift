import BridgeApp
import BotSupport
import Bridge
import Geohash

/// `bitchat-bridge doctor`: the checks an operator runs before the gates open, for the configuration `run` would use.
enum DoctorCommand {
    static let spec = CommandSpec(
        path: "doctor",
        summary: "Check this host for the bridge: data directory, Bluetooth, BlueZ settings, relays, clock (exit 1 if any fails).",
        options: [
            .value("--config", "FILE", "The configuration file run uses (BRIDGE_* environment variables apply as for run)."),
            .value("--data-dir", "DIR", "Data directory; overrides data_dir and BRIDGE_DATA_DIR."),
            .value("--bluez-conf", "FILE", "BlueZ's settings file (default /etc/bluetooth/main.conf)."),
            .value("--timeout", "SECONDS", "How long relays get to connect and answer (1–60, default 10)."),
            .flag("--json", "Print one JSON object: ok, and each check with name, outcome, detail and fix."),
        ],
        details: """
            Reads, never changes: the data directory (owner, mode, the secret files' modes, free space, whether a bridge
            runs on it; a directory that does not exist yet warns: the first start makes a new identity there); that
            http_listen is free; with mesh
            bluez, the D-Bus system bus and its policy, BlueZ, the adapter (present, powered, LE central and
            peripheral) and BlueZ's main.conf (JustWorksRepairing = never, ControllerMode = le, Privacy = device,
            so iPhones connect without a PIN prompt); with tcp:// segments, that a radio hub listens at each; each
            relay (connects and answers one REQ); the clock against the relays' (their Date headers: warn beyond
            60 s, fail beyond 900 s, where phones drop events). Each warning and failure says what to do.
            Outcomes: ok, warn (works, needs attention), FAIL (exit 1), skip (does not apply).
            """
    )

    static func run(_ args: ParsedArguments) throws(CommandExit) {
        var options = Doctor.Options()
        if let path = args.value("--bluez-conf") { options.bluezConfPath = path }
        if let seconds = try NostrCommand.intOption(args, "--timeout", range: 1...60) { options.relayTimeout = .seconds(seconds) }
        var config: BridgeConfiguration
        do {
            config = try DataFiles.loadConfiguration(path: args.value("--config"))
        } catch {
            report([DoctorCheck("configuration", .fail, error.message, fix: "correct it: bitchat-bridge run --print-config shows what run reads")],
                   json: args.has("--json"))
            throw .failure("doctor: the configuration is invalid")
        }
        if let directory = args.value("--data-dir") { config.overrideDataDirectory(directory) }
        let logger = Logger(label: "doctor", level: ProcessEnvironment.value("BRIDGE_LOG_LEVEL").flatMap(LogLevel.init(name:)) ?? .error)
        let configured = DoctorCheck("configuration", .ok, "geohash \(config.geohash.string), mesh \(config.mesh)"
            + (args.value("--config").map { " (\($0) and BRIDGE_* variables)" } ?? " (BRIDGE_* variables)"))
        let checks = try [configured] + runBlocking { [config, options] () async throws(CommandExit) -> [DoctorCheck] in
            await Doctor.checks(config, options: options, logger: logger)
        }
        report(checks, json: args.has("--json"))
        let failed = checks.filter { $0.outcome == .fail }.count
        if failed > 0 { throw .failure("doctor: \(failed) of \(checks.count) checks failed") }
    }

    static func report(_ checks: [DoctorCheck], json: Bool) {
        if json {
            printJSON(.object([
                ("ok", .bool(!checks.contains { $0.outcome == .fail })),
                ("checks", .array(checks.map { check in
                    .object([("name", .string(check.name)), ("outcome", .string(check.outcome.rawValue)),
                             ("detail", .string(check.detail)), ("fix", check.fix.map { .string($0) } ?? .null)])
                })),
            ]))
            return
        }
        let width = checks.map(\.name.count).max() ?? 0
        for check in checks {
            let outcome = check.outcome == .fail ? "FAIL" : check.outcome.rawValue
            print("\(outcome.padding(toLength: 5)) \(check.name.padding(toLength: width + 1)) \(check.detail)")
            if let fix = check.fix, check.outcome == .fail || check.outcome == .warn {
                print("      \("".padding(toLength: width + 1)) → \(fix)")
            }
        }
        let warnings = checks.filter { $0.outcome == .warn }.count
        if !checks.contains(where: { $0.outcome == .fail }) {
            print("doctor: no check failed" + (warnings > 0 ? " (\(warnings) warning\(warnings == 1 ? "" : "s"))." : "."))
        }
    }
}
