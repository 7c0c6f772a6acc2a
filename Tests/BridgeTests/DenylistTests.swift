import BotSupport
import Bridge
import IdentityCache
import ModerationLog
import Testing
import Identity
import Moderation
import BridgeCore

@Suite("Denylist (keywords, patterns) in the judge")
struct DenylistTests {
    @Test func keywordsIgnoreCaseAndPatternsMatch() throws {
        let list = try Denylist([.keyword("Crypto Giveaway"), .regex(#"t\.me/\w+"#)])
        #expect(list.match("FREE crypto giveaway today") == .keyword("Crypto Giveaway"))
        #expect(list.match("join t.me/scamchan now") == .regex(#"t\.me/\w+"#))
        #expect(list.match("JOIN T.ME/X") != nil, "patterns ignore case too")
        #expect(list.match("happy new year everyone") == nil)
        #expect(Denylist.empty.match("anything") == nil)
    }

    @Test func badListsNameTheEntry() {
        #expect(throws: DenylistError.empty(index: 1)) { try Denylist([.keyword("a"), .keyword("")]) }
        #expect(throws: DenylistError.tooLong(index: 0, limit: Denylist.Limits.maxPatternBytes)) {
            try Denylist([.keyword(String(repeating: "x", count: Denylist.Limits.maxPatternBytes + 1))])
        }
        #expect(throws: DenylistError.tooMany(limit: Denylist.Limits.maxEntries)) {
            try Denylist((0...Denylist.Limits.maxEntries).map { .keyword("k\($0)") })
        }
        do {
            _ = try Denylist([.regex("(unclosed")])
            Issue.record("accepted a broken pattern")
        } catch {
            guard case .badRegex(let index, let pattern, _) = error else { Issue.record("\(error)"); return }
            #expect(index == 0 && pattern == "(unclosed")
        }
    }

    @Test func jsonRoundTripsAndRefusesOtherShapes() throws {
        let list = try Denylist([.keyword("spam"), .regex("^buy")])
        #expect(try Denylist(json: list.jsonValue) == list)
        #expect(throws: DenylistError.notAList(field: "denylist")) { try Denylist(json: .object([])) }
        #expect(throws: DenylistError.notAList(field: "denylist")) { try Denylist(json: .array([.object([("word", .string("x"))])])) }
    }

    @Test func theJudgeHidesDenylistedTextWhateverShadowModeAndAfterTheBlockList() throws {
        var judge = BridgeJudge.passAll
        judge.setShadowMode(true)
        judge.setDenylist(try Denylist([.keyword("giveaway")]))
        func candidate(_ text: String, sender: String = "aa") -> BridgeRouter.Candidate {
            BridgeRouter.Candidate(direction: .nostrToMesh, senderKey: sender, identity: nil, messageID: text, timestamp: 0, text: text)
        }
        let (verdict, report) = judge.judge(candidate("big GIVEAWAY here"), now: 0)
        #expect(verdict == .hide(.denylist) && report?.rule == .denylist && report?.shadow == false)
        // A row of the moderation log like any hide, with the entry that matched as its figures.
        #expect(report?.record?.rule == .denylist && report?.record?.shadow == false)
        #expect(report?.record?.figures == .object([("keyword", .string("giveaway"))]))
        #expect(report?.record?.text == "big GIVEAWAY here" && report?.record?.messageID == "big GIVEAWAY here")
        #expect(judge.judge(candidate("hello"), now: 0).verdict == .pass)
        #expect(HideRule.denylist.label == "denylist")
        let key = try IdentityKey.nostr(pubkey: [UInt8](repeating: 3, count: 32))
        judge.setBlocked([key])
        let blocked = BridgeRouter.Candidate(direction: .nostrToMesh, senderKey: "03", identity: key, messageID: "m", timestamp: 0, text: "giveaway")
        #expect(judge.judge(blocked, now: 0).verdict == .hide(.blocked))
    }
}
