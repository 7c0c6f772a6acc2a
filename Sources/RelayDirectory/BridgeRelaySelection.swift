public import Geohash

/// Which app's rule chose a relay.
public enum RelayApp: String, Sendable, CaseIterable {
    /// bitchat iOS: the reviewed list, ties by host (NOSTR-GEO §3.2).
    case ios
    /// bitchat-android: its bundled list, ties in file order (§3.3).
    case android
}

/// A relay the bridge connects to, and for which places each app's rule chose it.
public struct BridgeRelay: Equatable, Sendable, CustomStringConvertible {
    /// `wss://host[:port]` with `:443` dropped and the host lowercased: one connection per relay.
    public let url: String
    /// The places whose iOS nearest set holds it, in the order the places were given.
    public fileprivate(set) var ios: [GeohashCell] = []
    /// The places whose Android nearest set holds it (as `wss://x`, `wss://x:443` or both).
    public fileprivate(set) var android: [GeohashCell] = []

    /// The apps that chose it, iOS first.
    public var apps: [RelayApp] { (ios.isEmpty ? [] : [.ios]) + (android.isEmpty ? [] : [.android]) }

    /// One log line: `wss://x (ios: u4pruy u4pruv; android: u4pruy)`.
    public var description: String {
        let reasons = [("ios", ios), ("android", android)].filter { !$0.1.isEmpty }
            .map { "\($0.0): " + $0.1.map(\.string).joined(separator: " ") }
        return "\(url) (\(reasons.joined(separator: "; ")))"
    }
}

/// A row Android's rule chose that the bridge does not connect to: its URL fails the address rules the
/// bridge applies to every relay (NOSTR-GEO §3.2, e.g. `ws://`, a local name or a path).
public struct RefusedRelay: Equatable, Sendable, CustomStringConvertible {
    /// The URL as the Android list has it.
    public let url: String
    public let reason: RelayAddress.Rejection
    /// The places whose Android nearest set holds it.
    public fileprivate(set) var places: [GeohashCell]

    public var description: String {
        "\(url) (android: \(places.map(\.string).joined(separator: " "))) not used: \(reason)"
    }
}

/// What ``RelayDirectory/bridgeSelection(places:count:)`` chose.
public struct BridgeRelaySelection: Equatable, Sendable {
    /// The relays to publish to and subscribe on, in a stable order.
    public let relays: [BridgeRelay]
    /// Android choices left out (empty for the committed list).
    public let refused: [RefusedRelay]

    /// The URLs of ``relays``, in order.
    public var urls: [String] { relays.map(\.url) }
}

extension RelayDirectory {
    /// The relays the bridge uses for `places` (NOSTR-GEO §3.5): for each place, the iOS `count` nearest ∪
    /// Android's `count` nearest, with `:443` normalised away before deduplicating so each relay is one
    /// connection. The order is stable: places in the order given; within a place iOS's choices, then
    /// Android's, each nearest first; a relay keeps the position of its first choice. A directory without
    /// an Android list gives the iOS selection alone.
    public func bridgeSelection(places: [GeohashCell], count: Int = Limits.phoneRelayCount) -> BridgeRelaySelection {
        var relays: [BridgeRelay] = []
        var positions: [String: Int] = [:]
        var refused: [RefusedRelay] = []
        func position(of url: String) -> Int {
            if let index = positions[url] { return index }
            relays.append(BridgeRelay(url: url))
            positions[url] = relays.count - 1
            return relays.count - 1
        }
        for place in places {
            for selection in closest(to: place, count: count) {
                let index = position(of: selection.entry.url)
                if !relays[index].ios.contains(place) { relays[index].ios.append(place) }
            }
            for selection in android?.closest(to: place, count: count) ?? [] {
                switch selection.entry.bridgeAddress {
                case .success(let address):
                    let index = position(of: "wss://" + address)
                    if !relays[index].android.contains(place) { relays[index].android.append(place) }
                case .failure(let reason):
                    if let index = refused.firstIndex(where: { $0.url == selection.entry.url }) {
                        if !refused[index].places.contains(place) { refused[index].places.append(place) }
                    } else {
                        refused.append(RefusedRelay(url: selection.entry.url, reason: reason, places: [place]))
                    }
                }
            }
        }
        return BridgeRelaySelection(relays: relays, refused: refused)
    }
}

extension RelayDirectory {
    /// The geohash lengths of the channel levels a phone computes from its GPS fix (NOSTR-GEO §5.1:
    /// region 2, province 4, city 5, neighborhood 6, block 7, building 8).
    public static let channelLevels = [2, 4, 5, 6, 7, 8]

    /// The places whose nearest relays the bridge connects to (``bridgeSelection(places:count:)``):
    /// - as a gateway, its channel and the channel's parents at the phones' levels — a phone at the site that
    ///   views (and deposits to) a wider level G publishes to the relays nearest G (iOS, NOSTR-GEO §8.9), so
    ///   the bridge's pool holds those relays and a deposit for G reaches them; children (block, building)
    ///   lie within the channel's cell, and their nearest relays are the channel's, hundreds of kilometres
    ///   between relays against a cell of ≤ 1.2 km;
    /// - as a rendezvous bridge, the 9-cell ring of its cell (the phones' bridge subscription).
    /// Decision: a deposit for a geohash outside these places (a phone that "teleported" elsewhere) goes to
    /// the pool's relays only.
    public static func bridgePlaces(channel: GeohashCell, gateway: Bool, rendezvousCell: GeohashCell?) -> [GeohashCell] {
        var places: [GeohashCell] = []
        if gateway {
            places += channelLevels.filter { $0 < channel.precision }.map { channel.truncated(to: $0) }
            places.append(channel)
        }
        if let rendezvousCell { places += rendezvousCell.ring.filter { !places.contains($0) } }
        return places
    }
}
