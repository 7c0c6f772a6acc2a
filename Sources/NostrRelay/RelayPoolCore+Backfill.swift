import BotCrypto
import BotSupport
import Nostr

/// Paged backfill of trusted subscriptions (issue 35): a site's thousands of records behind relays that answer a query
/// with a few hundred events at most (rust-nostr's relay and strfry: 500, whatever `limit` asks).
///
/// Decisions:
/// - **Pages by `until`, beside the live subscription.** After a relay's EOSE, if its page reached further back than
///   the one before (an event older than the page's `until`), the filters are asked again of that relay with `until`
///   = the oldest `created_at` of the page (inclusive, so a second split across two pages is asked again whole), until
///   a page reaches no further or ``Limits/maxBackfillPages`` pages were asked; then that subscription is closed. Not
///   "until a page brings nothing new": what a slow consumer lost (below) may lie behind pages it did get.
///   The pages go under a subscription of their own (``pageSubscription(_:)``, `ID:page`), so the subscription itself
///   stays live all along: a record stored while a stage pages (another stage's action, or the rest of a bulk a relay
///   acknowledged before storing it — rust-nostr's relay did, under load) arrives live instead of with the next
///   refresh a minute later. A second holding more records than the relay's cap cannot be paged past: the site's
///   stages never stamp more than ``SiteLedger``'s 100 records into one second.
/// - **A catch-up is checked.** A backfill that brought ``Limits/catchUpFresh`` or more new events runs again
///   ``Limits/catchUpCheck`` after it ended, until one brings fewer: relays acknowledge a bulk before they have stored
///   it all, and a late stage starting meanwhile pages through part of it.
/// - **Refreshed.** A relay may drop live events under a burst (rust-nostr's drops a lagging subscriber's), so every
///   ``Limits/trustedRefresh`` the subscription is asked again, paged, for what was stamped in the last
///   ``Limits/trustedRefreshLookback``: what a relay lost live is found within a minute; anything older arrives with
///   the full backfill each (re)connection makes.
/// - **Nothing lost to a slow consumer.** The report stream keeps the newest reports when the bridge falls behind (a
///   flood must not stall the pool); a trusted event it drops is forgotten by the dedup (``reportLost(_:)``), and the
///   subscription's backfill runs again from the top ``Limits/backfillAgain`` after it ended, until one run loses
///   nothing: what reached the bridge comes again only as a duplicate, dropped at intake before any Schnorr check.
struct BackfillPage: Sendable {
    var since: Int64?
    var until: Int64?
    var oldest: Int64?
    var pages = 0
    /// Events of this backfill (every page so far) the pool had not seen before: a catch-up is checked again
    /// (``RelayPoolCore/Limits/catchUpCheck``).
    var fresh = 0
    /// The page asked is the page subscription's (``RelayPoolCore/pageSubscription(_:)``), not the live one's first
    /// answer.
    var onPage = false
}

extension RelayPoolCore {
    /// The subscription id a trusted subscription's pages go under (its own id stays live).
    static func pageSubscription(_ id: String) -> String { id + ":page" }

    /// The subscription an EVENT, EOSE or CLOSED of `received` belongs to, and whether it came for a page.
    func subscription(receivedAs received: String) -> (id: String, page: Bool) {
        guard received.hasSuffix(":page") else { return (received, false) }
        let id = String(received.dropLast(":page".count))
        return subscriptions[id]?.trustedAuthors.isEmpty == false ? (id, true) : (received, false)
    }

    /// A trusted subscription was sent to a relay: its backfill starts — with the live subscription's first answer, or
    /// (`onPage`: a refresh from `since`, or a backfill again) with a page of its own.
    mutating func startBackfill(_ id: String, relay index: Int, since: Int64? = nil, onPage: Bool = false) {
        guard let subscription = subscriptions[id], !subscription.trustedAuthors.isEmpty else { return }
        relays[index].backfills[id] = BackfillPage(since: since, pages: 1, onPage: onPage)
        if onPage, let connection = relays[index].connection {
            transport.send(connection, text: subscription.request(as: Self.pageSubscription(id), since: since, until: nil).text)
        }
    }

    /// The relay closed a page subscription (`CLOSED`): that backfill ends; the next refresh asks again.
    mutating func pageClosed(_ id: String, relay index: Int) {
        relays[index].backfills[id] = nil
    }

    /// An event of a trusted subscription from this relay: its page's oldest time.
    mutating func noteBackfill(_ id: String, relay index: Int, createdAt: Int64) {
        guard let oldest = relays[index].backfills[id]?.oldest, oldest <= createdAt else {
            relays[index].backfills[id]?.oldest = createdAt
            return
        }
    }

    /// The relay's EOSE for `received` (a subscription, or its page subscription) while it backfills: the next page,
    /// or the end (the page subscription closed).
    mutating func backfillEnded(_ received: String, relay index: Int, now: ContinuousClock.Instant) {
        let (id, onPage) = subscription(receivedAs: received)
        guard let page = relays[index].backfills[id], page.onPage == onPage, let subscription = subscriptions[id],
            let connection = relays[index].connection
        else { return }
        let pageID = Self.pageSubscription(id)
        if let oldest = page.oldest, oldest < page.until ?? .max, page.pages < Limits.maxBackfillPages {
            relays[index].backfills[id] = BackfillPage(since: page.since, until: oldest, pages: page.pages + 1, fresh: page.fresh, onPage: true)
            relays[index].stats.backfillPages += 1
            transport.send(connection, text: subscription.request(as: pageID, since: page.since, until: oldest).text)
            return
        }
        relays[index].backfills[id] = nil
        if subscription.lostInBackfill {
            subscriptions[id]?.lostInBackfill = false
            subscriptions[id]?.backfillAgainAt = now + Limits.backfillAgain
        } else if page.fresh >= Limits.catchUpFresh {
            subscriptions[id]?.backfillAgainAt = min(subscription.backfillAgainAt ?? now + Limits.catchUpCheck, now + Limits.catchUpCheck)
        }
        if page.onPage { transport.send(connection, text: ClientMessage.close(subscription: pageID).text) }
    }

    /// A report the stream dropped for a slow consumer: a trusted event is forgotten, to come again — from a second
    /// backfill once the one under way ends, or (lost live) one ``Limits/backfillAgain`` from now.
    public mutating func reportLost(_ report: RelayPoolEvent, now: ContinuousClock.Instant) {
        guard case .event(let event, _, let id) = report, let subscription = subscriptions[id],
            subscription.trustedAuthors.contains(event.pubkey.hex)
        else { return }
        seen.remove(event.id.bytes)
        if relays.contains(where: { $0.backfills[id] != nil }) {
            subscriptions[id]?.lostInBackfill = true
        } else if subscription.backfillAgainAt == nil {
            subscriptions[id]?.backfillAgainAt = now + Limits.backfillAgain
        }
    }

    /// Trusted subscriptions due for their refresh are asked again, paged, on every relay not already backfilling;
    /// one whose backfill lost events runs it again from the top.
    mutating func refreshTrusted(now: ContinuousClock.Instant, unixNow: Int64) {
        for id in subscriptionOrder {
            guard let subscription = subscriptions[id], let again = subscription.backfillAgainAt, now >= again else { continue }
            subscriptions[id]?.backfillAgainAt = nil
            for index in relays.indices where relays[index].activeSubscriptions.contains(id) && relays[index].backfills[id] == nil {
                startBackfill(id, relay: index, onPage: true)
            }
        }
        for id in subscriptionOrder {
            guard let subscription = subscriptions[id], !subscription.trustedAuthors.isEmpty,
                now >= subscription.refreshedAt + Limits.trustedRefresh
            else { continue }
            subscriptions[id]?.refreshedAt = now
            let since = unixNow - Limits.trustedRefreshLookback
            for index in relays.indices where relays[index].activeSubscriptions.contains(id) && relays[index].backfills[id] == nil {
                startBackfill(id, relay: index, since: since, onPage: true)
            }
        }
    }

    /// When the next trusted refresh is due.
    var nextTrustedRefresh: ContinuousClock.Instant? {
        subscriptionOrder.compactMap { id in
            subscriptions[id].flatMap { subscription -> ContinuousClock.Instant? in
                guard !subscription.trustedAuthors.isEmpty else { return nil }
                let refresh = subscription.refreshedAt + Limits.trustedRefresh
                return subscription.backfillAgainAt.map { min($0, refresh) } ?? refresh
            }
        }.min()
    }
}

extension RelayPoolCore.Subscription {
    /// A page: the filters with `since` and `until` set, under `subscription` (the configured lookback does not apply).
    func request(as subscription: String, since: Int64?, until: Int64?) -> ClientMessage {
        .request(subscription: subscription, filters: filters.map { filter in
            var filter = filter
            filter.since = since
            filter.until = until
            return filter
        })
    }
}
