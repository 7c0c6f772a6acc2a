import BotSupport
import Bridge
import Geohash
import Testing

@Suite("Bridge configuration")
struct ConfigurationTests {
    @Test("defaults, file values and environment overrides, each with its source")
    func precedence() throws {
        let file = #"{"geohash":"u4pruy","nickname":"stage","relays":["ws://127.0.0.1:7000"],"shadow":true}"#
        let config = try BridgeConfiguration.resolve(
            fileText: file,
            environment: ["BRIDGE_NICKNAME": "gate", "BRIDGE_MESH": "tcp://127.0.0.1:9000", "BRIDGE_RELAY_DIRECTORY": "off"]
        )
        #expect(config.geohash.string == "u4pruy" && config.sources["geohash"] == .file)
        #expect(config.nickname == "gate" && config.sources["nickname"] == .environment)
        #expect(config.mesh == .tcp(host: "127.0.0.1", port: 9000))
        #expect(config.shadow && config.sources["shadow"] == .file)
        #expect(!config.relayDirectory)
        #expect(config.relays == ["ws://127.0.0.1:7000"])
        #expect(config.powBits == 16 && config.sources["pow_bits"] == .defaultValue)
        #expect(config.httpListen == "127.0.0.1:9477")
        #expect(config.gateway && config.rendezvous)
        #expect(config.rendezvousCell?.string == "u4pruy")
        #expect(!config.mirrorDownlink && !config.mirrorUplink)
        let described = config.described
        #expect(described["nickname"]?["source"] == .string("env"))
        #expect(described["mesh"]?["value"] == .string("tcp://127.0.0.1:9000"))
    }

    @Test("environment alone is enough (Docker); relay list is comma-separated")
    func environmentOnly() throws {
        let config = try BridgeConfiguration.resolve(
            fileText: nil,
            environment: ["BRIDGE_GEOHASH": "u4pru", "BRIDGE_RELAYS": "wss://a.example, ws://127.0.0.1:1",
                          "BRIDGE_TEXT_MIRROR": "both", "BRIDGE_HTTP_LISTEN": "off", "BRIDGE_MESH": "bluez:hci1"])
        #expect(config.relays == ["wss://a.example", "ws://127.0.0.1:1"])
        #expect(config.mirrorDownlink && config.mirrorUplink)
        #expect(config.httpListen == nil)
        #expect(config.mesh == .bluez(adapter: "hci1"))
        // A 5-character geohash has no rendezvous cell: the role defaults off.
        #expect(!config.rendezvous && config.rendezvousCell == nil)
    }

    @Test(
        "invalid values name the field",
        arguments: [
            (#"{}"#, [:], "geohash"),
            (#"{"geohash":"U4PRUY"}"#, [:], "geohash"),
            (#"{"geohash":"u4pruy","nickname":"way too long nickname"}"#, [:], "nickname"),
            (#"{"geohash":"u4pruy","nickname":"a#b"}"#, [:], "nickname"),
            (#"{"geohash":"u4pruy"}"#, ["BRIDGE_MESH": "usb"], "mesh"),
            (#"{"geohash":"u4pruy"}"#, ["BRIDGE_MESH": "tcp://nohost"], "mesh"),
            (#"{"geohash":"u4pruy"}"#, ["BRIDGE_SHADOW": "maybe"], "shadow"),
            (#"{"geohash":"u4pruy","relays":"wss://a"}"#, [:], "relays"),
            (#"{"geohash":"u4pruy","relays":["http://a.example"]}"#, [:], "relays"),
            (#"{"geohash":"u4pruy","relay_directory":false}"#, [:], "relays"),
            (#"{"geohash":"u4pruy","pow_bits":33}"#, [:], "pow_bits"),
            (#"{"geohash":"u4pruy","http_listen":"0.0.0.0:80"}"#, [:], "http_listen"),
            (#"{"geohash":"u4pru","rendezvous":true}"#, [:], "rendezvous"),
            (#"{"geohash":"u4pruy","text_mirror":"sideways"}"#, [:], "text_mirror"),
            (#"{"geohash":"u4pruy","log_level":"loud"}"#, [:], "log_level"),
            (#"{"geohash":"u4pruy","geohsh":"x"}"#, [:], "geohsh"),
            (#"{"geohash":"u4pruy","spam":[1]}"#, [:], "spam"),
            (#"[1,2]"#, [:], "object"),
            (#"{"geohash":"#, [:], "JSON"),
        ] as [(String, [String: String], String)])
    func invalid(file: String, environment: [String: String], named: String) {
        do {
            _ = try BridgeConfiguration.resolve(fileText: file, environment: environment)
            Issue.record("accepted \(file) \(environment)")
        } catch {
            #expect(error.description.contains(named), "\(error.description)")
        }
    }
}
