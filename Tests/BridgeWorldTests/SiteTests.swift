import BotCrypto
import BotSupport
import Bridge
import BridgeApp
import BridgeCore
import BridgeTesting
import BotStorage
import Console
import Identity
import Nostr
import Testing

/// One site, many stages (issue 35), in the in-process world: two bridges with their own islands and data directories,
/// one relay, one operator key held by both. What a moderator does on either stage is a site record both apply.
@Suite("World: one site, two stages (site records)")
struct SiteTests {
    static let secret = [UInt8](repeating: 91, count: 32)

    static func stage(_ site: Site, _ name: String, relay: LoopbackRelay) async throws -> TestBridge {
        try await site.stage(name, relay: relay, operatorSecret: secret)
    }

    static func applied(_ bridge: TestBridge, _ target: SiteTarget, on: Bool) async -> LogRecord? {
        await bridge.logLine("site record applied") {
            $0.jsonLine.contains("\"site.target\":\"\(target)\"") && $0.jsonLine.contains("\"site.on\":\(on)")
        }
    }

    static func key(_ poster: Poster) throws -> IdentityKey { try .nostr(pubkey: poster.key.publicKey.bytes) }

    /// The stage's console audit, newest first.
    static func audit(_ stage: TestBridge) throws -> [ConsoleAuditEntry] {
        let database = try SQLiteDatabase(path: "\(stage.dataDirectory)/bridge.sqlite3")
        defer { database.close() }
        return try ConsoleAudit(database: database).recent(limit: 100)
    }

    @Test("blocks made on both stages in one second hold on both; an unblock clears everywhere; a steward is never hidden on the other stage; a release is carried on both; a late stage catches up")
    func twoStagesAreOneSite() async throws {
        let site = Site(name: "site-records")
        let relay = try site.relay()
        let a = try await Self.stage(site, "stage-a", relay: relay)
        let b = try await Self.stage(site, "stage-b", relay: relay)
        let mallory = site.poster("mallory"), trent = site.poster("trent"), steward = site.poster("steward"), carol = site.poster("carol"), dave = site.poster("dave")

        // Two moderators, two stages, the same second, two targets.
        let started = ContinuousClock.now
        a.coordinator.submit(OperatorInput.site(.block(try Self.key(mallory)), on: true, by: "session:ana"))
        b.coordinator.submit(OperatorInput.site(.block(try Self.key(trent)), on: true, by: "session:ben"))
        #expect(await Self.applied(b, .block(try Self.key(mallory)), on: true)?.jsonLine.contains("\"site.by\":\"session:ana\"") == true)
        #expect(await Self.applied(a, .block(try Self.key(trent)), on: true)?.jsonLine.contains("\"site.by\":\"session:ben\"") == true)
        print("site: both blocks on both stages after \(ContinuousClock.now - started)")
        #expect(ContinuousClock.now - started < .seconds(10))
        // Each stage's audit names the other stage's moderator and stage (the audit is site-wide).
        #expect(try Self.audit(b).contains {
            $0.action == "block" && $0.target == (try? Self.key(mallory))?.qualified && $0.principal == "session:ana" && $0.remote == "stage:stage-a"
        })
        #expect(try Self.audit(a).contains {
            $0.action == "block" && $0.target == (try? Self.key(trent))?.qualified && $0.principal == "session:ben" && $0.remote == "stage:stage-b"
        })
        for poster in [mallory, trent] {
            let line = try poster.post("\(poster.name) while blocked", to: relay)
            for stage in [a, b] { #expect(await stage.verdict(on: line.id.hex)?.rule == "blocked", "\(poster.name) on \(stage.name)") }
        }

        // An unblock on stage B clears mallory everywhere.
        b.coordinator.submit(OperatorInput.site(.block(try Self.key(mallory)), on: false, by: "session:ben"))
        #expect(await Self.applied(a, .block(try Self.key(mallory)), on: false) != nil)
        let cleared = try mallory.post("mallory after the unblock", to: relay)
        for stage in [a, b] { #expect(await stage.verdict(on: cleared.id.hex)?.kind == .passed, "\(stage.name)") }

        // A word set on stage A (the console's denylist) and a steward allowed on stage A: on stage B the word hides
        // carol's line, and the spam filter never hides the steward (a third copy of a line is hidden for anyone else).
        a.coordinator.submit(OperatorInput.setDenylist(try Denylist([.keyword("Tickets")]), by: "session:ana"))
        a.coordinator.submit(OperatorInput.site(.staff(try Self.key(steward)), on: true, by: "session:ana"))
        #expect(await Self.applied(b, try .word(term: "tickets"), on: true) != nil)
        #expect(await Self.applied(b, .staff(try Self.key(steward)), on: true) != nil)
        let hidden = try carol.post("cheap tickets here", to: relay)
        for stage in [a, b] { #expect(await stage.verdict(on: hidden.id.hex)?.rule == "denylist", "carol on \(stage.name)") }
        for copy in 0..<3 {
            let urgent = try steward.event("water point moved to gate 3", at: site.now + Double(copy))
            let repeated = try dave.event("water point moved to gate 3", at: site.now + Double(copy))
            relay.post(urgent)
            relay.post(repeated)
            for stage in [a, b] { #expect(await stage.verdict(on: urgent.id.hex)?.kind == .passed, "the steward's copy \(copy + 1) on \(stage.name)") }
            if copy == 2 { #expect(await b.verdict(on: repeated.id.hex)?.rule == "repeatedMessage", "anyone else's third copy is hidden") }
        }

        // Stage A releases carol's line: stage B releases it too (it held it hidden), naming who.
        let mark = b.log.lines.all.count
        #expect(try await a.coordinator.release(messageID: hidden.id.hex, by: "session:ana").get() == ())
        #expect(await b.log.lines.first(after: mark) {
            $0.message == "released by the operator" && $0.jsonLine.contains(hidden.id.hex) && $0.jsonLine.contains("site:session:ana")
        } != nil, "stage B released the line stage A released")

        // A stage started late catches up from the relay: every record, whatever its age.
        await site.advance(by: 60_000)
        let c = try await Self.stage(site, "stage-c", relay: relay)
        #expect(await site.advance(until: { await c.snapshot().site?.targets == 5 }, limit: 20_000), "stage C holds the site's 5 targets")
        let late = try trent.post("trent on the late stage", to: relay)
        #expect(await c.verdict(on: late.id.hex)?.rule == "blocked")
        let lateWord = try carol.post("tickets on the late stage", to: relay)
        #expect(await c.verdict(on: lateWord.id.hex)?.rule == "denylist")

        // Every record made was acknowledged, and /metrics shows the site.
        #expect(await site.advance(until: {
            let pendingA = await a.snapshot().site?.unacknowledged, pendingB = await b.snapshot().site?.unacknowledged
            return pendingA == 0 && pendingB == 0
        }))
        // Every stage's heartbeat: stage A hears B and C, with their figures, within a minute.
        #expect(await site.advance(until: { await a.snapshot().site?.stagesHeard == 3 }, limit: 70_000))
        let stages = await a.snapshot().site?.stages ?? []
        #expect(stages.map(\.bridge) == ["stage-a", "stage-b", "stage-c"])
        #expect(stages.allSatisfy { $0.status?["relays"] == .integer(1) && $0.status?["mesh_peers"]?.integerValue != nil }, "\(stages)")
        let health = try #require(await a.coordinator.siteStages()?.arrayValue)
        #expect(health.count == 3 && health.allSatisfy { $0["heard"] == .bool(true) } && health.filter { $0["this"] == .bool(true) }.count == 1)
        let metrics = try await a.metrics()
        #expect(metrics.value("bitchat_bridge_site_stages") == 3)
        #expect(metrics.value("bitchat_bridge_site_records") == 5)
        #expect((metrics.value("bitchat_bridge_site_records_total", labels: [.init("outcome", "applied")]) ?? 0) >= 5)
        #expect(metrics.value("bitchat_bridge_site_records_unacknowledged") == 0)
        await site.stop()
    }

    @Test("a relay that refuses site records for good (OK false, blocked:) is not asked again every 30 s: the record stays unacknowledged, counted refused, said once in the log")
    func refusedForGood() async throws {
        let site = Site(name: "site-refused")
        let relay = try site.relay()
        relay.setRefusedKinds([SiteRecord.kind: "blocked: kind 30078 not accepted here"])
        let a = try await Self.stage(site, "stage-a", relay: relay)
        let mallory = try Self.key(site.poster("mallory"))
        a.coordinator.submit(OperatorInput.site(.block(mallory), on: true, by: "session:ana"))
        let said = await a.logLine("site record refused by a relay; not published again until a relay returns or the next start")
        #expect(said?.jsonLine.contains("\"site.target\":\"block:\(mallory.qualified)\"") == true && said?.jsonLine.contains("blocked: kind 30078") == true)
        await site.advance(by: 95_000, step: 1_000)
        let metrics = try await a.metrics()
        // Heartbeats (refused too) are made anew each minute; the block record is not sent again.
        let siteKey = try SiteKey(operatorKey: SchnorrSecretKey(bytes: Self.secret), site: "u4pruy")
        let operators: Set = [try SchnorrSecretKey(bytes: Self.secret).publicKey]
        let blockSends = relay.published.all.filter { (try? SiteRecord(event: $0, key: siteKey, operators: operators))?.target == .block(mallory) }
        #expect(blockSends.count == 1, "the refused block was sent \(blockSends.count) times in 95 s")
        #expect(metrics.total("bitchat_bridge_site_records_total", where: { $0["outcome"] == "refused" }) >= 1)
        #expect(metrics.total("bitchat_bridge_site_records_unacknowledged") >= 1, "no relay took it")
        await site.stop()
    }
}
