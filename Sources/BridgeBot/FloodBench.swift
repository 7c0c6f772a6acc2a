import BridgeApp
import BotCrypto
import BotSupport
import Dispatch
import Nostr
import NostrRelay
import Synchronization
import WebSocketRuntime

#if canImport(Glibc)
import Glibc
#endif

/// `bitchat-bridge bench flood`: inbound WebSocket frames through the real relay path — a loopback
/// WebSocket server inside the bench → ``WebSocketRuntime`` (libwebsockets) → ``RelayPool`` (parse on the
/// socket thread, id + Schnorr on the verification workers, delivery in arrival order) → a consumer
/// standing in for the router — as fast as the pool takes them.
///
/// Cases: `valid` (2,000 distinct signed events round and round: verified while the relay's budget
/// lasts, then duplicates or over budget), `invalid` (valid ids with wrong signatures, and tampered
/// contents), `garbage` (frames that do not parse), and `mixed_1m` — 1,000,000 frames of all of these
/// — with the process CPU per frame of the first and the last tenth (their ratio must stay ≥ 0.9: no
/// per-frame growth, issue 14's crash 1) and RSS before, during and after; it is measured after a
/// warm-up round with a budget that does not refill, so no tenth carries more Schnorr checks than another. The relay's misbehaviour
/// allowance is off here (``RelayPoolCore/Misbehaviour/unlimited``): with it on, the pool closes such a
/// relay after its first hundred bad frames and there would be nothing left to measure.
///
/// `verify_spread`: distinct valid events with an unlimited budget, so every one is verified; the rate
/// of verified events delivered with the pool's workers on every core, beside the bare one-core
/// libsecp256k1 loop over the same events (the target is ≥ 1.6×) and the pool with one worker.
///
/// CPU is the whole process's (getrusage): the server thread, the consumer and the sampler are in it
/// too, at a constant cost per frame, so the first/last ratio is still a growth measure.
enum FloodBench {
    static let subscription = "geo-u4pruy"
    static let filter = NostrFilter(kinds: [NostrKind.ephemeralChat, NostrKind.presence], tags: ["g": ["u4pruy"]])

    static func run(_ options: BenchOptions) throws(CommandExit) -> BenchReport {
        guard HandshakeDigest.accept(key: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" else {
            throw .failure("flood bench: the WebSocket handshake digest fails RFC 6455's example")
        }
        let quick = options.quick
        var rng = SeededRandom(seed: 0x0f10_0d00)
        let keys = (0..<16).map { _ in
            try! SchnorrSecretKey(bytes: (0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
        let now = Int64(WallClock.nowSeconds())
        func signed(_ i: Int) -> NostrEvent {
            try! UnsignedEvent(pubkey: keys[i % keys.count].publicKey, createdAt: now, kind: NostrKind.ephemeralChat,
                               tags: [["g", "u4pruy"]], content: "flood \(i)")
                .signed(with: keys[i % keys.count], auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
        }
        func frame(_ event: NostrEvent) -> String { #"["EVENT","\#(subscription)",\#(event.json)]"# }
        /// `event`'s JSON with one string field replaced (a forged signature, tampered content).
        func frame(_ event: NostrEvent, replacing field: String, with value: String) -> String {
            guard case .object(let members) = event.jsonValue else { return frame(event) }
            let altered = JSONValue.object(members.map { $0.0 == field ? (field, .string(value)) : $0 })
            return #"["EVENT","\#(subscription)",\#(JSONWriter.compact(altered))]"#
        }

        let valid = (0..<(quick ? 200 : 2_000)).map { frame(signed($0)) }
        let victim = signed(999_999)
        let invalid = (0..<100).flatMap { i -> [String] in
            let other = signed(1_000_000 + i)
            return [
                frame(victim, replacing: "sig", with: other.signature.hex),  // bad signature
                frame(victim, replacing: "content", with: "tampered \(i)"),  // id mismatch
            ]
        }
        let garbage = [
            "[]", "{", #"["EVENT""#, #"["HELLO","x"]"#, #"["EVENT","\#(subscription)",{"id":"ab"#, "null",
            String(repeating: "z", count: 64), #"["EOSE",5]"#, #"["EVENT","\#(subscription)",42]"#, #"{"EVENT":1}"#,
        ]
        var mixed: [String] = []
        for i in 0..<250 {
            mixed += [valid[i % valid.count], invalid[i % invalid.count], garbage[i % garbage.count], valid[(i * 7) % valid.count]]
        }

        var report = BenchReport(bench: "flood")
        let count = quick ? 20_000 : 300_000
        for (name, frames) in [("valid", valid), ("invalid", invalid), ("garbage", garbage)] where !options.millionOnly {
            let result = try flood(frames: frames, count: count)
            report.add(name, result.metrics)
        }
        let million = quick ? 50_000 : 1_000_000
        // Measured after a warm-up round that verifies every distinct valid event once, with a budget that
        // does not refill: so the million frames cost the same path from the first to the last (dedup,
        // hash, budget refusal, parse failure) and no Schnorr check lands in one tenth rather than another.
        let mixedResult = try flood(
            frames: mixed, count: million, warmup: valid, budget: .init(burst: Double(valid.count), perSecond: 0))
        report.add("mixed_1m", mixedResult.metrics)
        let ratio = mixedResult.ratio
        report.notes.append(
            "mixed: CPU per frame, first tenth / last tenth = \((ratio * 100).rounded() / 100) (target ≥ 0.9: "
                + (ratio >= 0.9 ? "met" : "NOT met") + ")")
        guard !options.millionOnly else { return report }

        // Every core verifying, against the bare one-core loop on the same events.
        let spread = (0..<(quick ? 2_000 : 30_000)).map { signed(10_000_000 + $0) }
        let bareStart = ContinuousClock.now
        let bareCPUStart = processCPUSeconds()
        var bareValid = 0
        for event in spread {
            if let key = try? XOnlyPublicKey(bytes: event.pubkey.bytes), key.isValidSignature(event.signature.bytes, for: event.id.bytes) {
                bareValid += 1
            }
        }
        let bareRate = Double(spread.count) / seconds(ContinuousClock.now - bareStart)
        let bareCPU = (processCPUSeconds() - bareCPUStart) / Double(spread.count)
        let all = try verifiedRate(spread.map(frame), workers: nil)
        let parallelRate = bareParallelRate(spread, threads: all.workers)
        let one = try verifiedRate(spread.map(frame), workers: 1)
        report.add("verify_spread", [
            ("events", Double(spread.count)), ("bare_valid", Double(bareValid)), ("bare_verify_per_s", bareRate.rounded()),
            ("bare_cpu_per_event_us", bareCPU * 1e6),
            ("workers", Double(all.workers)), ("verified_per_s", all.rate.rounded()), ("ratio_to_bare", all.rate / bareRate),
            ("cpu_per_verified_event_us", all.cpuPerEvent * 1e6),
            // What the rate ratio would be with `workers` cores free for the pool: CPU per event, not wall time.
            ("ratio_to_bare_if_cores_free", Double(all.workers) * bareCPU / all.cpuPerEvent),
            // The same bare loop on `workers` threads at once: what this machine's cores give any parallel
            // verifier (a shared or busy host gives less than `workers` ×).
            ("bare_parallel_verify_per_s", parallelRate.rounded()), ("bare_parallel_ratio_to_bare", parallelRate / bareRate),
            ("ratio_to_bare_parallel", all.rate / parallelRate),
            ("one_worker_verified_per_s", one.rate.rounded()), ("one_worker_ratio_to_bare", one.rate / bareRate),
            ("stream_dropped", Double(all.streamDropped)),
        ])
        report.notes.append(
            "verify_spread: \(all.workers) workers deliver \(Int(all.rate.rounded())) verified events/s = "
                + "\((all.rate / bareRate * 100).rounded() / 100)× the bare one-core verify rate (moonshot ≥ 1.6×); "
                + "by CPU per event, \((Double(all.workers) * bareCPU / all.cpuPerEvent * 100).rounded() / 100)× with \(all.workers) free cores; "
                + "the bare loop itself on \(all.workers) threads reaches \((parallelRate / bareRate * 100).rounded() / 100)× here")
        report.notes.append("misbehaviour allowance off in this bench (a real pool closes a relay after 100 bad frames)")
        return report
    }

    struct FloodResult {
        var metrics: [(String, Double)]
        var ratio: Double
    }

    /// `warmup` once (not measured), then `count` frames cycling through `frames`, then the stop of the pool.
    static func flood(
        frames: [String], count: Int, warmup: [String] = [], budget: EventVerifier.Configuration = .init()
    ) throws(CommandExit) -> FloodResult {
        let rssBefore = SpamBench.residentBytes()
        let server = try LoopbackFloodServer()
        server.start(
            prefix: warmup.map { WebSocketFrame.text(Array($0.utf8)) }, frames: frames.map { WebSocketFrame.text(Array($0.utf8)) },
            count: count)
        let url = "ws://127.0.0.1:\(server.port)"
        let session = try PoolSession(url: url, budget: budget, workers: nil)
        var samples: [Sample] = []
        var rssFirstTenth = rssBefore
        let deadline = ContinuousClock.now + .seconds(300)
        while true {
            let stats = session.pool.stats(url)
            let received = (stats?.framesReceived ?? 0) - warmup.count
            samples.append(Sample(frames: received, cpu: processCPUSeconds(), wall: ContinuousClock.now))
            if rssFirstTenth == rssBefore, received >= count / 10 { rssFirstTenth = SpamBench.residentBytes() }
            if received >= count { break }
            if ContinuousClock.now > deadline || session.ended {
                server.close()
                session.stop()
                throw .failure("flood bench: \(received) of \(count) frames arrived (connection: \(stats?.lastFailure ?? "up"))")
            }
            usleep(2_000)
        }
        let rssFlooded = SpamBench.residentBytes()
        let stats = session.pool.stats(url)
        let stopStart = ContinuousClock.now
        let consumed = session.stop()
        let stopSeconds = seconds(ContinuousClock.now - stopStart)
        server.close()
        let rssAfter = SpamBench.residentBytes()

        let tenth = count / 10
        // From the first frame, so connecting and subscribing are not counted in the first tenth.
        let first = (cpu(at: tenth, samples) - cpu(at: 1, samples)) / Double(tenth - 1)
        let last = (cpu(at: count, samples) - cpu(at: count - tenth, samples)) / Double(tenth)
        let tenths = (0..<10).map { k in
            (cpu(at: (k + 1) * tenth, samples) - cpu(at: max(1, k * tenth), samples)) / Double(tenth - (k == 0 ? 1 : 0))
        }
        let start = wall(at: 1, samples)
        let elapsed = seconds(wall(at: count, samples) - start)
        var metrics: [(String, Double)] = [
            ("frames", Double(count)), ("frames_per_s", (Double(count) / elapsed).rounded()),
            ("cpu_per_frame_first_tenth_us", first * 1e6), ("cpu_per_frame_last_tenth_us", last * 1e6),
            ("cpu_ratio_first_to_last", first / last),
            ("cpu_per_frame_min_tenth_us", (tenths.min() ?? 0) * 1e6), ("cpu_per_frame_max_tenth_us", (tenths.max() ?? 0) * 1e6),
            ("rss_before_bytes", rssBefore), ("rss_first_tenth_bytes", rssFirstTenth), ("rss_flooded_bytes", rssFlooded),
            ("rss_after_stop_bytes", rssAfter), ("stop_ms", stopSeconds * 1000),
            ("delivered", Double(stats?.delivered ?? 0)), ("duplicates", Double(stats?.duplicates ?? 0)),
            ("consumed", Double(consumed)), ("schnorr_checks", Double(stats?.verification.schnorrChecks ?? 0)),
        ]
        for category in InboundDrop.Category.allCases {
            metrics.append(("drops_\(category.rawValue)", Double(stats?.drops(category) ?? 0)))
        }
        return FloodResult(metrics: metrics, ratio: first / last)
    }

    /// Distinct valid events with no budget limit: verified events delivered per second.
    static func verifiedRate(_ frames: [String], workers: Int?) throws(CommandExit)
        -> (rate: Double, cpuPerEvent: Double, workers: Int, streamDropped: Int)
    {
        let server = try LoopbackFloodServer()
        server.start(prefix: [], frames: frames.map { WebSocketFrame.text(Array($0.utf8)) }, count: frames.count)
        let url = "ws://127.0.0.1:\(server.port)"
        let session = try PoolSession(url: url, budget: .init(burst: 1e12, perSecond: 1e12), workers: workers)
        var started: ContinuousClock.Instant?
        var cpuStart = 0.0
        let deadline = ContinuousClock.now + .seconds(300)
        var delivered = 0
        while delivered < frames.count {
            let stats = session.pool.stats(url)
            if started == nil, (stats?.framesReceived ?? 0) > 0 {
                started = .now
                cpuStart = processCPUSeconds()
            }
            delivered = stats?.delivered ?? 0
            if ContinuousClock.now > deadline || session.ended {
                server.close()
                session.stop()
                throw .failure("flood bench: \(delivered) of \(frames.count) events verified in time")
            }
            usleep(2_000)
        }
        let elapsed = seconds(ContinuousClock.now - (started ?? .now))
        let cpuPerEvent = (processCPUSeconds() - cpuStart) / Double(frames.count)
        let count = session.pool.verificationWorkerCount
        let dropped = session.pool.droppedEvents
        session.stop()
        server.close()
        return (Double(frames.count) / elapsed, cpuPerEvent, count, dropped)
    }

    /// The bare verify loop split over `threads` threads at once; events per second overall.
    static func bareParallelRate(_ events: [NostrEvent], threads: Int) -> Double {
        let done = DispatchSemaphore(value: 0)
        let start = ContinuousClock.now
        for part in 0..<threads {
            let slice = Array(events[(events.count * part / threads)..<(events.count * (part + 1) / threads)])
            let started = OwnerThread.detach {
                for event in slice {
                    if let key = try? XOnlyPublicKey(bytes: event.pubkey.bytes) {
                        _ = key.isValidSignature(event.signature.bytes, for: event.id.bytes)
                    }
                }
                done.signal()
            }
            if !started { done.signal() }
        }
        for _ in 0..<threads { done.wait() }
        return Double(events.count) / seconds(ContinuousClock.now - start)
    }

    struct Sample {
        let frames: Int
        let cpu: Double
        let wall: ContinuousClock.Instant
    }

    /// Linear interpolation of the samples at `frames`.
    static func cpu(at frames: Int, _ samples: [Sample]) -> Double {
        interpolate(frames, samples) { $0.cpu }
    }

    static func wall(at frames: Int, _ samples: [Sample]) -> ContinuousClock.Instant {
        let base = samples[0].wall
        return base + .nanoseconds(Int64(interpolate(frames, samples) { seconds($0.wall - base) } * 1e9))
    }

    private static func interpolate(_ frames: Int, _ samples: [Sample], _ value: (Sample) -> Double) -> Double {
        // The last sample still before `frames`, and the first at or past it.
        guard let after = samples.firstIndex(where: { $0.frames >= frames }) else { return value(samples[samples.count - 1]) }
        guard after > 0, samples[after].frames > samples[after - 1].frames else { return value(samples[after]) }
        let (a, b) = (samples[after - 1], samples[after])
        let share = Double(frames - a.frames) / Double(b.frames - a.frames)
        return value(a) + (value(b) - value(a)) * share
    }

    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

/// One live pool subscribed to the channel, with a consumer counting events (the router's stand-in).
private final class PoolSession: Sendable {
    let pool: RelayPool
    private let runner: Task<Void, Never>
    private let consumer: Task<Int, Never>
    private final class Flag: Sendable {
        let raised = Atomic<Bool>(false)
    }
    private let finished = Flag()

    init(url: String, budget: EventVerifier.Configuration, workers: Int?) throws(CommandExit) {
        do {
            pool = try RelayPool(
                relayURLs: [url],
                configuration: .init(verification: budget, misbehaviour: .unlimited, jitterUnit: { 0.5 }),
                webSocket: .init(), logger: Logger(label: "bench", level: .error), unixNow: { Int64(WallClock.nowSeconds()) },
                verificationWorkers: workers)
        } catch {
            throw .failure("flood bench: \(error)")
        }
        pool.subscribe(id: FloodBench.subscription, filters: [FloodBench.filter], lookback: nil)
        let pool = pool
        let finished = finished
        runner = Task {
            try? await pool.run()
            finished.raised.store(true, ordering: .releasing)
        }
        consumer = Task {
            var events = 0
            for await report in pool.events {
                if case .event = report { events += 1 }
            }
            return events
        }
    }

    /// The pool's run ended by itself (it should not before ``stop()``).
    var ended: Bool { finished.raised.load(ordering: .acquiring) }

    /// Stops the pool; returns the events the consumer saw.
    @discardableResult
    func stop() -> Int {
        runner.cancel()
        let result = Mutex(0)
        let done = DispatchSemaphore(value: 0)
        let consumer = consumer
        Task {
            let events = await consumer.value
            result.withLock { $0 = events }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 }
    }
}

/// Server-to-client WebSocket frames (RFC 6455 §5.2: FIN set, unmasked).
enum WebSocketFrame {
    static func text(_ payload: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = [0x81]
        switch payload.count {
        case ..<126: frame.append(UInt8(payload.count))
        case ..<65_536: frame += [126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
        default:
            frame.append(127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8(truncatingIfNeeded: payload.count >> shift)) }
        }
        return frame + payload
    }
}

/// A one-connection loopback WebSocket server on its own thread: completes the handshake, writes the
/// frames round and round until `count` are out, then reads until the client leaves. Blocking sockets;
/// the client's back-pressure paces it.
private final class LoopbackFloodServer: @unchecked Sendable {
    let port: Int
    /// Only closed by ``close()`` after the serving thread has stopped using it, or to unblock `accept`.
    private let listener: Int32
    private let client = Mutex<Int32>(-1)
    private let closed = Atomic<Bool>(false)

    init() throws(CommandExit) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .failure("flood bench: socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, listen(fd, 4) == 0 else {
            Glibc.close(fd)
            throw .failure("flood bench: cannot listen on 127.0.0.1")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func start(prefix: [[UInt8]], frames: [[UInt8]], count: Int) {
        let started = OwnerThread.detach { [self] in serve(prefix: prefix, frames: frames, count: count) }
        if !started { close() }
    }

    /// Ends the connection and the listener (the client sees the close).
    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        client.withLock { fd in
            if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
    }

    private func serve(prefix: [[UInt8]], frames: [[UInt8]], count: Int) {
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return }
        client.withLock { $0 = fd }
        defer {
            client.withLock { $0 = -1 }
            Glibc.close(fd)
        }
        guard handshake(fd), writeAll(fd, prefix.flatMap { $0 }) else { return }
        let round = frames.flatMap { $0 }
        var sent = 0
        while sent + frames.count <= count {
            guard writeAll(fd, round) else { return }
            sent += frames.count
        }
        while sent < count {
            guard writeAll(fd, frames[sent % frames.count]) else { return }
            sent += 1
        }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while read(fd, &buffer, buffer.count) > 0 {}
    }

    private func handshake(_ fd: Int32) -> Bool {
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while !request.suffix(4).elementsEqual(end) {
            let n = read(fd, &buffer, buffer.count)
            guard n > 0, request.count < 16_384 else { return false }
            request += buffer[0..<n]
        }
        let text = String(decoding: request, as: UTF8.self)
        let prefix = "sec-websocket-key:"
        guard let line = text.split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix(prefix) }) else { return false }
        let key = String(line.dropFirst(prefix.count).filter { !$0.isWhitespace })
        let response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(HandshakeDigest.accept(key: String(key)))\r\n\r\n"
        return writeAll(fd, Array(response.utf8))
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return false }
            offset += n
        }
        return true
    }
}

/// `Sec-WebSocket-Accept` (RFC 6455 §4.2.2): base64(SHA-1(key + GUID)). SHA-1 (FIPS 180-4) written out
/// here because the handshake of this loopback test server is its only use in the project (nothing
/// security-relevant rests on it); checked against the RFC's example at the start of the bench.
enum HandshakeDigest {
    static func accept(key: String) -> String {
        base64(sha1(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)))
    }

    static func sha1(_ message: [UInt8]) -> [UInt8] {
        var h: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var padded = message + [0x80]
        while padded.count % 64 != 56 { padded.append(0) }
        let bits = UInt64(message.count) * 8
        for shift in stride(from: 56, through: 0, by: -8) { padded.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        var w = [UInt32](repeating: 0, count: 80)
        for chunk in stride(from: 0, to: padded.count, by: 64) {
            for t in 0..<16 {
                w[t] = padded[chunk + 4 * t..<chunk + 4 * t + 4].reduce(0) { $0 << 8 | UInt32($1) }
            }
            for t in 16..<80 { w[t] = rotate(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1) }
            var (a, b, c, d, e) = (h[0], h[1], h[2], h[3], h[4])
            for t in 0..<80 {
                let (f, k): (UInt32, UInt32) =
                    switch t {
                    case 0..<20: ((b & c) | (~b & d), 0x5A82_7999)
                    case 20..<40: (b ^ c ^ d, 0x6ED9_EBA1)
                    case 40..<60: ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                    default: (b ^ c ^ d, 0xCA62_C1D6)
                    }
                let next = rotate(a, 5) &+ f &+ e &+ k &+ w[t]
                (e, d, c, b, a) = (d, c, rotate(b, 30), a, next)
            }
            h[0] &+= a
            h[1] &+= b
            h[2] &+= c
            h[3] &+= d
            h[4] &+= e
        }
        return h.flatMap { word in stride(from: 24, through: 0, by: -8).map { UInt8(truncatingIfNeeded: word >> UInt32($0)) } }
    }

    private static func rotate(_ x: UInt32, _ n: UInt32) -> UInt32 { x << n | x >> (32 - n) }

    static func base64(_ bytes: [UInt8]) -> String { Base64.encode(bytes) }
}
