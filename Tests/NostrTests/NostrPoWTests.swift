import BotCrypto
import BotSupport
import Testing

@testable import Nostr

@Suite("NIP-13 proof of work")
struct NostrPoWTests {
    @Test(arguments: [
        ("", 0), ("80", 0), ("ff00", 0), ("40", 1), ("01", 7), ("0000f0", 16),
        (String(repeating: "00", count: 32), 256), ("00ff", 8), ("0080", 8), ("007f", 9), ("0001", 15), ("000001", 23),
        ("000000000e9d97a1ab09fc381030b346cdd7a142ad57e6df0b46dc9bef6c7e2d", 36),
    ])
    func leadingZeroBits(_ hex: String, _ expected: Int) throws {
        #expect(NostrPoW.leadingZeroBits(try Hex.decode(hex)) == expected)
    }

    static let id16 = "0000f000" + String(repeating: "ab", count: 28)

    @Test(arguments: [
        ([["nonce", "12345", "8"]], id16, 8),
        ([["nonce", "12345", "24"]], id16, 0),
        ([["nonce", "12345", "16"]], id16, 16),
        ([], id16, 0),
        ([["nonce", "12345"]], id16, 0),
        ([["nonce", "12345", "high"]], id16, 0),
        ([["nonce", "12345", "0"]], id16, 0),
        ([["nonce", "12345", "-4"]], id16, 0),
        ([["nonce", "12345", "400"]], id16, 0),
        ([["nonce", "12345", "8"]], "not-hex", 0),
        // The LAST nonce tag counts.
        ([["nonce", "1", "8"], ["nonce", "2", "24"]], id16, 0),
    ])
    func validatedDifficultyAsIOS(_ tags: [[String]], _ id: String, _ expected: Int) {
        #expect(NostrPoW.validatedDifficulty(tags: tags, idHex: id) == expected)
    }

    static let seed = (0..<32).map { UInt8($0) }

    @Test(arguments: [
        (8, "00000000000001cd", "00c14074e44e4d38a79e66c7cabd5031c28c8621d009479600795da3e1822dfa"),
        (12, "0000000000000fa6", "000c36d70d81cef872fec1b4e8f3cebe2481b9e0bc75fba28041464a4224904f"),
        (16, "0000000000013330", "00002eb74334f34853ae72dae2bfe76dad7d1469731027e1dc5e876756f6721f"),
    ])
    func minedVector(_ target: Int, _ nonce: String, _ id: String) throws {
        let key = try NostrKeyDerivation.secretKey(seed: Self.seed, label: "u4pruy")
        let base = UnsignedEvent(pubkey: key.publicKey, createdAt: 1_700_000_000, kind: 20000,
                                 tags: [["g", "u4pruy"], ["n", "bridgebot"]], content: "mined hello")
        let mined = try NostrPoW.mine(base, target: target, startNonce: 0)
        #expect(mined.event.tags == [["g", "u4pruy"], ["n", "bridgebot"], ["nonce", nonce, String(target)]])
        #expect(mined.id.hex == id)
        #expect(mined.event.id == mined.id)
        #expect(mined.event.createdAt == 1_700_000_000)
        let signed = try mined.event.signed(with: key, auxiliaryRandomness: [UInt8](repeating: 0, count: 32))
        #expect(NostrPoW.validatedDifficulty(signed) == target)
        if target == 8 {
            #expect(signed.signature.hex == "d98916a8d4f3e74cf8889e8fac0f631cdfe4c00b762d3b0c9386b51e0ba0f5224058e9278d8dfe6e205e1a9449242ce4b435418a6c3bbb51bf55ea347d1a9e7c")
        }
    }

    @Test func existingNonceTagIsReplacedAndContentWithEscapesStillMines() throws {
        let key = try NostrKeyDerivation.secretKey(seed: Self.seed, label: "x")
        let base = UnsignedEvent(pubkey: key.publicKey, createdAt: 5, kind: 20000,
                                 tags: [["nonce", "zz", "99"], ["g", "x"]], content: "q\"\\\n😀")
        let mined = try NostrPoW.mine(base, target: 10, startNonce: 77)
        #expect(mined.event.tags.filter { $0.first == "nonce" }.count == 1)
        #expect(mined.event.tags.last?.first == "nonce")
        #expect(NostrPoW.leadingZeroBits(mined.event.id.bytes) >= 10)
    }

    @Test func targetBoundsAndCancellation() throws {
        let key = try NostrKeyDerivation.secretKey(seed: Self.seed, label: "x")
        let base = UnsignedEvent(pubkey: key.publicKey, createdAt: 5, kind: 1, tags: [], content: "")
        #expect(throws: NostrError.invalidTarget(257)) { try NostrPoW.mine(base, target: 257) }
        #expect(throws: NostrError.invalidTarget(-1)) { try NostrPoW.mine(base, target: -1) }
        #expect(try NostrPoW.mine(base, target: 0).attempts == 1)
        #expect(throws: NostrError.miningCancelled(attempts: NostrPoW.Limits.progressInterval)) {
            try NostrPoW.mine(base, target: 256) { _ in false }
        }
    }
}
