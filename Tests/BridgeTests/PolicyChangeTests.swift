import Bridge
import IdentityCache
import Testing
import Identity
import BridgeCore

@Suite("Policy reload change log")
struct PolicyChangeTests {
    func key(_ n: UInt8) throws -> IdentityKey { try .nostr(pubkey: [UInt8](repeating: n, count: 32)) }

    @Test("added and removed keys per list, sorted; an identical file is no change")
    func change() throws {
        let old = OperatorLists(allowed: [try key(1)], verified: [try key(2)], blocked: [try key(3), try key(4)])
        let new = OperatorLists(allowed: [try key(1)], verified: [], blocked: [try key(5), try key(4), try key(6)])
        let change = PolicyChange(old: old, new: new)
        #expect(change.blockAdded == [try key(5), try key(6)])
        #expect(change.blockRemoved == [try key(3)])
        #expect(change.verifyRemoved == [try key(2)])
        #expect(change.allowAdded.isEmpty && change.allowRemoved.isEmpty && change.verifyAdded.isEmpty)
        #expect(!change.isEmpty)
        #expect(PolicyChange(old: new, new: new).isEmpty)
    }
}
