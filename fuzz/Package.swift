// swift-tools-version:6.0
import PackageDescription

/// libFuzzer targets, kept out of the main package so `swift build` / `swift test` never see them.
/// Build and run them with `scripts/fuzz` (it passes `--sanitize=fuzzer`; libFuzzer supplies `main`).
let package = Package(
    name: "bitchat-bridge-fuzz",
    dependencies: [.package(name: "bitchat-bridge", path: "..")],
    targets: [
        .executableTarget(
            name: "FuzzMeshDecoder",
            dependencies: [.product(name: "BitchatBridgeParsers", package: "bitchat-bridge")]
        ),
        .executableTarget(
            name: "FuzzRelayMessage",
            dependencies: [.product(name: "BitchatBridgeParsers", package: "bitchat-bridge")]
        ),
        .executableTarget(
            name: "FuzzCourierEnvelope",
            dependencies: [.product(name: "BitchatBridgeParsers", package: "bitchat-bridge")]
        ),
        .executableTarget(
            name: "FuzzConfiguration",
            dependencies: [.product(name: "BitchatBridgeParsers", package: "bitchat-bridge")]
        ),
    ]
)

for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.unsafeFlags(["-parse-as-library"]))  // no top-level code: libFuzzer owns main()
    target.swiftSettings = settings
}
