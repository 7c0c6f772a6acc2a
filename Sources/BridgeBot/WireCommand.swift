import BridgeApp
import BitchatWire
import BotCrypto
import BotSupport

#if canImport(Glibc)
import Glibc
#endif

/// `bitchat-bridge wire decode|encode`: the packet codec as an operator tool (and a test phone's helper).
enum WireCommand {
    static let decodeSpec = CommandSpec(
        path: "wire decode",
        summary: "Decode one bitchat frame (hex) and print it as JSON.",
        positionals: [PositionalSpec(name: "HEX")],
        options: [
            .value("--signing-key", "HEX", "Ed25519 public key of the sender: adds signatureValid (announces use their own key)."),
            .flag("--compact", "One JSON object per line."),
        ],
        note: "(HEX - reads hex frames on stdin, one per line)",
        details: "Exit 1 if a frame does not decode; the error names the reason."
    )

    static let encodeSpec = CommandSpec(
        path: "wire encode",
        summary: "Encode a packet from its JSON form (as printed by wire decode) and print the frame as hex.",
        positionals: [PositionalSpec(name: "JSON")],
        options: [
            .value("--sign-with", "SEED_HEX", "Sign with this 32-byte Ed25519 seed (MESH-WIRE §4.3 pre-image)."),
            .flag("--pad", "PKCS#7-pad the frame to its bucket (only Noise frames are padded on the air)."),
            .flag("--no-compress", "Never compress the payload (default: the §2.5 rule, or the frame's own compressedHex)."),
        ],
        note: "(JSON - reads JSON objects on stdin: pretty or one per line)",
        details: """
            Missing fields default to version 1, TTL 7, timestamp now. 'payload' takes the decoded form; 'payloadHex' raw bytes.
            What wire decode prints encodes back to the same frame: its compressed body (compressedHex), the bytes
            after the last field (trailingHex: padding) and the flag bits decoders ignore ('flags') are kept, so
            'wire decode HEX | wire encode -' prints HEX again. One hex frame per JSON object read.
            """
    )

    enum Limits {
        /// Most stdin `encode -` reads: far above any frame's JSON (a 1.18 MB payload is ~2.4 MB of hex).
        static let maxStdinBytes = 64 << 20
    }

    static let group = CommandGroup(
        name: "wire",
        summary: "Decode a bitchat frame to JSON, or encode JSON to a frame (optionally signed).",
        subcommands: [Subcommand("decode", decodeSpec, run: decode), Subcommand("encode", encodeSpec, run: encode)])

    private static func decode(_ args: ParsedArguments) throws(CommandExit) {
        let input = args.positionals[0]
        var key: Ed25519PublicKey?
        if let text = args.value("--signing-key") {
            guard let bytes = try? Hex.decode(text, expectedCount: 32), let parsed = try? Ed25519PublicKey(rawRepresentation: bytes) else {
                throw .usage("--signing-key must be 64 hex characters")
            }
            key = parsed
        }
        let lines = input == "-" ? readStdinLines() : [input]
        var failures = 0
        for line in lines {
            let text = line.filter { !$0.isWhitespace }
            guard !text.isEmpty else { continue }
            guard let frame = try? Hex.decode(text) else {
                printError("error: not hex: \(text.prefix(32))")
                failures += 1
                continue
            }
            do {
                let packet = try MeshPacket.decode(frame)
                printJSON(WireJSON.json(for: packet, frame: frame, signingKey: key), compact: args.has("--compact") || input == "-")
            } catch {
                printError("error: frame rejected: \(error.name): \(error)")
                failures += 1
            }
        }
        if failures > 0 { throw .failure("\(failures) frame(s) did not decode") }
    }

    private static func encode(_ args: ParsedArguments) throws(CommandExit) {
        let input = args.positionals[0]
        var signer: Ed25519PrivateKey?
        if let seed = args.value("--sign-with") {
            guard let bytes = try? Hex.decode(seed, expectedCount: 32), let key = try? Ed25519PrivateKey(seed: bytes) else {
                throw .usage("--sign-with must be a 32-byte seed in hex")
            }
            signer = key
        }
        let documents: [[UInt8]]
        if input == "-" {
            let bytes = try readStdin()
            do {
                documents = try JSONDocuments.split(bytes)
            } catch {
                throw .usage("stdin: \(error)")
            }
        } else {
            documents = [Array(input.utf8)]
        }
        for document in documents {
            let json: JSONValue
            do {
                json = try JSONParser().parse(document)
            } catch {
                throw .usage("invalid JSON: \(error)")
            }
            var packet: MeshPacket
            do {
                packet = try WireJSON.packet(from: json, now: WallClock.nowMs())
            } catch {
                throw .usage(error.description)
            }
            if let signer {
                do {
                    packet = try packet.signed(with: signer)
                } catch {
                    throw .failure("signing failed: \(error)")
                }
            }
            do {
                print(Hex.encode(try WireJSON.frame(packet, json: json, pad: args.has("--pad"), compress: !args.has("--no-compress"))))
            } catch {
                throw .failure("cannot encode: \(error)")
            }
        }
    }

    /// All of stdin, up to ``Limits/maxStdinBytes``.
    static func readStdin() throws(CommandExit) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n == 0 { return bytes }
            if n < 0 {
                if errno == EINTR { continue }
                throw .failure("cannot read stdin (errno \(errno))")
            }
            bytes += chunk[0..<n]
            guard bytes.count <= Limits.maxStdinBytes else {
                throw .usage("stdin holds more than \(Limits.maxStdinBytes) bytes")
            }
        }
    }

    static func readStdinLines() -> [String] {
        var lines: [String] = []
        while let line = readLine(strippingNewline: true) { lines.append(line) }
        return lines
    }
}

