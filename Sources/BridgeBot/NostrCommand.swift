import BridgeApp
import BotCrypto
import BotSupport
import Bridge
import Dispatch
import Geohash
import Nostr
import NostrRelay
import RelayDirectory
import Synchronization
import WebSocketRuntime

#if canImport(Glibc)
import Glibc
import BridgeCore
#endif

/// `bitchat-bridge nostr listen|post|sign|verify`: operator tools for the internet side.
enum NostrCommand {
    static let geohashOption = OptionSpec.required("--geohash", "GH", "Channel geohash.")
    static let dataDirOption = OptionSpec.value("--data-dir", "DIR", "Data directory with the bridge identity (the channel key).")
    /// Options of the two commands that talk to relays.
    static let relayOptions: [OptionSpec] = [
        .value("--relay", "URL", "Relay URL (repeatable); default: the 5 closest from the relay directory."),
        .value("--directory", "FILE", "relays.json to choose relays from."),
        .value("--ca-file", "FILE", "Trust this PEM CA bundle instead of the system store (wss:// tests)."),
        .flag("--auth", "Answer NIP-42 AUTH challenges with the channel key (off: AUTH ignored, as phones do)."),
    ]
    static let exitCodes = "Exit codes: 0 success, 64 usage, 1 failure"

    static let group = CommandGroup(
        name: "nostr",
        summary: "Listen to, post to, sign and verify Nostr geohash events.",
        subcommands: [
            Subcommand("listen", CommandSpec(
                path: "nostr listen",
                summary: "Subscribe to a geohash channel (or a rendezvous ring) and print verified events as JSON lines.",
                options: [geohashOption,
                          .flag("--cell", "Subscribe to the bridge rendezvous (#r of the 6-char cell and its 8 neighbours)."),
                          .value("--count", "N", "Exit after N verified events."),
                          .value("--seconds", "S", "Exit after S seconds.")]
                    + relayOptions + [dataDirOption],
                details: """
                    One JSON line per verified event ({"type":"event",…}), per dropped frame or event
                    ({"type":"rejected","reason":…}) and per connection change. Ctrl-C stops cleanly.
                    \(exitCodes).
                    """), run: listen),
            Subcommand("post", CommandSpec(
                path: "nostr post",
                summary: "Sign a channel message with the channel key, mine its proof of work and publish it.",
                positionals: [.text("TEXT")],
                options: [geohashOption,
                          .value("--nickname", "NAME", "The n tag (omitted when empty)."),
                          .value("--pow", "BITS", "NIP-13 target (default \(NostrPoW.defaultTarget))."),
                          .value("--seconds", "S", "Wait S seconds for the relays' OKs (default 10).")]
                    + relayOptions + [dataDirOption],
                details: "Prints the published event, then one line per relay OK. \(exitCodes) (no relay accepted)."),
                run: post),
            Subcommand("sign", CommandSpec(
                path: "nostr sign",
                summary: "Sign unsigned events (one JSON object per line on stdin) with the channel key.",
                options: [geohashOption, .value("--pow", "BITS", "Mine to this NIP-13 target first (default: none)."), dataDirOption],
                note: "< unsigned-events.jsonl",
                details: "pubkey may be omitted (it is the channel key's). \(exitCodes) (a line not signed)."),
                run: sign),
            Subcommand("verify", CommandSpec(
                path: "nostr verify",
                summary: "Verify events (one JSON object per line on stdin): id, signature and proof of work.",
                options: [],
                note: "< events.jsonl",
                details: "One line per event: {\"line\":N,\"valid\":…}. \(exitCodes) (an invalid event)."),
                run: verify),
        ])

    // MARK: Helpers

    static func geohash(_ args: ParsedArguments) throws(CommandExit) -> GeohashCell {
        guard let text = args.value("--geohash") else { throw .usage("--geohash GH is required") }
        return try GeohashCommand.parseCell(text)
    }

    static func relays(_ args: ParsedArguments, cell: GeohashCell) throws(CommandExit) -> [String] {
        let explicit = args.allValues("--relay")
        for url in explicit {
            do { _ = try WebSocketEndpoint(url: url) } catch { throw .usage("\(error)") }
        }
        if !explicit.isEmpty { return explicit }
        let (directory, _) = try RelaysCommand.loadDirectory(option: args.value("--directory"))
        let urls = directory.closest(to: cell, count: 5).map(\.entry.url)
        guard !urls.isEmpty else { throw .failure("the relay directory has no relays") }
        return urls
    }

    static func intOption(_ args: ParsedArguments, _ name: String, range: ClosedRange<Int>) throws(CommandExit) -> Int? {
        guard let text = args.value(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw .usage("\(name) '\(text)' must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    static func channelKey(_ args: ParsedArguments, geohash: GeohashCell) throws(CommandExit) -> SchnorrSecretKey {
        let keys = try KeysCommand.load(KeyStore(dataDirectory: Paths.dataDirectory(option: args.value("--data-dir")))).keys
        do {
            return try keys.channelKey(geohash: geohash.string)
        } catch {
            throw .failure("\(error)")
        }
    }

    static func unixNow() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec)
    }

    static func makePool(_ args: ParsedArguments, urls: [String], authKey: SchnorrSecretKey?) throws(CommandExit) -> RelayPool {
        let logger = Logger(label: "nostr", level: ProcessEnvironment.value("BRIDGE_LOG_LEVEL").flatMap(LogLevel.init(name:)) ?? .notice)
        do {
            return try RelayPool(
                relayURLs: urls,
                configuration: .init(authKey: authKey, jitterUnit: { Double.random(in: 0..<1) }),
                webSocket: .init(caFile: args.value("--ca-file"), userAgent: "bitchat-bridge/\(BridgeCommandLine.version)"),
                logger: logger, unixNow: { unixNow() })
        } catch {
            throw .usage("\(error)")
        }
    }

    /// Runs `body` as a task until it returns or SIGINT/SIGTERM cancels it.
    static func runUntilSignal(_ body: @escaping @Sendable () async -> Int32) -> Int32 {
        let result = Mutex<Int32>(0)
        let done = DispatchSemaphore(value: 0)
        let task = Task {
            let code = await body()
            result.withLock { $0 = code }
            done.signal()
        }
        let signals = SignalHandler(ProcessSignal.termination) { _ in task.cancel() }
        done.wait()
        signals.cancel()
        return result.withLock { $0 }
    }

    static func printLine(_ value: JSONValue) {
        print(JSONWriter.compact(value))
        fflush(nil)
    }

    // MARK: listen

    static func listen(_ args: ParsedArguments) throws(CommandExit) {
        let cell = try geohash(args)
        let count = try intOption(args, "--count", range: 1...1_000_000)
        let seconds = try intOption(args, "--seconds", range: 1...86_400 * 365)
        let rendezvous = args.has("--cell")
        if rendezvous, cell.precision != 6 { throw .usage("--cell needs a 6-character geohash") }
        let urls = try relays(args, cell: cell)
        let authKey = args.has("--auth") ? try channelKey(args, geohash: cell) : nil
        let pool = try makePool(args, urls: urls, authKey: authKey)
        let subscription: String
        let filter: NostrFilter
        let lookback: Int64
        if rendezvous {
            subscription = "bridge-rendezvous"
            filter = NostrFilter(kinds: [NostrKind.ephemeralChat, NostrKind.presence], tags: ["r": cell.ring.map(\.string)], limit: 200)
            lookback = 900
        } else {
            subscription = "geo-\(cell.string)"
            filter = NostrFilter(kinds: [NostrKind.ephemeralChat, NostrKind.presence], tags: ["g": [cell.string]], limit: 200)
            lookback = 3600
        }
        pool.subscribe(id: subscription, filters: [filter], lookback: lookback)
        let code = runUntilSignal {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await pool.run() }
                if let seconds {
                    group.addTask {
                        try? await Task.sleep(for: .seconds(seconds))
                    }
                }
                group.addTask {
                    var delivered = 0
                    for await report in pool.events {
                        switch report {
                        case .event(let event, let relay, let sub):
                            delivered += 1
                            printLine(.object([
                                ("type", .string("event")), ("relay", .string(relay)), ("subscription", .string(sub)),
                                ("pow", .integer(Int64(NostrPoW.validatedDifficulty(event)))), ("event", event.jsonValue),
                            ]))
                            if let count, delivered >= count { return }
                        case .rejected(let relay, let sub, let reason, let count):
                            printLine(.object([
                                ("type", .string("rejected")), ("relay", .string(relay)),
                                ("subscription", sub.map { .string($0) } ?? .null), ("reason", .string(reason.rawValue)),
                                ("count", .integer(Int64(count))),
                            ]))
                        case .endOfStoredEvents(let sub, let fallback):
                            printLine(.object([("type", .string("eose")), ("subscription", .string(sub)),
                                               ("fallback", .bool(fallback))]))
                        case .connected(let relay):
                            printLine(.object([("type", .string("connected")), ("relay", .string(relay))]))
                        case .disconnected(let relay, let reason):
                            printLine(.object([("type", .string("disconnected")), ("relay", .string(relay)), ("reason", .string(reason))]))
                        case .connectFailed(let relay, let reason):
                            printLine(.object([("type", .string("connect_failed")), ("relay", .string(relay)), ("reason", .string(reason))]))
                        case .closed(let relay, let sub, let message):
                            printLine(.object([("type", .string("closed")), ("relay", .string(relay)),
                                               ("subscription", .string(sub)), ("message", .string(message))]))
                        case .notice(let relay, let message):
                            printLine(.object([("type", .string("notice")), ("relay", .string(relay)), ("message", .string(message))]))
                        case .closedByPool(let relay, let why, let detail):
                            printLine(.object([("type", .string("closed_by_pool")), ("relay", .string(relay)),
                                               ("reason", .string(why.rawValue)), ("detail", .string(detail))]))
                        case .ok, .publishQueueDropped: break
                        }
                    }
                }
                // The first child to finish (count reached, time up, or cancellation) ends the listen.
                await group.next()
                group.cancelAll()
            }
            let counters = pool.verifierCounters
            printError("listen: \(counters.verified) verified, \(counters.idMismatch) id mismatches, "
                + "\(counters.badSignature) bad signatures, \(counters.overBudget) over budget, "
                + "\(pool.droppedEvents) dropped by a slow consumer")
            return 0
        }
        if code != 0 { throw .failure("listen failed") }
    }

    // MARK: post

    static func post(_ args: ParsedArguments) throws(CommandExit) {
        let cell = try geohash(args)
        let text = args.positionals[0]
        guard !text.trimmingEdges(where: \.isWhitespace).isEmpty else { throw .usage("TEXT is empty") }
        let target = try intOption(args, "--pow", range: 0...NostrPoW.Limits.maxTarget) ?? NostrPoW.defaultTarget
        let seconds = try intOption(args, "--seconds", range: 1...3600) ?? 10
        let urls = try relays(args, cell: cell)
        let key = try channelKey(args, geohash: cell)
        var tags = [["g", cell.string]]
        if let nickname = args.value("--nickname")?.trimmingEdges(where: { $0.isWhitespace && !$0.isNewline }), !nickname.isEmpty {
            tags.append(["n", nickname])
        }
        let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: unixNow(), kind: NostrKind.ephemeralChat,
                                     tags: tags, content: text.trimmingEdges(where: \.isWhitespace))
        let event = try mineAndSign(unsigned, target: target, key: key)
        let pool = try makePool(args, urls: urls, authKey: args.has("--auth") ? key : nil)
        pool.publish(event)
        printLine(.object([("type", .string("published")), ("event", event.jsonValue)]))
        let code = runUntilSignal {
            await withTaskGroup(of: Int.self) { group in
                group.addTask {
                    try? await pool.run()
                    return 0
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(seconds))
                    return 0
                }
                group.addTask {
                    var answered = Set<String>()
                    var accepted = 0
                    for await report in pool.events {
                        guard case .ok(let relay, let id, let ok, let message) = report,
                            id == event.id.hex || id.isEmpty, answered.insert(relay).inserted
                        else { continue }
                        if ok { accepted += 1 }
                        printLine(.object([("type", .string("ok")), ("relay", .string(relay)),
                                           ("accepted", .bool(ok)), ("message", .string(message))]))
                        if answered.count == urls.count { break }
                    }
                    return accepted
                }
                // Stop when every relay answered, the wait is over, or on a signal; then collect.
                var accepted = await group.next() ?? 0
                group.cancelAll()
                while let more = await group.next() { accepted += more }
                return accepted > 0 ? 0 : 1
            }
        }
        guard code == 0 else { throw .failure("no relay accepted the event") }
    }

    /// Mines on a helper thread (never the relay loop), with progress on stderr for high targets.
    static func mineAndSign(_ unsigned: UnsignedEvent, target: Int, key: SchnorrSecretKey) throws(CommandExit) -> NostrEvent {
        let expected = Double(1 << min(target, 62))
        do {
            let mined = try NostrPoW.mine(unsigned, target: target, startNonce: UInt64.random(in: 0..<(1 << 48))) { attempts in
                if expected > 4_000_000, attempts % (1 << 22) == 0 {
                    printError("mining: \(attempts) attempts (≈ \(Int(expected)) expected for \(target) bits)")
                }
                return true
            }
            return try mined.event.signed(with: key)
        } catch {
            throw .failure("\(error)")
        }
    }

    // MARK: sign / verify

    static func stdinLines() -> AnyIterator<String> { AnyIterator { readLine(strippingNewline: true) } }

    static func sign(_ args: ParsedArguments) throws(CommandExit) {
        let cell = try geohash(args)
        let target = try intOption(args, "--pow", range: 0...NostrPoW.Limits.maxTarget)
        let key = try channelKey(args, geohash: cell)
        var failures = 0
        for (number, line) in stdinLines().enumerated() where !line.isEmpty {
            do throws(CommandExit) {
                var unsigned: UnsignedEvent
                do {
                    // pubkey may be omitted: it is the channel key's.
                    var value = try JSONParser(limits: .init(maxBytes: RelayMessage.Limits.maxFrameBytes, maxDepth: 8)).parse(line)
                    if case .object(var members) = value, !members.contains(where: { $0.0 == "pubkey" }) {
                        members.append(("pubkey", .string(key.publicKey.hex)))
                        value = .object(members)
                    }
                    unsigned = try UnverifiedEvent(json: value).unsigned()
                } catch {
                    throw .failure("\(error)")
                }
                guard unsigned.pubkey == key.publicKey else { throw .failure("pubkey is not this channel's key") }
                let event: NostrEvent
                if let target {
                    event = try mineAndSign(unsigned, target: target, key: key)
                } else {
                    do { event = try unsigned.signed(with: key) } catch { throw .failure("\(error)") }
                }
                printLine(event.jsonValue)
            } catch {
                failures += 1
                if case .failure(let message) = error { printError("line \(number + 1): \(message)") }
            }
        }
        if failures > 0 { throw .failure("\(failures) line(s) not signed") }
    }

    static func verify(_ args: ParsedArguments) throws(CommandExit) {
        var invalid = 0
        for (number, line) in stdinLines().enumerated() where !line.isEmpty {
            do {
                let event = try UnverifiedEvent(json: line).verified()
                printLine(.object([("line", .integer(Int64(number + 1))), ("valid", .bool(true)),
                                   ("id", .string(event.id.hex)), ("pow", .integer(Int64(NostrPoW.validatedDifficulty(event))))]))
            } catch {
                invalid += 1
                printLine(.object([("line", .integer(Int64(number + 1))), ("valid", .bool(false)),
                                   ("reason", .string(error.name)), ("detail", .string(error.description))]))
            }
        }
        if invalid > 0 { throw .failure("\(invalid) invalid event(s)") }
    }
}

extension String {
    /// Without leading and trailing characters matching `predicate` (Foundation-free: the executable links
    /// no Foundation, which would add ≈ 45 MB of ICU data to the static binary).
    fileprivate func trimmingEdges(where predicate: (Character) -> Bool) -> String {
        guard let first = firstIndex(where: { !predicate($0) }), let last = lastIndex(where: { !predicate($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
