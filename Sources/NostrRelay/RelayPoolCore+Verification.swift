import BotCrypto
import BotSupport
public import Nostr
import WebSocketRuntime

extension RelayPoolCore {
    // MARK: Verification (the live pool runs these on its workers)

    /// The authors the consumer serves first (the bridge: its established senders and the operator's
    /// allowed and verified keys), at most ``Limits/maxPriorityAuthors``.
    ///
    /// Decision (issue 14): under a flood, a relay's verification budget runs out and the events after it
    /// are dropped `over_budget` unverified — an established sender's lines among them, at random. An
    /// event whose **claimed** author is on this list may then take a token from that author's reserve on
    /// that relay (``Limits/priorityReserveBurst``) and is verified as usual. The claim buys a place in the
    /// verification queue, never a skipped check: the pubkey in an unverified event is only a claim until
    /// the Schnorr check passes, and what fails it is dropped and counted as a strike like any forgery. A
    /// forger who claims a regular's key can spend that one author's reserve on one relay, and no more.
    public mutating func setPriorityAuthors(_ authors: Set<String>) {
        priorityAuthors = authors.count <= Limits.maxPriorityAuthors ? authors : Set(authors.sorted().prefix(Limits.maxPriorityAuthors))
        for index in relays.indices { relays[index].reserves = relays[index].reserves.filter { priorityAuthors.contains($0.key) } }
    }

    mutating func reserveHasToken(_ index: Int, author: String, now: ContinuousClock.Instant) -> Bool {
        guard priorityAuthors.contains(author) else { return false }
        var bucket = relays[index].reserves[author] ?? Self.reserveBucket()
        defer { relays[index].reserves[author] = bucket }
        return bucket.hasToken(now: now)
    }

    mutating func takeReserve(_ index: Int, author: String, now: ContinuousClock.Instant) -> Bool {
        guard priorityAuthors.contains(author) else { return false }
        var bucket = relays[index].reserves[author] ?? Self.reserveBucket()
        defer { relays[index].reserves[author] = bucket }
        return bucket.take(now: now)
    }

    static func reserveBucket() -> TokenBucket {
        TokenBucket(capacity: Limits.priorityReserveBurst, refillPerSecond: Limits.priorityReservePerMinute / 60)
    }

    /// The next event to verify, with a token of its relay's budget if one is left; the relays take turns,
    /// so a relay with a full window cannot keep the workers from another relay's events. The token is
    /// taken here, with the job, so a worker needs the lock once per job; ``finish(_:_:now:)`` returns it
    /// when the id check fails, so tampered copies still cost no budget.
    public mutating func takeJob(now: ContinuousClock.Instant) -> VerificationJob? {
        guard !relays.isEmpty else { return nil }
        for step in 0..<relays.count {
            let index = (jobCursor + step) % relays.count
            guard let connection = relays[index].connection, let taken = relays[index].window.takeWaiting() else { continue }
            jobCursor = (index + 1) % relays.count
            waitingJobs -= 1
            if taken.trusted || relays[index].verifier.admit(now: now) {
                return VerificationJob(
                    relay: relays[index].key, connection: connection, sequence: taken.sequence, event: taken.event, admitted: true)
            }
            // The budget is spent: a priority author's event takes a token of its reserve if one is left.
            let reserved = taken.priority && takeReserve(index, author: taken.event.pubkeyHex, now: now)
            return VerificationJob(
                relay: relays[index].key, connection: connection, sequence: taken.sequence, event: taken.event,
                admitted: reserved, reserved: reserved)
        }
        return nil
    }

    /// The stateless part of a job (any thread, no lock): the id (one SHA-256), then — if the job holds a
    /// budget token — the pubkey's curve check and BIP-340.
    public static func verify(_ job: VerificationJob) -> Result<NostrEvent, NostrError> {
        let identified: EventVerifier.IdentifiedEvent
        do throws(NostrError) {
            identified = try EventVerifier.checkID(job.event)
        } catch {
            return .failure(error)
        }
        guard job.admitted else { return .failure(.overBudget) }
        do throws(NostrError) {
            return .success(try EventVerifier.checkSignature(identified))
        } catch {
            return .failure(error)
        }
    }

    /// A job's outcome: recorded, then everything of its connection that is now in order is delivered.
    public mutating func finish(_ job: VerificationJob, _ outcome: Result<NostrEvent, NostrError>, now: ContinuousClock.Instant)
        -> [RelayPoolEvent]
    {
        guard let index = relays.firstIndex(where: { $0.key == job.relay }), relays[index].connection == job.connection,
            relays[index].window.complete(job.sequence, outcome)
        else { return [] }
        if job.admitted, case .failure(let error) = outcome, error != .badSignature, error != .invalidPublicKey {
            // The id check failed: Schnorr never ran.
            if job.reserved {
                relays[index].reserves[job.event.pubkeyHex]?.refund()
            } else {
                relays[index].verifier.refund()
            }
        }
        relays[index].verifier.record(outcome)
        verifierCounters.record(outcome)
        var out: [RelayPoolEvent] = []
        while relays[index].connection != nil, let slot = relays[index].window.popReady() {
            deliver(slot, relay: index, now: now, into: &out)
        }
        if relays[index].readingPaused, relays[index].window.count <= Limits.resumeReadingAt, let connection = relays[index].connection {
            transport.setReading(connection, paused: false)
            relays[index].readingPaused = false
        }
        return out
    }

    /// Verifies every waiting event on this thread (``handle(_:now:unixNow:)``'s text path, and the live
    /// pool when no worker thread could be started).
    public mutating func verifyWaiting(now: ContinuousClock.Instant) -> [RelayPoolEvent] {
        var out: [RelayPoolEvent] = []
        while let job = takeJob(now: now) { out += finish(job, Self.verify(job), now: now) }
        return out
    }

    mutating func deliver(_ slot: InboundWindow.Slot, relay index: Int, now: ContinuousClock.Instant,
                                  into out: inout [RelayPoolEvent]) {
        switch slot {
        case .verified(.success(let event), let subscriptionID):
            if seen.contains(event.id.bytes) {
                // Another relay's copy (or this relay's earlier one) was delivered while this one waited.
                relays[index].stats.duplicates += 1
                return
            }
            guard let subscription = subscriptions[subscriptionID] else {
                drop(index, subscription: subscriptionID, .unknownSubscription, now: now, into: &out)
                return
            }
            guard subscription.filters.contains(where: { Self.matchesIgnoringTime($0, event) }) else {
                drop(index, subscription: subscriptionID, .filterMismatch, now: now, into: &out)
                return
            }
            seen.insert(event.id.bytes)
            relays[index].stats.delivered += 1
            out.append(.event(event, relay: relays[index].url, subscription: subscriptionID))
        case .verified(.failure(let error), let subscriptionID):
            drop(index, subscription: subscriptionID, InboundDrop(error), now: now, into: &out)
        case .message(let message, let unixNow):
            process(message, relay: index, now: now, unixNow: unixNow, into: &out)
        case .waiting(_, let subscriptionID, _, _):
            waitingJobs -= 1
            drop(index, subscription: subscriptionID, .connectionEnded, now: now, into: &out)
        case .verifying(let subscriptionID):
            drop(index, subscription: subscriptionID, .connectionEnded, now: now, into: &out)
        }
    }

    /// The connection is gone: what is ready is delivered in order, events still unverified are dropped
    /// (`connection_ended`), and the window starts empty for the next connection.
    mutating func flushWindow(relay index: Int, now: ContinuousClock.Instant, into out: inout [RelayPoolEvent]) {
        while let slot = relays[index].window.popFirst() { deliver(slot, relay: index, now: now, into: &out) }
        relays[index].window = InboundWindow(capacity: Limits.maxPendingFrames)
        relays[index].readingPaused = false
    }

    mutating func answered(relay index: Int, now: ContinuousClock.Instant) {
        relays[index].lastAnswer = now
        relays[index].machine.answered()
    }
}
