import BridgeApp
import BitchatWire
import BotCrypto
import BotSupport
import Bridge
import Geohash
import Nostr
import SpamFilter
import BridgeCore

/// `bitchat-bridge bench reach`: a busy site, scripted — 600 channel messages in 10 minutes from 300 senders
/// over 3 channel levels, a few chatty senders among them — through the real ``BridgeRouter`` (its judge) and
/// ``AirtimeMachine`` (its schedule) at the phones' budgets, first-in-first-out and the fair scheduler side by
/// side on the same posts (issue 16's benchmark).
///
/// Each level is watched by a model iPhone viewing exactly that level, with the rules iOS applies to what a
/// gateway broadcasts (NOSTR-GEO §9: a `fromGateway` event is shown only on the level the phone is viewing,
/// then goes through the channel pipeline of §5.5): `MessageRateLimiter` (§5.5 step 14: per sender 5, then
/// +1 token/s; per normalised content 3, then +0.5/s, both on arrival) and the ported spam filter where it
/// ships (`shared/seeds/spam-filter-pr.txt`: a burst of 6 then 1 per 10 s, 1,200 characters per minute — the
/// real `SpamFilter` module, on message timestamps as the port runs it). "Delivered" is what those phones
/// show. Figures: delivered fraction of the posts, distinct senders delivered, senders starved (posted, passed
/// the bridge's own judgement, nothing shown), Jain's fairness index over senders of delivered ÷ the
/// max-min fair share of what was delivered (1 = every sender got exactly its fair share), and the time
/// from relay to air (p50, p95) for each kind of sender (issue 34): the crowd (first contact), **staff** (3 of the
/// senders with two lines are on the operator's allow list, `protected`) and **regulars** (6 more of them had a
/// line on the air in a quiet warm-up, ``warmup``, before the busy ten minutes, so the scheduler counts them
/// established). Fairness and starvation are the crowd's: staff and regulars go first by design.
enum ReachBench {
    enum Kind: String, CaseIterable {
        case crowd, staff, regular
    }

    struct Post {
        let at: Double
        let sender: Int
        let level: Int
        let event: NostrEvent
        var kind: Kind = .crowd
    }

    struct Scenario {
        var posts: [Post]
        var senders: Int
        var levels: [GeohashCell]
        var duration: Double
    }

    /// The quiet part before the busy one: the regulars' first lines go on the air there and are an
    /// establishment period (``AirtimeSettings/establishedAfter``) old when the crowd arrives.
    static let warmup = 620.0
    static let staffSenders = 3
    static let regularSenders = 6

    /// Phones' receive-side budgets (NOSTR-GEO §5.5 step 14), for the model iPhone.
    enum PhoneLimits {
        static let senderCapacity = 5.0
        static let senderPerSecond = 1.0
        static let contentCapacity = 3.0
        static let contentPerSecond = 0.5
    }

    static let base = 1_750_000_000.0
    /// The downlink queue bound before issue 16 (`BridgeLimits.maxPendingDownlinks`).
    static let fifoQueue = 30

    /// 300 senders (`quick`: 60), 5 chatty ones posting 40 each (`quick`: 2 × 20), the rest 1 or 2 each, at
    /// uniformly random moments over 10 minutes (`quick`: 2), each sender on one of 3 levels.
    static func scenario(quick: Bool) -> Scenario {
        var rng = SeededRandom(seed: 0x5eac_0016)
        let senders = quick ? 60 : 300
        let total = quick ? 120 : 600
        let chatty = quick ? 2 : 5
        let chattyPosts = quick ? 20 : 40
        let duration = quick ? 120.0 : 600.0
        let cell = try! GeohashCell("u4pruy")
        let levels = [cell.truncated(to: 5), cell, try! GeohashCell("u4pruy7")]
        // Post counts: chatty first, then the quiet ones share the rest (1 each, a second for as many as fit).
        var counts = [Int](repeating: chattyPosts, count: chatty)
        let quiet = senders - chatty
        let rest = total - chatty * chattyPosts
        counts += (0..<quiet).map { $0 < rest - quiet ? 2 : 1 }
        let words = SpamBench.wordList(using: &rng)
        let keys = (0..<senders).map { _ in
            try! SchnorrSecretKey(bytes: (0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
        // Among the quiet senders with two lines: the first few are staff, the next few regulars.
        func kind(_ sender: Int) -> Kind {
            switch sender - chatty {
            case 0..<staffSenders: .staff
            case staffSenders..<staffSenders + regularSenders: .regular
            default: .crowd
            }
        }
        var posts: [Post] = []
        func post(_ sender: Int, _ n: Int, at: Double, using rng: inout SeededRandom) {
            let level = sender % levels.count
            let text = (0..<Int.random(in: 3...14, using: &rng)).map { _ in words[Int.random(in: 0..<words.count, using: &rng)] }
                .joined(separator: " ") + " \(n)"
            let event = try! UnsignedEvent(
                pubkey: keys[sender].publicKey, createdAt: Int64(base + at), kind: NostrKind.ephemeralChat,
                tags: [["g", levels[level].string], ["n", "user\(sender)"]], content: text
            ).signed(with: keys[sender], auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
            posts.append(Post(at: at, sender: sender, level: level, event: event, kind: kind(sender)))
        }
        for (sender, count) in counts.enumerated() {
            for n in 0..<count {
                post(sender, n, at: warmup + Double(UInt64.random(in: 0..<UInt64(duration * 1000), using: &rng)) / 1000, using: &rng)
            }
        }
        // The regulars' warm-up lines, from a stream of their own (the busy part's posts are the same without them).
        var extra = SeededRandom(seed: 0x5eac_0034)
        for (n, sender) in (chatty + staffSenders..<chatty + staffSenders + regularSenders).enumerated() {
            post(sender, -1, at: Double(n) * 5, using: &extra)
        }
        posts.sort { $0.at < $1.at }
        return Scenario(posts: posts, senders: senders, levels: levels, duration: duration)
    }

    struct Outcome {
        var passedJudge = 0
        var aired = 0
        var delivered = 0
        var hiddenByPhones = 0
        var queueDrops = 0
        var deliveredPerSender: [Int: Int] = [:]
        var demandPerSender: [Int: Int] = [:]
        /// Relay → air of each carrier in the busy part, by kind of sender.
        var latencies: [Kind: [Double]] = [:]
        /// With the text mirror: lines aired, shown by the model Android phone, and per sender.
        var mirrorAired = 0
        var androidDelivered = 0
        var androidPerSender: [Int: Int] = [:]
        var androidDemand: [Int: Int] = [:]
    }

    /// A model iPhone viewing one level (see the type's comment).
    struct Phone {
        let level: String
        var senderBuckets: [String: (tokens: Double, at: Double)] = [:]
        var contentBuckets: [String: (tokens: Double, at: Double)] = [:]
        var filter = AdmissionPolicy(config: SpamFilterConfig())

        static func take(_ buckets: inout [String: (tokens: Double, at: Double)], _ key: String, capacity: Double, rate: Double, now: Double) -> Bool {
            let state = buckets[key] ?? (capacity, now)
            let tokens = min(capacity, state.tokens + (now - state.at) * rate)
            guard tokens >= 1 else {
                buckets[key] = (tokens, now)
                return false
            }
            buckets[key] = (tokens - 1, now)
            return true
        }

        /// Whether the phone shows `event`, broadcast for `geohash` at `now`.
        mutating func shows(_ event: NostrEvent, geohash: String, now: Double) -> Bool {
            guard geohash == level else { return false }
            let normalised = event.content.lowercased().split(whereSeparator: \.isWhitespace).joined(separator: " ").prefix(256)
            guard Self.take(&senderBuckets, event.pubkey.hex, capacity: PhoneLimits.senderCapacity, rate: PhoneLimits.senderPerSecond, now: now),
                Self.take(&contentBuckets, String(normalised), capacity: PhoneLimits.contentCapacity, rate: PhoneLimits.contentPerSecond, now: now)
            else { return false }
            let verdict = filter.judge(
                SpamCandidate(
                    senderKey: event.pubkey.hex, messageID: event.id.hex, timestamp: Double(event.createdAt),
                    content: .text(event.content), direction: .nostrToMesh),
                now: now)
            return verdict.outcome == .accepted
        }
    }

    /// Runs the scenario through a router with `discipline`, ticking every 0.1 s until 2 minutes after the
    /// last post (the queue drains).
    static func simulate(_ scenario: Scenario, discipline: AirtimeDiscipline, maxPending: Int? = nil, mirror: Bool = false) -> Outcome {
        var limits = BridgeLimits()
        limits.airtime.discipline = discipline
        if let maxPending { limits.airtime.maxPending = maxPending }
        let cell = scenario.levels[1]
        let judge = BridgeJudge(settings: .init(channel: cell.string), policy: AdmissionPolicy(config: SpamFilterConfig()))
        var router = BridgeRouter(
            settings: .init(channel: cell, rendezvousCell: nil, mirrorDownlink: mirror, limits: limits, servedChannels: scenario.levels),
            ownKeys: [], rendezvousKey: nil, judge: judge, clockOrigin: .now)
        var airtime = AirtimeMachine(limits: limits)
        var phones = scenario.levels.map { Phone(level: $0.string) }
        // The model Android phone (Android main: no carriers; the ported spam filter per sender — each author
        // speaks through a persona of its own, `PersonaBook`). It sees the mirror's lines of the configured
        // channel, whose posters are its demand.
        var android = AdmissionPolicy(config: SpamFilterConfig())
        var rng = SeededRandom(seed: 0x41c0_0016)
        var index: [EventID: Int] = [:]
        for (i, post) in scenario.posts.enumerated() { index[post.event.id] = i }
        var outcome = Outcome()
        var next = 0
        let steps = Int((warmup + scenario.duration + 150) * 10)
        for step in 0...steps {
            let t = Double(step) / 10
            while next < scenario.posts.count, scenario.posts[next].at <= t {
                let post = scenario.posts[next]
                let before = router.counters.relayAccepted.total
                let routed = router.relayEvent(
                    post.event, now: base + post.at, random: Double(rng.next() >> 11) / Double(1 << 53), protected: post.kind == .staff)
                for case .downlink(let offer) in routed { airtime.offer(offer, now: base + post.at) }
                if router.counters.relayAccepted.total > before, post.kind == .crowd {
                    outcome.demandPerSender[post.sender, default: 0] += 1
                    if mirror, post.level == 1 { outcome.androidDemand[post.sender, default: 0] += 1 }
                }
                next += 1
            }
            for action in airtime.tick(router: &router, now: base + t) {
                if case .broadcast(.text(let text, _, _), let id) = action, let i = index[id] {
                    let post = scenario.posts[i]
                    guard post.kind == .crowd else { continue }
                    outcome.mirrorAired += 1
                    let verdict = android.judge(
                        SpamCandidate(
                            senderKey: post.event.pubkey.hex, messageID: id.hex, timestamp: base + t, content: .text(text),
                            direction: .nostrToMesh),
                        now: base + t)
                    if verdict.outcome == .accepted {
                        outcome.androidDelivered += 1
                        outcome.androidPerSender[post.sender, default: 0] += 1
                    }
                    continue
                }
                guard case .broadcast(.carrier(let payload), let id) = action, let i = index[id] else { continue }
                let post = scenario.posts[i]
                if post.at >= warmup { outcome.latencies[post.kind, default: []].append(t - post.at) }
                guard post.kind == .crowd else { continue }
                outcome.aired += 1
                var shown = false
                for p in phones.indices where phones[p].shows(post.event, geohash: payload.geohash, now: base + t) { shown = true }
                if shown {
                    outcome.delivered += 1
                    outcome.deliveredPerSender[post.sender, default: 0] += 1
                } else {
                    outcome.hiddenByPhones += 1
                }
            }
        }
        outcome.passedJudge = router.counters.relayAccepted.total
        outcome.queueDrops = airtime.drops.total
        return outcome
    }

    /// Max-min fair shares of `capacity` over `demands` (water-filling).
    static func fairShares(_ demands: [Int: Int], capacity: Double) -> [Int: Double] {
        var shares: [Int: Double] = [:]
        var left = capacity
        var open = demands.sorted { $0.value < $1.value }
        while !open.isEmpty {
            let level = left / Double(open.count)
            let (sender, demand) = open[0]
            if Double(demand) <= level {
                shares[sender] = Double(demand)
                left -= Double(demand)
                open.removeFirst()
            } else {
                for (s, _) in open { shares[s] = level }
                break
            }
        }
        return shares
    }

    /// Jain's index over senders of delivered ÷ max-min fair share of the delivered total.
    static func jain(_ outcome: Outcome) -> Double {
        let shares = fairShares(outcome.demandPerSender, capacity: Double(outcome.delivered))
        let x = shares.compactMap { sender, share in share > 0 ? Double(outcome.deliveredPerSender[sender] ?? 0) / share : nil }
        let sum = x.reduce(0, +)
        let squares = x.reduce(0) { $0 + $1 * $1 }
        return squares > 0 ? sum * sum / (Double(x.count) * squares) : 0
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
    }

    static func run(_ options: BenchOptions) throws(CommandExit) -> BenchReport {
        let scenario = scenario(quick: options.quick)
        let crowdPosts = scenario.posts.filter { $0.kind == .crowd }.count
        let busyPosts = scenario.posts.filter { $0.at >= warmup }.count
        var report = BenchReport(bench: "reach")
        var results: [String: (outcome: Outcome, distinct: Int, starved: Int, fairness: Double)] = [:]
        // `fifo`: the bridge before issue 16 (oldest first, a queue of 30, oldest dropped) on the same budget;
        // `fifo_same_queue`: first-in-first-out with the scheduler's queue bound, so the queue's size is not
        // what is being compared; `scheduler`: the default fair discipline.
        // `scheduler_mirror`: the shipped default, the text mirror on — each line of the configured channel is
        // also a persona's line for Android phones, under the same budget.
        let cases: [(String, AirtimeDiscipline, Int?, Bool)] = [
            ("fifo", .fifo, Self.fifoQueue, false), ("fifo_same_queue", .fifo, nil, false), ("scheduler", .fair, nil, false),
            ("scheduler_mirror", .fair, nil, true),
        ]
        for (name, discipline, queue, mirror) in cases {
            let outcome = simulate(scenario, discipline: discipline, maxPending: queue, mirror: mirror)
            let distinct = outcome.deliveredPerSender.count
            let starved = outcome.demandPerSender.keys.filter { outcome.deliveredPerSender[$0] == nil }.count
            let fairness = jain(outcome)
            results[name] = (outcome, distinct, starved, fairness)
            var figures: [(String, Double)] = [
                ("posts", Double(busyPosts)),
                ("senders", Double(scenario.senders)),
                ("crowd_posts", Double(crowdPosts)),
                ("crowd_senders", Double(outcome.demandPerSender.count)),
                ("passed_bridge_filter", Double(outcome.passedJudge)),
                ("aired", Double(outcome.aired)),
                ("hidden_by_phones", Double(outcome.hiddenByPhones)),
                ("queue_drops", Double(outcome.queueDrops)),
                ("delivered", Double(outcome.delivered)),
                ("delivered_fraction", Double(outcome.delivered) / Double(crowdPosts)),
                ("distinct_senders", Double(distinct)),
                ("starved_senders", Double(starved)),
                ("jain_fairness", fairness),
                ("relay_to_air_p50_ms", percentile(outcome.latencies[.crowd] ?? [], 0.5) * 1000),
                ("relay_to_air_p95_ms", percentile(outcome.latencies[.crowd] ?? [], 0.95) * 1000),
            ]
            for kind in [Kind.staff, .regular] {
                let latencies = outcome.latencies[kind] ?? []
                figures += [
                    ("\(kind)_aired", Double(latencies.count)),
                    ("\(kind)_relay_to_air_p50_ms", percentile(latencies, 0.5) * 1000),
                    ("\(kind)_relay_to_air_p95_ms", percentile(latencies, 0.95) * 1000),
                    ("\(kind)_relay_to_air_max_ms", (latencies.max() ?? 0) * 1000),
                ]
            }
            if mirror {
                let anyPhone = Set(outcome.deliveredPerSender.keys).union(outcome.androidPerSender.keys)
                let channelPosts = outcome.androidDemand.values.reduce(0, +)
                figures += [
                    ("mirror_aired", Double(outcome.mirrorAired)),
                    ("android_channel_posts", Double(channelPosts)),
                    ("android_delivered", Double(outcome.androidDelivered)),
                    ("android_channel_senders", Double(outcome.androidDemand.count)),
                    ("android_distinct_senders", Double(outcome.androidPerSender.count)),
                    ("distinct_senders_any_phone", Double(anyPhone.count)),
                    ("starved_senders_any_phone", Double(outcome.demandPerSender.keys.filter { !anyPhone.contains($0) }.count)),
                ]
            }
            report.add(name, figures)
        }
        let fifo = results["fifo"]!
        let sameQueue = results["fifo_same_queue"]!
        let fair = results["scheduler"]!
        let distinctRatio = Double(fair.distinct) / Double(max(1, fifo.distinct))
        report.add("scheduler_vs_fifo", [
            ("distinct_senders_ratio", distinctRatio),
            ("distinct_senders_ratio_same_queue", Double(fair.distinct) / Double(max(1, sameQueue.distinct))),
            ("delivered_ratio", Double(fair.outcome.delivered) / Double(max(1, fifo.outcome.delivered))),
            ("fairness_gain", fair.fairness - fifo.fairness),
        ])
        let met = distinctRatio >= 1.5 && fair.fairness >= 0.9 && fair.starved == 0
        report.notes.append(
            "targets: distinct senders ≥ 1.5× FIFO (\(formatted(distinctRatio))×), fairness ≥ 0.9 (\(formatted(fair.fairness))), "
                + "no sender starved (\(fair.starved)) — \(met ? "met" : "NOT met")")
        let mirrored = results["scheduler_mirror"]!
        report.notes.append(
            "shipped default (text mirror on): \(mirrored.distinct) senders shown by the iPhones (\(formatted(Double(mirrored.distinct) / Double(max(1, fifo.distinct))))× FIFO), "
                + "fairness \(formatted(mirrored.fairness)), \(mirrored.starved) starved on the iPhones; the Android phone shows "
                + "\(mirrored.outcome.androidDelivered) of \(mirrored.outcome.androidDemand.values.reduce(0, +)) channel posts from "
                + "\(mirrored.outcome.androidPerSender.count) of \(mirrored.outcome.androidDemand.count) senders — the budget is shared")
        report.notes.append(
            "one budget of \(BridgeLimits().airtime.perMinute)/min over \(scenario.levels.map(\.string).joined(separator: ", ")); phones: "
                + "one iPhone per level (MessageRateLimiter 5 then 1/s per sender, 3 then 0.5/s per content; ported spam filter)")
        return report
    }

    static func formatted(_ value: Double) -> String { "\((value * 100).rounded() / 100)" }
}
