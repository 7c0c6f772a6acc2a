import BridgeApp
import BitchatWire
import BlueZ
import BotCrypto
import BotStorage
import BotSupport
import Bridge
import Geohash
import IdentityCache
import Mesh
import ModerationLog
import Nostr
import NostrRelay
import RelayDirectory
import SpamFilter
import VirtualRadio
import Synchronization
import WebSocketRuntime

#if canImport(Glibc)
import Glibc
#endif

/// `bitchat-bridge run`: the bridge itself.
enum RunCommand {
    static let spec = CommandSpec(
        path: "run",
        summary: "Run the bridge: carry public chat between the geohash channel on Nostr and the bitchat mesh.",
        options: [
            .value("--config", "FILE", "JSON configuration file (every field optional but geohash; env overrides)."),
            .value("--data-dir", "DIR", "Data directory; overrides data_dir and BRIDGE_DATA_DIR, as for every other command."),
            .flag("--print-config", "Print the effective configuration with each value's source, then exit."),
        ],
        details: "Configuration fields and their environment variables:\n"
            + BridgeConfiguration.fields.map { "  \($0.key.padding(toLength: 16)) \($0.environment.padding(toLength: 24)) \($0.help)" }
            .joined(separator: "\n")
    )

    static func run(_ args: ParsedArguments) throws(CommandExit) {
        var config = try loadConfiguration(path: args.value("--config"))
        if let directory = args.value("--data-dir") { config.overrideDataDirectory(directory) }
        if args.has("--print-config") {
            for warning in config.warnings { printError("warning: \(warning)") }
            printJSON(config.described)
            return
        }
        let logger = Logger(label: "bridge", level: config.logLevel)
        for warning in config.warnings { logger.warning("configuration: \(warning)", [("env.variable", .string(warning.variable))]) }
        let bridge = try BridgeRuntime.start(config: config, logger: logger, configPath: args.value("--config"))
        let code = try runBlocking { () async throws(CommandExit) -> Int32 in
            await bridge.runUntilStopped()
        }
        guard code == 0 else { throw .failure("bridge stopped after an error (see the log)") }
    }

    static func loadConfiguration(path: String?) throws(CommandExit) -> BridgeConfiguration {
        try DataFiles.loadConfiguration(path: path)
    }
}
