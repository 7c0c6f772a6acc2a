public import Identity
public import IdentityCache
public import ModerationLog
import SpamFilter

/// The keys the bridge has met, by the prefix an operator types (``KeyPrefix``): the console's sender boxes and the
/// CLI's `identities` resolve through it alike. A key is met when the identity cache has its row — or when the
/// moderation log names it as a sender: the cache row of a key the judge hid lands later (its sightings are written in
/// batches), and a moderator blocking the key the log just showed must not wait for it (issue 35). A nostr-to-mesh
/// row's sender is a Nostr key, a mesh-to-nostr row's a mesh fingerprint; a sender that is no whole key (a peer ID the
/// bridge knew no fingerprint for) is left out.
public enum MetKeys {
    /// `text` as one key the bridge has met, through the cache and the log (``KeyPrefix/resolve(_:lookup:)``).
    public static func resolve(_ text: String, identities: PeerIdentityCache, moderationLog: ModerationLog?) throws(KeyPrefixError) -> IdentityKey {
        try KeyPrefix.resolve(text) { prefix, kind, limit in
            var keys = try identities.keys(hexPrefix: prefix, kind: kind, limit: limit)
            if let moderationLog {
                let direction: SpamDirection = kind == .nostr ? .nostrToMesh : .meshToNostr
                let senders = try moderationLog.senders(hexPrefix: prefix, direction: direction, limit: limit)
                keys += senders.compactMap { try? IdentityKey(qualified: "\(kind.name):\($0)") }
            }
            return keys
        }
    }
}
