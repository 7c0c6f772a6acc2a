import BotCrypto
import BotSupport
import Testing

@testable import Nostr

/// The EVENT-frame fast path must give exactly the general parser's answer: the same message for every
/// frame it accepts, and nil (so the general parser runs and names the error) for everything else.
@Suite("EVENT frame fast path")
struct EventFrameFastPathTests {
    static func fast(_ frame: [UInt8]) -> RelayMessage? {
        frame.withUnsafeBufferPointer { EventFrameFastPath.parse($0) }
    }

    static func outcome(_ body: () throws(NostrError) -> RelayMessage) -> Result<RelayMessage, NostrError> {
        Result { () throws(NostrError) -> RelayMessage in try body() }
    }

    static func frames(count: Int, rng: inout SeededRandom) throws -> [[UInt8]] {
        let key = try SchnorrSecretKey(bytes: (1...32).map { UInt8($0 * 3) })
        let pieces = ["festival", " ", "stage", "é", "😀", "\"", "\\", "\n", "/", "\u{01}", "u4pruy", "0", "ｆ"]
        func text(_ n: Int, plain: Bool) -> String {
            (0..<n).map { _ in pieces[Int.random(in: 0..<(plain ? 5 : pieces.count), using: &rng)] }.joined()
        }
        var out: [[UInt8]] = []
        for round in 0..<count {
            let plain = round % 3 != 0
            let tags = (0..<Int.random(in: 0...3, using: &rng)).map { _ in
                (0..<Int.random(in: 0...3, using: &rng)).map { _ in text(Int.random(in: 0...3, using: &rng), plain: plain) }
            }
            let event = try UnsignedEvent(
                pubkey: key.publicKey, createdAt: Int64.random(in: 0...2_000_000_000, using: &rng),
                kind: [0, 1, 20000, 20001, 65535][round % 5], tags: tags, content: text(Int.random(in: 0...12, using: &rng), plain: plain)
            ).signed(with: key, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
            guard case .object(var members) = event.jsonValue else { continue }
            switch round % 7 {
            case 1: members.reverse()  // member order is free
            case 2: members.removeAll { $0.0 == "id" || $0.0 == "sig" }  // unsigned: both absent
            case 3: members.append(("extra", .integer(1)))  // unknown member: general path
            default: break
            }
            let subscription = round % 11 == 0 ? "sub \"q\"" : "geo-u4pruy"
            out.append(Array(JSONWriter.compact(.array([.string("EVENT"), .string(subscription), .object(members)])).utf8))
        }
        return out
    }

    @Test("fast and general parsers agree on 600 generated frames and 6,000 byte mutations of them")
    func agreesWithGeneralParser() throws {
        var rng = SeededRandom(seed: 0xfa57)
        var fastHits = 0
        let alphabet = Array(#"[]{}",:0123456789abcdefABCDEF-.e \"#.utf8) + [0x00, 0x1f, 0x80, 0xc3, 0xff]
        for frame in try Self.frames(count: 600, rng: &rng) {
            var variants = [frame]
            for _ in 0..<10 {
                var mutated = frame
                let at = Int.random(in: 0..<mutated.count, using: &rng)
                let byte = alphabet[Int.random(in: 0..<alphabet.count, using: &rng)]
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: mutated[at] = byte
                case 1: mutated.remove(at: at)
                default: mutated.insert(byte, at: at)
                }
                variants.append(mutated)
            }
            for variant in variants {
                let general = Self.outcome { () throws(NostrError) in try RelayMessage.parseGeneral(variant) }
                if let fast = Self.fast(variant) {
                    fastHits += 1
                    #expect(general == .success(fast), "\(String(decoding: variant, as: UTF8.self))")
                }
                #expect(Self.outcome { () throws(NostrError) in try RelayMessage.parse(variant) } == general)
            }
        }
        // The plain frames (two thirds of the originals, minus unknown members and quoted subscriptions)
        // must really take the fast path, or this test would prove nothing.
        #expect(fastHits >= 300)
    }

    @Test("boundaries: tag limits at n and n+1, integer forms, hex case, whitespace")
    func boundaries() throws {
        func frame(tags: String = #"[["g","u4pruy"]]"#, createdAt: String = "1700000000", kind: String = "20000",
                   pubkey: String = String(repeating: "ab", count: 32), tail: String = "") -> [UInt8]
        {
            Array(#"["EVENT","s",{"pubkey":"\#(pubkey)","created_at":\#(createdAt),"kind":\#(kind),"tags":\#(tags),"content":"hi"}]\#(tail)"#.utf8)
        }
        func check(_ bytes: [UInt8], fast expected: Bool) {
            let general = Self.outcome { () throws(NostrError) in try RelayMessage.parseGeneral(bytes) }
            let fast = Self.fast(bytes)
            #expect((fast != nil) == expected, "\(String(decoding: bytes, as: UTF8.self))")
            if let fast { #expect(general == .success(fast)) }
            #expect(Self.outcome { () throws(NostrError) in try RelayMessage.parse(bytes) } == general)
        }
        let tag = #"["t","x"]"#
        check(frame(tags: "[" + Array(repeating: tag, count: 64).joined(separator: ",") + "]"), fast: true)
        check(frame(tags: "[" + Array(repeating: tag, count: 65).joined(separator: ",") + "]"), fast: false)
        let element = #""e""#
        check(frame(tags: "[[" + Array(repeating: element, count: 16).joined(separator: ",") + "]]"), fast: true)
        check(frame(tags: "[[" + Array(repeating: element, count: 17).joined(separator: ",") + "]]"), fast: false)
        check(frame(tags: #"[["g",""# + String(repeating: "x", count: 1024) + #""]]"#), fast: true)
        check(frame(tags: #"[["g",""# + String(repeating: "x", count: 1025) + #""]]"#), fast: false)
        check(frame(tags: "[]"), fast: true)
        check(frame(tags: "[[]]"), fast: true)
        check(frame(createdAt: "0"), fast: true)
        check(frame(createdAt: "01"), fast: false)
        check(frame(createdAt: "-1"), fast: false)
        check(frame(createdAt: "1.5"), fast: false)
        check(frame(createdAt: "1e3"), fast: false)
        check(frame(createdAt: "999999999999999999"), fast: true)
        check(frame(createdAt: "9223372036854775807"), fast: false)  // 19 digits: general path (accepts)
        check(frame(createdAt: "9223372036854775808"), fast: false)
        check(frame(kind: "65535"), fast: true)
        check(frame(kind: "65536"), fast: false)
        check(frame(pubkey: String(repeating: "AB", count: 32)), fast: false)
        check(frame(pubkey: String(repeating: "ab", count: 31)), fast: false)
        check(frame(tail: " "), fast: false)
        check(frame(tail: ","), fast: false)
        check(Array(#"["EVENT", "s",{}]"#.utf8), fast: false)
        check(Array(#"["EVENT","s",{}]"#.utf8), fast: false)
        check(Array(#"["EOSE","s"]"#.utf8), fast: false)
    }
}
