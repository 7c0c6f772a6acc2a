// swift-tools-version:6.0
import PackageDescription

/// The hot loops of the suite's heaviest proofs (10,400 random streams through the spam filter and its reference)
/// compiled optimized in debug builds too: the same code, 37 s → 3 s of CPU in `scripts/test`. Release builds are
/// optimized anyway.
let optimizedInDebug: [SwiftSetting] = [.unsafeFlags(["-O"], .when(configuration: .debug))]

/// Layering (arrows point down only; modules on one level never import each other):
/// BridgeBot → BridgeApp (the composition root) → {Console, BlueZ, VirtualRadio, NostrRelay}
/// → Bridge (the executor: coordinator, stores, configuration, keys) → BridgeCore (the router and every decision
/// machine) → {Mesh, MeshSync, Moderation, Identity, Nostr, BitchatWire, SpamFilter, Geohash}
/// → {BotCrypto, BotCompression, BotSupport} → C system libraries.
/// BridgeCore and the modules below it hold no storage, transport or clock of their own: they import no BotStorage,
/// MeshRuntime, WebSocketRuntime, NostrRelay, BlueZ or VirtualRadio, touch no file or socket, and take time as an
/// argument. Storage (BotStorage, IdentityCache, ModerationLog, MeshSyncStorage) and transports (MeshRuntime,
/// WebSocketRuntime, NostrRelay, VirtualRadio, BlueZ) sit beside the executor, which alone joins them to the core.
/// (SpamFilterReference sits beside SpamFilter for tests and `bench spam` only; BridgeTesting beside BridgeApp for
/// the in-process test world.) Each C library is imported by exactly one Swift wrapper module.
let package = Package(
    name: "bitchat-bridge",
    products: [
        .executable(name: "bitchat-bridge", targets: ["BridgeBot"]),
        // The decoders and parsers, for the libFuzzer package in fuzz/ (it depends on this one by path).
        .library(name: "BitchatBridgeParsers", targets: ["BitchatWire", "Nostr", "Bridge", "BridgeCore", "BotSupport"]),
    ],
    targets: [
        // C system libraries (Debian -dev packages); each folder holds only module.modulemap + shim.h.
        .systemLibrary(name: "CSecp256k1", pkgConfig: "libsecp256k1", providers: [.apt(["libsecp256k1-dev"])]),
        .systemLibrary(name: "CLibWebSockets", pkgConfig: "libwebsockets", providers: [.apt(["libwebsockets-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),

        // Foundations: no domain knowledge.
        .target(name: "BotSupport"),
        .target(name: "BotCrypto", dependencies: ["BotSupport", "CSecp256k1", "COpenSSL"]),
        .target(name: "BotStorage", dependencies: ["CSQLite"]),
        .target(name: "BotCompression", dependencies: ["CZlib"]),

        // Domain cores: pure, tested without I/O.
        .target(name: "Geohash"),
        .target(name: "RelayDirectory", dependencies: ["Geohash", "BotSupport"]),
        .target(name: "Nostr", dependencies: ["BotCrypto", "BotSupport"]),
        // Identities as data (pure): keys of both networks, the operator's lists, sightings, UTC days.
        .target(name: "Identity", dependencies: ["BotCrypto", "BotSupport"]),
        // The bounded stranger cache over its stores (STRANGER-CACHE): retention rules, in-memory and SQLite stores.
        .target(name: "IdentityCache", dependencies: ["Identity", "BotCrypto", "BotStorage", "BotSupport"]),
        .target(name: "BitchatWire", dependencies: ["BotCrypto", "BotSupport", "BotCompression"]),
        // Gossip sync and the bulletin board: stores, responder, requester (pure; time passed in).
        .target(name: "MeshSync", dependencies: ["BitchatWire", "BotCrypto", "BotSupport"]),
        // The courier gateway (issue 24): envelopes deposited, published, watched and delivered (pure; time passed in).
        .target(name: "Courier", dependencies: ["BitchatWire", "BotCrypto", "BotSupport", "Nostr"]),
        // The mesh peer engine and its types (pure: inputs in, actions out, time passed in).
        .target(name: "Mesh", dependencies: ["BitchatWire", "BotCrypto", "BotSupport", "MeshSync"]),
        // Runs an engine against a transport: MeshNode (time, timers), the transport contract, inbound queues, in-process air.
        .target(name: "MeshRuntime", dependencies: ["Mesh", "BitchatWire", "BotSupport"]),
        // The sync stores made durable in the bridge database (SQLite through BotStorage).
        .target(name: "MeshSyncStorage", dependencies: ["MeshSync", "BitchatWire", "BotStorage", "BotSupport"]),
        // Loopback-TCP "air" for separate processes (POSIX sockets, one poll() owner thread per endpoint).
        .target(name: "VirtualRadio", dependencies: ["Mesh", "MeshRuntime", "BotSupport"]),
        // The BLE radio: BlueZ over sd-bus (one owner thread for the bus); the only importer of CSystemd.
        .target(name: "BlueZ", dependencies: ["CSystemd", "Mesh", "MeshRuntime", "BitchatWire", "BotCrypto", "BotSupport"]),

        // Internet side I/O: the libwebsockets service thread, then relay connections and the pool.
        .target(name: "WebSocketRuntime", dependencies: ["BotSupport", "CLibWebSockets"]),
        .target(name: "NostrRelay", dependencies: ["Nostr", "WebSocketRuntime", "BotCrypto", "BotSupport"]),
        .target(name: "SpamFilter", dependencies: ["BotSupport"], exclude: ["README.md"], swiftSettings: optimizedInDebug),
        // The exhaustive reference the tests and `bench spam` compare the filter against (not used by the bridge).
        .target(name: "SpamFilterReference", dependencies: ["SpamFilter"], swiftSettings: optimizedInDebug),
        // What the bridge hid, as data (pure): the rule of each hide and the moderation-log row.
        .target(name: "Moderation", dependencies: ["SpamFilter", "BotCrypto", "BotSupport"]),
        // The moderation log (SQLite): retention, queries, export.
        .target(name: "ModerationLog", dependencies: ["Moderation", "SpamFilter", "BotStorage", "BotCrypto", "BotSupport"]),

        // The product core: the router and every decision machine (pure: no storage, no transport, no clock).
        .target(
            name: "BridgeCore",
            dependencies: [
                "BitchatWire", "BotCrypto", "BotSupport", "Courier", "Geohash", "Identity", "Mesh", "MeshSync", "Moderation", "Nostr",
                "SpamFilter",
            ]
        ),
        // The executor around it: the coordinator (feeds inputs, performs actions), the stores, configuration, keys.
        .target(
            name: "Bridge",
            dependencies: [
                "BridgeCore", "Courier", "BitchatWire", "BotCrypto", "BotStorage", "BotSupport", "Geohash", "Identity", "IdentityCache", "Mesh",
                "MeshRuntime", "MeshSync", "MeshSyncStorage", "Moderation", "ModerationLog", "Nostr", "SpamFilter",
            ]
        ),
        // The moderation console on the bridge's HTTP listener: access (token, sessions, same-origin), audit, routes, pages.
        .target(
            name: "Console",
            dependencies: ["Bridge", "BridgeCore", "BotSupport", "BotStorage", "BotCrypto", "Identity", "IdentityCache", "Moderation", "ModerationLog", "SpamFilter", "WebSocketRuntime"]
        ),
        // The running bridge, assembled: one composition root from small builders (configuration → stores, keys,
        // machine, relay pool, mesh node, coordinator, listener, control socket, services). The executable runs it;
        // the in-process test world builds its bridges with it too.
        .target(
            name: "BridgeApp",
            dependencies: [
                "Bridge", "BridgeCore", "Courier", "BitchatWire", "BotCrypto", "BotStorage", "BotSupport", "Geohash", "Identity", "IdentityCache",
                "Mesh", "MeshRuntime", "MeshSync", "MeshSyncStorage", "Moderation", "ModerationLog", "Nostr", "NostrRelay",
                "RelayDirectory", "SpamFilter", "VirtualRadio", "BlueZ", "WebSocketRuntime", "Console",
            ]
        ),
        .executableTarget(
            name: "BridgeBot",
            dependencies: [
                "BridgeApp", "Bridge", "BridgeCore", "Courier", "BotCrypto", "BotStorage", "BotSupport", "Geohash", "Identity", "IdentityCache", "Nostr", "NostrRelay",
                "RelayDirectory", "WebSocketRuntime", "BitchatWire", "Mesh", "MeshRuntime", "VirtualRadio", "BlueZ", "BotProcess",
                "SpamFilter", "SpamFilterReference", "Moderation", "ModerationLog", "Console", "MeshSync", "MeshSyncStorage",
            ]
        ),

        // Child processes with captured output (the demo and the tests): posix_spawn with a clean signal mask.
        .target(name: "BotProcess"),
        // Models of the apps' own link, sync and display rules (iOS and Android), for the test world and process tests:
        // pure machines a MeshNode runs (not used by the bridge).
        .target(name: "AppModels", dependencies: ["Mesh", "MeshSync", "BitchatWire", "BotCrypto", "BotSupport"]),
        // `AppPhone`: a model phone over radio-hub segments, for the end-to-end tests (built beside bitchat-bridge).
        .executableTarget(
            name: "AppPhone", dependencies: ["AppModels", "Mesh", "MeshRuntime", "VirtualRadio", "BitchatWire", "BotCrypto", "BotSupport"]),
        // Test doubles and process helpers shared by test targets (not a product).
        .target(name: "BridgeTestSupport", dependencies: ["BotProcess", "BotSupport"]),
        // The in-process test world: a manual clock, radio segments, loopback NIP-01 relays reached through the real
        // relay pool, bridges built by the composition root `run` uses, phones (not a product).
        .target(
            name: "BridgeTesting",
            dependencies: [
                "BridgeApp", "Bridge", "BridgeCore", "BitchatWire", "BotCrypto", "BotStorage", "BotSupport", "Identity", "IdentityCache", "Mesh",
                "MeshRuntime", "MeshSync", "Moderation", "ModerationLog", "Nostr", "BridgeTestSupport", "AppModels",
            ]
        ),

        .testTarget(name: "BotSupportTests", dependencies: ["BotSupport"]),
        .testTarget(name: "BotStorageTests", dependencies: ["BotStorage", "BotProcess"]),
        .testTarget(name: "BotCryptoTests", dependencies: ["BotCrypto", "BotSupport"], resources: [.copy("Fixtures")]),
        .testTarget(name: "GeohashTests", dependencies: ["Geohash"]),
        .testTarget(
            name: "RelayDirectoryTests",
            dependencies: ["RelayDirectory", "Geohash", "BotSupport"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(name: "NostrTests", dependencies: ["Nostr", "BotCrypto", "BotSupport"]),
        .testTarget(
            name: "NostrRelayTests",
            dependencies: ["NostrRelay", "Nostr", "WebSocketRuntime", "BotCrypto", "BotSupport", "BridgeTestSupport"]
        ),
        .testTarget(name: "CourierTests", dependencies: ["Courier", "BitchatWire", "BotCrypto", "BotSupport", "Nostr"]),
        .testTarget(
            name: "BitchatWireTests",
            dependencies: ["BitchatWire", "BotCrypto", "BotSupport", "BotCompression", "BridgeTestSupport"]
        ),
        .testTarget(
            name: "MeshSyncTests",
            dependencies: ["MeshSync", "MeshSyncStorage", "BitchatWire", "BotCrypto", "BotStorage", "BotSupport", "BridgeTestSupport"]
        ),
        .testTarget(
            name: "MeshTests",
            dependencies: ["Mesh", "MeshRuntime", "MeshSync", "BitchatWire", "BotCrypto", "BotSupport", "VirtualRadio", "BridgeTestSupport"],
            // The bitchat-cli driver is run from its source path (#filePath), not bundled.
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "BridgeTests",
            dependencies: [
                "Bridge", "BridgeCore", "BitchatWire", "Courier", "BotCrypto", "BotStorage", "BotSupport", "Geohash", "Identity", "IdentityCache", "Mesh", "MeshRuntime", "Nostr",
                "SpamFilter", "Moderation", "ModerationLog", "MeshSync", "MeshSyncStorage", "BridgeTesting",
            ]
        ),
        .testTarget(
            name: "BlueZTests",
            dependencies: ["BlueZ", "Mesh", "MeshRuntime", "BitchatWire", "BotCrypto", "BotSupport", "BridgeTestSupport"],
            exclude: ["Fixtures"]
        ),
        // End-to-end tests of the built executable (it is built by `swift build --build-tests`).
        .testTarget(
            name: "BridgeBotTests", dependencies: ["BridgeTestSupport", "BridgeTesting", "BotSupport", "BotCrypto", "Bridge", "BridgeCore", "Nostr", "WebSocketRuntime"]
        ),
        // The command line's own spec, in process (the executable target, imported for testing).
        .testTarget(name: "BridgeCLITests", dependencies: ["BridgeBot", "BridgeApp"]),
        // Scenarios in the in-process world (relays, segments, bridges, phones; time advanced without sleeping).
        .testTarget(
            name: "BridgeWorldTests",
            dependencies: [
                "BridgeTesting", "BridgeApp", "Bridge", "BridgeCore", "BitchatWire", "BotCrypto", "BotSupport", "Mesh", "MeshRuntime",
                "MeshSync", "Nostr", "Identity", "IdentityCache", "Moderation", "ModerationLog", "SpamFilter", "AppModels", "Geohash",
                "Console", "BotStorage",
            ]
        ),
        .testTarget(
            name: "BridgeEndToEndTests",
            // BitchatWire, BotCrypto and Nostr only to sign the metrics scenario's floods (fresh identities by the
            // thousand, BridgeTesting's flooder announces); SpamFilter as the phone models' ported filter; BridgeCore and
            // Identity to sign site records by the thousand as a stage signs them.
            dependencies: ["BridgeTestSupport", "BridgeTesting", "BotSupport", "BotStorage", "SpamFilter", "BitchatWire", "BotCrypto", "Nostr",
                           "BridgeCore", "Identity"]
        ),
        .testTarget(
            name: "WebSocketRuntimeTests",
            dependencies: ["WebSocketRuntime", "BotSupport", "BridgeTestSupport"]
        ),
        .testTarget(name: "IdentityCacheTests", dependencies: ["Identity", "IdentityCache", "BotStorage", "BotCrypto", "BotSupport", "BotProcess"]),
        .testTarget(name: "SpamFilterTests", dependencies: ["SpamFilter", "SpamFilterReference", "BotSupport"]),
        .testTarget(
            name: "ConsoleTests",
            dependencies: ["Console", "Bridge", "BridgeCore", "WebSocketRuntime", "BotSupport", "BotStorage", "Identity", "IdentityCache", "Moderation", "ModerationLog", "SpamFilter"]
        ),
        .testTarget(name: "ModerationLogTests", dependencies: ["Moderation", "ModerationLog", "SpamFilter", "BotStorage", "BotSupport", "BotProcess"]),
    ]
)

// One place for compiler settings (swift-log style): every Swift target gets the same strictness.
for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}
