import BitchatWire
import BotCrypto
import BotSupport
@testable import Mesh
import Testing

/// Pins outlive the live table (the reach issue, trust through the stranger cache). The phone model is
/// Android's cadence (`PowerManager.kt`: announces every 30 s in the foreground, up to 300 s on low battery):
/// here it announces once and then only speaks.
@Suite("Pins beyond the live table")
struct PinBookTests {
    static let timeoutMs = MeshPeerEngine.Configuration().peerTimeoutMs

    static func messages(_ actions: [MeshAction]) -> [MeshPublicMessage] {
        actions.compactMap { if case .publicMessage(let m) = $0 { m } else { nil } }
    }

    static func refusals(_ actions: [MeshAction]) -> [MeshPin] {
        actions.compactMap { if case .pinRefused(let pin) = $0 { pin } else { nil } }
    }

    static func verified(_ actions: [MeshAction]) -> [MeshPeer] {
        actions.compactMap { if case .peerVerified(let peer) = $0 { peer } else { nil } }
    }

    /// Moves the clock on and ticks (announce cadence, expiry).
    static func advance(_ h: inout EngineHarness, by ms: UInt64) -> [MeshAction] {
        h.now += ms
        return h.engine.handle(.tick, now: h.now, random: &h.random)
    }

    @Test func aPhoneThatAnnouncedOnceIsVerifiedEveryTimeItSpeaks() throws {
        var h = EngineHarness()
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now, nickname: "slow"))
        var carried = 0
        var lost = false
        // Every 90 s for 6 minutes, past the engine's 60 s table (iOS's keep; traffic refreshes a live peer, so
        // a phone speaking more often than that never leaves it): each message verifies against the pin.
        for i in 1...4 {
            lost = lost || Self.advance(&h, by: 90_000).contains { if case .peerLost(phone.id, .timeout) = $0 { true } else { false } }
            let got = Self.messages(h.feed(try phone.message("line \(i)", at: h.now)))
            #expect(got.count == 1, "message \(i)")
            if let message = got.first {
                #expect(message.nickname == "slow" && message.noisePublicKey == phone.noise.publicKey)
                carried += 1
            }
        }
        #expect(lost, "the peer left the live table")
        #expect(carried == 4)
        #expect(h.engine.counters.pins[.verifiedByPin] == 4)
        #expect(h.engine.counters.verification[.messageUnknownSender] == 0)
    }

    @Test func aCopiedNoiseKeyWithAnotherSigningKeyIsRefusedAfterSilence() throws {
        var h = EngineHarness()
        let phone = Phone()
        let impostor = Phone(noise: phone.noise, signing: .generate())
        _ = h.feed(try phone.announce(at: h.now))
        _ = Self.advance(&h, by: 120_000)
        #expect(h.engine.peers[phone.id] == nil, "two minutes of silence: out of the live table")

        let actions = h.feed(try impostor.announce(at: h.now, nickname: "impostor"))
        #expect(Self.refusals(actions).map(\.signingPublicKey) == [impostor.signing.publicKey])
        #expect(Self.verified(actions).isEmpty && h.engine.peers[phone.id] == nil)
        #expect(h.engine.counters.pins[.refused] == 1)
        // The impostor's messages do not verify; the real phone's still do.
        #expect(Self.messages(h.feed(try impostor.message("fake", at: h.now + 1))).isEmpty)
        #expect(Self.messages(h.feed(try phone.message("real", at: h.now + 2))).map(\.text) == ["real"])
    }

    @Test func aRefusalWhileThePeerIsLiveRefreshesNothing() throws {
        var h = EngineHarness()
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now))
        let seen = try #require(h.engine.peers[phone.id]?.lastSeen)
        h.now += 30_000
        let actions = h.feed(try Phone(noise: phone.noise, signing: .generate()).announce(at: h.now))
        #expect(Self.refusals(actions).count == 1)
        #expect(h.engine.peers[phone.id]?.lastSeen == seen)
        #expect(h.engine.peers[phone.id]?.signingPublicKey == phone.signing.publicKey)
    }

    @Test func pinsLoadedAfterARestartRefuseTheImpostorAndVerifyTheRealPhone() throws {
        let phone = Phone()
        var h = EngineHarness()
        _ = h.engine.handle(
            .replacePins([MeshPin(noisePublicKey: phone.noise.publicKey, signingPublicKey: phone.signing.publicKey, nickname: "known")]),
            now: h.now, random: &h.random)
        #expect(h.engine.pinCount == 1)
        #expect(Self.refusals(h.feed(try Phone(noise: phone.noise, signing: .generate()).announce(at: h.now))).count == 1)
        let message = try #require(Self.messages(h.feed(try phone.message("after the restart", at: h.now + 1))).first)
        #expect(message.nickname == "known")
        // The real phone's own announce matches its pin and joins the live table.
        #expect(Self.verified(h.feed(try phone.announce(at: h.now + 2))).map(\.id) == [phone.id])
    }

    @Test func aForgottenPinIsFirstContactAgain() throws {
        var h = EngineHarness()
        let phone = Phone()
        _ = h.feed(try phone.announce(at: h.now))
        _ = Self.advance(&h, by: Self.timeoutMs + 1_000)
        _ = h.engine.handle(.forgetPins([phone.id]), now: h.now, random: &h.random)
        #expect(h.engine.counters.pins[.forgotten] == 1 && h.engine.pinCount == 0)
        // Without its pin the old phone's messages are unattributed again …
        #expect(Self.messages(h.feed(try phone.message("unknown now", at: h.now))).isEmpty)
        // … and another signing key for that Noise key is a first contact (the cache's trade-off 1).
        let rotated = Phone(noise: phone.noise, signing: .generate())
        #expect(Self.verified(h.feed(try rotated.announce(at: h.now + 1))).map(\.id) == [phone.id])
    }

    @Test func replacingThePinsKeepsLivePeersAndDropsTheRest() throws {
        var h = EngineHarness()
        let live = Phone()
        let gone = Phone()
        _ = h.feed(try live.announce(at: h.now))
        _ = h.engine.handle(
            .replacePins([MeshPin(noisePublicKey: gone.noise.publicKey, signingPublicKey: gone.signing.publicKey, nickname: "g")]),
            now: h.now, random: &h.random)
        #expect(h.engine.pinCount == 2)
        _ = h.engine.handle(.replacePins([]), now: h.now, random: &h.random)
        #expect(h.engine.pinCount == 1, "the live peer's pin stays")
        #expect(Self.messages(h.feed(try gone.message("x", at: h.now + 1))).isEmpty)
    }

    @Test func aFullBookTakesNoNewPinsAndKeepsTheOldOnes() throws {
        var book = PinBook()
        func pin(_ i: Int) throws -> MeshPin {
            let noise = Array(withUnsafeBytes(of: UInt32(i).bigEndian, Array.init)) + [UInt8](repeating: 0, count: 28)
            return MeshPin(noisePublicKey: noise, signingPublicKey: Ed25519PrivateKey.generate().publicKey, nickname: "p\(i)")
        }
        let first = try pin(0)
        var taken = 0
        for i in 0..<PinBook.Limits.maxPins where book.pin(i == 0 ? first : try pin(i)) { taken += 1 }
        #expect(taken == PinBook.Limits.maxPins)
        let newcomer = book.pin(try pin(PinBook.Limits.maxPins))
        #expect(!newcomer, "full: a newcomer is not pinned")
        #expect(book.check(first.peerID, noiseKey: first.noisePublicKey, signingKey: first.signingPublicKey) == .matches)
        var renamed = first
        renamed.nickname = "renamed"
        let refreshed = book.pin(renamed)
        #expect(refreshed && book[first.peerID]?.nickname == "renamed", "a pinned peer's nickname still refreshes")
    }
}

@Suite("Packets signed elsewhere (the bridge's personas)")
struct OriginateSignedTests {
    @Test func aPersonasPacketGoesOutAtTTL7AndItsEchoIsOurOwn() throws {
        var h = EngineHarness()
        let persona = Phone()
        let packet = try MeshPacket(type: .message, timestamp: h.now, sender: persona.id, payload: Array("from nostr".utf8))
            .signed(with: persona.signing)
        let actions = h.engine.handle(.originateSigned(packet), now: h.now, random: &h.random)
        let frames = actions.compactMap { if case .transmit(_, let frame, _) = $0 { frame } else { nil } }
        let sent = try MeshPacket.decode(try #require(frames.first))
        #expect(sent.ttl == 7 && sent.sender == persona.id && sent.verifySignature(persona.signing.publicKey).isValid)
        // Its announce and message echoing back from another phone are ours, not a peer's.
        var echo = sent
        echo.ttl = 6
        #expect(PinBookTests.messages(h.feed(try echo.encode())).isEmpty)
        h.now += 1
        #expect(PinBookTests.verified(h.feed(try persona.announce(at: h.now))).isEmpty)
        #expect(h.engine.counters.ingress[.ownEcho] == 2 && h.engine.peers[persona.id] == nil)
        // Past the window the sender is anyone's again.
        h.now += MeshPeerEngine.Limits.ownSenderWindowMs + 1
        #expect(PinBookTests.verified(h.feed(try persona.announce(at: h.now))).map(\.id) == [persona.id])
    }
}
