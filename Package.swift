// swift-tools-version:6.0
import PackageDescription

/// Layering (arrows point down only; modules on one level never import each other):
/// BridgeBot → Bridge → ModerationLog → {Nostr, RelayDirectory, Geohash, SpamFilter} → {BotCrypto, BotStorage, BotSupport}
/// → C system libraries. (SpamFilterReference sits beside SpamFilter for tests and `bench spam` only.)
/// Each C library is imported by exactly one Swift wrapper module.
let package = Package(
    name: "bitchat-bridge",
    products: [
        .executable(name: "bitchat-bridge", targets: ["BridgeBot"])
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

        // Domain cores: pure, tested without I/O.
        .target(name: "Geohash"),
        .target(name: "RelayDirectory", dependencies: ["Geohash", "BotSupport"]),
        .target(name: "Nostr", dependencies: ["BotCrypto", "BotSupport"]),
        .target(name: "SpamFilter", dependencies: ["BotSupport"], exclude: ["README.md"]),
        // The exhaustive reference the tests and `bench spam` compare the filter against (not used by the bridge).
        .target(name: "SpamFilterReference", dependencies: ["SpamFilter"]),
        .target(name: "ModerationLog", dependencies: ["SpamFilter", "BotStorage", "BotCrypto", "BotSupport"]),

        // The product core and the executable.
        .target(name: "Bridge", dependencies: ["BotCrypto", "BotSupport", "Nostr", "Geohash"]),
        .executableTarget(
            name: "BridgeBot",
            dependencies: [
                "Bridge", "BotCrypto", "BotSupport", "Geohash", "Nostr", "RelayDirectory", "SpamFilter",
                "SpamFilterReference", "ModerationLog",
            ]
        ),

        .testTarget(name: "BotSupportTests", dependencies: ["BotSupport"]),
        .testTarget(name: "BotStorageTests", dependencies: ["BotStorage"]),
        .testTarget(name: "BotCryptoTests", dependencies: ["BotCrypto", "BotSupport"], resources: [.copy("Fixtures")]),
        .testTarget(name: "GeohashTests", dependencies: ["Geohash"]),
        .testTarget(name: "RelayDirectoryTests", dependencies: ["RelayDirectory", "Geohash", "BotSupport"]),
        .testTarget(name: "NostrTests", dependencies: ["Nostr", "BotCrypto", "BotSupport"]),
        .testTarget(name: "SpamFilterTests", dependencies: ["SpamFilter", "SpamFilterReference", "BotSupport"]),
        // Also runs the built `bitchat-bridge` (spam, modlog, bench spam) end to end.
        .testTarget(name: "ModerationLogTests", dependencies: ["ModerationLog", "SpamFilter", "BotStorage", "BotSupport"]),
        .testTarget(name: "BridgeTests", dependencies: ["Bridge", "BotCrypto", "BotSupport", "Nostr"]),
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
