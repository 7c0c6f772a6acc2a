import BotSupport
import Bridge
import Geohash
import Testing
import BridgeCore

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
        #expect(config.mesh == .tcp(host: "127.0.0.1", port: 9000, mtu: nil))
        #expect(config.shadow && config.sources["shadow"] == .file)
        #expect(!config.relayDirectory)
        #expect(config.relays == ["ws://127.0.0.1:7000"])
        #expect(config.powBits == 16 && config.sources["pow_bits"] == .defaultValue)
        #expect(config.meshPeerTimeoutSeconds == 180)
        #expect(config.syncReplyBudgetBytes == 262_144 && config.sources["sync_reply_budget"] == .defaultValue)
        #expect(config.httpListen == "127.0.0.1:9477")
        #expect(config.gateway && config.rendezvous)
        #expect(config.rendezvousCell?.string == "u4pruy")
        #expect(config.mirrorDownlink && !config.mirrorUplink, "down by default, up opt-in")
        let described = config.described
        #expect(described["nickname"]?["source"] == .string("env"))
        #expect(described["mesh"]?["value"] == .string("tcp://127.0.0.1:9000"))
    }

    @Test("channel levels: parents and block children by default; channel_levels narrows; bad levels exit naming the field")
    func channelLevels() throws {
        let base = ["BRIDGE_GEOHASH": "u4pruy", "BRIDGE_MESH": "tcp://127.0.0.1:9000"]
        let all = try BridgeConfiguration.resolve(fileText: nil, environment: base)
        #expect(all.channelLevels == [.region, .province, .city, .block])
        #expect(all.servedChannels.prefix(4).map(\.string) == ["u4pruy", "u4", "u4pr", "u4pru"])
        #expect(all.servedChannels.count == 36 && all.servedChannels.last?.string == "u4pruyz")
        #expect(all.described["channel_levels"]?["value"] == .array(["region", "province", "city", "block"].map(JSONValue.string)))
        let narrowed = try BridgeConfiguration.resolve(
            fileText: nil, environment: base.merging(["BRIDGE_CHANNEL_LEVELS": "city, 4,neighborhood"]) { $1 })
        #expect(narrowed.channelLevels == [.city, .province])
        #expect(narrowed.servedChannels.map(\.string) == ["u4pruy", "u4pr", "u4pru"])
        let none = try BridgeConfiguration.resolve(fileText: #"{"geohash":"u4pru","channel_levels":"none"}"#, environment: [:])
        #expect(none.servedChannels.map(\.string) == ["u4pru"])
        let file = try BridgeConfiguration.resolve(fileText: #"{"geohash":"u4pru","channel_levels":["region",4]}"#, environment: [:])
        #expect(file.servedChannels.map(\.string) == ["u4pru", "u4", "u4pr"] && file.sources["channel_levels"] == .file)
        // A 5-character city has no block children in the default set (1,024 would be too many).
        #expect(ChannelLevels.defaultLevels(for: try GeohashCell("u4pru")) == [.region, .province])
        for (value, reason) in [("street", "is no channel level"), ("block", "neither a parent nor the block level")] {
            #expect {
                try BridgeConfiguration.resolve(fileText: nil, environment: ["BRIDGE_GEOHASH": "u4pru", "BRIDGE_CHANNEL_LEVELS": value])
            } throws: { error in
                guard case .invalid(field: "channel_levels", _, let text) = error as? ConfigurationError else { return false }
                return text.contains(reason)
            }
        }
        // The misspelling warning knows the new variable.
        let warned = BridgeConfiguration.unknownVariables(in: ["BRIDGE_CHANEL_LEVELS": "city"])
        #expect(warned.first?.nearest == "BRIDGE_CHANNEL_LEVELS")
    }

    @Test("sync_reply_budget: from the file or BRIDGE_SYNC_REPLY_BUDGET (the variable wins), the range's ends accepted")
    func syncReplyBudget() throws {
        let file = try BridgeConfiguration.resolve(fileText: #"{"geohash":"u4pruy","sync_reply_budget":4096}"#, environment: [:])
        #expect(file.syncReplyBudgetBytes == 4_096 && file.sources["sync_reply_budget"] == .file)
        let env = try BridgeConfiguration.resolve(
            fileText: #"{"geohash":"u4pruy","sync_reply_budget":4096}"#, environment: ["BRIDGE_SYNC_REPLY_BUDGET": "4194304"])
        #expect(env.syncReplyBudgetBytes == 4_194_304 && env.sources["sync_reply_budget"] == .environment)
        #expect(env.described["sync_reply_budget"]?["value"] == .integer(4_194_304))
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
            (#"{"geohash":"u4pruy","mesh_peer_timeout":4}"#, [:], "mesh_peer_timeout"),
            (#"{"geohash":"u4pruy"}"#, ["BRIDGE_MESH_PEER_TIMEOUT": "3601"], "mesh_peer_timeout"),
            (#"{"geohash":"u4pruy","sync_reply_budget":4095}"#, [:], "sync_reply_budget"),
            (#"{"geohash":"u4pruy","sync_reply_budget":"lots"}"#, [:], "sync_reply_budget"),
            (#"{"geohash":"u4pruy"}"#, ["BRIDGE_SYNC_REPLY_BUDGET": "4194305"], "sync_reply_budget"),
            (#"{"geohash":"u4pruy"}"#, ["BRIDGE_SYNC_REPLY_BUDGET": "256k"], "sync_reply_budget"),
            (#"{"geohash":"u4pruy","http_listen":"bridge.example:80"}"#, [:], "http_listen"),
            (#"{"geohash":"u4pruy","http_listen":"300.1.1.1:80"}"#, [:], "http_listen"),
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

/// Issue 14 ("Also found") and issue 15 defect 3: URLs the configuration used to accept or reject wrongly.
@Suite("Bridge configuration: URLs, listen addresses, stray BRIDGE_* variables")
struct ConfigurationURLTests {
    func resolve(_ environment: [String: String]) throws(ConfigurationError) -> BridgeConfiguration {
        try BridgeConfiguration.resolve(
            fileText: nil, environment: ["BRIDGE_GEOHASH": "u4pruy"].merging(environment) { $1 })
    }

    @Test(
        "a bad relay URL names the field, the URL and what is wrong",
        arguments: [
            ("ws://relay.example:99999", "port '99999'"), ("ws://relay.example:0", "port '0'"), ("ws://relay.example:-1", "port '-1'"),
            ("ws://relay.example:abc", "port 'abc'"), ("ws://user:pw@relay.example", "user info"), ("ws://a b:1/", "a space"),
            ("ws://relay.example/#x", "fragment"), ("wss://", "no host"), ("ws://[::1", "']'"), ("ws://::1:7000", "brackets"),
            ("http://relay.example", "ws://"), ("ws://relay..example", "empty label"), ("ws://rel@y.example", "user info"),
            ("ws://r%65lay.example", "'%'"),
        ])
    func badRelayURL(url: String, reason: String) {
        do {
            _ = try resolve(["BRIDGE_RELAYS": url])
            Issue.record("accepted \(url)")
        } catch {
            guard case .invalid(let field, let value, let why) = error else { Issue.record("\(error)"); return }
            #expect(field == "relays" && value == url)
            #expect(why.contains(reason), "\(why)")
            #expect(error.description.contains(url))
        }
    }

    @Test("IPv6 literals: a ws://[::1] relay and a [::1] listener are accepted")
    func ipv6() throws {
        let config = try resolve(["BRIDGE_RELAYS": "ws://[::1]:7000,wss://[2001:db8::1]/nostr", "BRIDGE_HTTP_LISTEN": "[::1]:9477"])
        #expect(config.relays == ["ws://[::1]:7000", "wss://[2001:db8::1]/nostr"])
        #expect(config.httpListen == "[::1]:9477")
        #expect(!config.httpListenBeyondLoopback)
        for listen in ["::1:9477", "[::1]", "[::1]:0", "localhost:70000", "[::g]:9477", "bridge.local:9477"] {
            #expect(throws: ConfigurationError.self, "\(listen)") { try resolve(["BRIDGE_HTTP_LISTEN": listen]) }
        }
    }

    @Test("an IP address beyond loopback is accepted by the configuration and marked (run then needs the console token)")
    func beyondLoopback() throws {
        for listen in ["0.0.0.0:9477", "192.0.2.7:9477", "[::]:9477", "[::2]:9477", "[2001:db8::1]:80"] {
            let config = try resolve(["BRIDGE_HTTP_LISTEN": listen])
            #expect(config.httpListen == listen && config.httpListenBeyondLoopback, "\(listen)")
        }
        for listen in ["127.0.0.1:9477", "localhost:9477", "[::1]:9477"] {
            #expect(try !resolve(["BRIDGE_HTTP_LISTEN": listen]).httpListenBeyondLoopback, "\(listen)")
        }
        #expect(try !resolve(["BRIDGE_HTTP_LISTEN": "off"]).httpListenBeyondLoopback)
    }

    @Test("mesh tcp://HOST:PORT?mtu=N: the mtu is kept (also per segment); bad values name the field")
    func meshMTU() throws {
        #expect(try resolve(["BRIDGE_MESH": "tcp://127.0.0.1:7000?mtu=185"]).mesh == .tcp(host: "127.0.0.1", port: 7000, mtu: 185))
        #expect(try resolve(["BRIDGE_MESH": "tcp://127.0.0.1:7000?mtu=185"]).mesh.description == "tcp://127.0.0.1:7000?mtu=185")
        #expect(try resolve(["BRIDGE_MESH": "tcp://127.0.0.1:7000"]).mesh == .tcp(host: "127.0.0.1", port: 7000, mtu: nil))
        #expect(try resolve(["BRIDGE_MESH": "tcp://127.0.0.1:1?mtu=100,tcp://127.0.0.1:2"]).mesh
            == .tcpSegments(["tcp://127.0.0.1:1?mtu=100", "tcp://127.0.0.1:2"]))
        for (text, reason) in [
            ("tcp://127.0.0.1:7000?mtu=22", "mtu '22'"), ("tcp://127.0.0.1:7000?mtu=65536", "mtu '65536'"),
            ("tcp://127.0.0.1:7000?mtu=", "mtu ''"), ("tcp://127.0.0.1:7000?loss=1", "'loss=1'"), ("tcp://127.0.0.1", "no port"),
            ("tcp://hub.example:7000", "IPv4"), ("tcp://127.0.0.1:7000/x", "path"),
        ] {
            do {
                _ = try resolve(["BRIDGE_MESH": text])
                Issue.record("accepted \(text)")
            } catch {
                #expect(error.description.contains("'mesh'") && error.description.contains(reason), "\(error)")
            }
        }
    }

    @Test("a misspelt BRIDGE_* variable is reported with the nearest known one; tool variables are not")
    func strayVariables() throws {
        let config = try resolve([
            "BRIDGE_GEOHSAH": "u4pruz", "BRIDGE_RELAY": "ws://x", "BRIDGE_TEST_VENV": "/v", "BRIDGE_REQUIRE_BLE": "1",
            "BRIDGE_ZZZZZZZZZZZZZZZZZZZZ": "1", "OTHER_THING": "1",
        ])
        #expect(config.warnings.map(\.variable) == ["BRIDGE_GEOHSAH", "BRIDGE_RELAY", "BRIDGE_ZZZZZZZZZZZZZZZZZZZZ"])
        #expect(config.warnings[0].nearest == "BRIDGE_GEOHASH" && config.warnings[0].distance == 2)
        #expect(config.warnings[0].description.contains("did you mean BRIDGE_GEOHASH?"))
        #expect(config.warnings[1].nearest == "BRIDGE_RELAYS" && config.warnings[1].distance == 1)
        #expect(config.warnings[2].description.contains("the nearest known variable is"))
        #expect(try resolve([:]).warnings.isEmpty)
    }

    @Test("the typo hint comes with an error too: BRIDGE_GEOHSAH alone leaves geohash unset, and the error says what was meant")
    func typoWithError() throws {
        #expect {
            try BridgeConfiguration.resolve(fileText: nil, environment: ["BRIDGE_GEOHSAH": "u4pruy"])
        } throws: { error in
            let text = "\(error)"
            return text.contains("'geohash' is required") && text.contains("BRIDGE_GEOHSAH") && text.contains("did you mean BRIDGE_GEOHASH?")
        }
        #expect(throws: ConfigurationError.missing(field: "geohash")) { try BridgeConfiguration.resolve(fileText: nil, environment: [:]) }
        #expect {
            try BridgeConfiguration.resolve(fileText: #"{"geohash": "u4pruy", "nicknme": "gate"}"#, environment: [:])
        } throws: { error in "\(error)".contains("unknown configuration field 'nicknme'; did you mean 'nickname'?") }
    }

    @Test("a config file may carry whole-line // comments; a // inside a value stays")
    func commentLines() throws {
        let text = """
            // the festival's channel
            {
              // where the stage is
              "geohash": "u4pruy",
                // indented comments too
              "relays": ["ws://relay.example:7000//x"]
            }
            """
        let config = try BridgeConfiguration.resolve(fileText: text, environment: [:])
        #expect(config.geohash.string == "u4pruy" && config.relays == ["ws://relay.example:7000//x"])
        #expect(throws: ConfigurationError.self) { try BridgeConfiguration.resolve(fileText: #"{"geohash": "u4pruy"} // trailing"#, environment: [:]) }
    }

    @Test("run --data-dir wins over the file and the environment, and says so")
    func dataDirectoryOption() throws {
        var config = try BridgeConfiguration.resolve(
            fileText: #"{"geohash":"u4pruy","data_dir":"/file"}"#, environment: ["BRIDGE_DATA_DIR": "/env"])
        #expect(config.dataDirectory == "/env")
        config.overrideDataDirectory("/option")
        #expect(config.dataDirectory == "/option" && config.described["data_dir"]?["source"] == .string("option"))
    }
}
