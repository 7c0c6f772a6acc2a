import BotCrypto
import BotSupport
public import Nostr
public import WebSocketRuntime

/// The pool's inbound side: parsed frames received, events taken in, and every relay message processed in
/// arrival order (``RelayPoolCore``'s inbound path).
extension RelayPoolCore {
    /// One parsed text frame from `connection`: counted, its drops reported, its event queued for
    /// verification (``takeJob(now:)``), any other message handled now — or, if events of this connection are
    /// still being verified, after them.
    public mutating func receive(
        _ parsed: Result<RelayMessage, NostrError>, on connection: ConnectionID, now: ContinuousClock.Instant,
        unixNow: Int64
    ) -> [RelayPoolEvent] {
        guard let index = relayIndex(connection) else { return [] }
        var out: [RelayPoolEvent] = []
        answered(relay: index, now: now)
        relays[index].stats.framesReceived += 1
        switch parsed {
        case .failure(let error):
            drop(index, subscription: nil, InboundDrop(error), now: now, into: &out)
        case .success(.event(let subscriptionID, let unverified)):
            relays[index].stats.eventsReceived += 1
            intake(unverified, subscription: subscription(receivedAs: subscriptionID).id, relay: index, now: now, unixNow: unixNow, into: &out)
        case .success(let message):
            if relays[index].window.isEmpty || !relays[index].window.append(.message(message, unixNow: unixNow)) {
                process(message, relay: index, now: now, unixNow: unixNow, into: &out)
            }
        }
        return out
    }

    mutating func intake(
        _ unverified: UnverifiedEvent, subscription: String, relay index: Int, now: ContinuousClock.Instant, unixNow: Int64,
        into out: inout [RelayPoolEvent]
    ) {
        guard let known = subscriptions[subscription] else {
            drop(index, subscription: subscription, .unknownSubscription, now: now, into: &out)
            return
        }
        let trusted = known.trustedAuthors.contains(unverified.pubkeyHex)
        // Cheap checks before the expensive ones: a relay's backfill of old events costs no Schnorr check.
        if let window = configuration.freshnessWindow, !trusted {
            if unverified.createdAt < unixNow - window {
                drop(index, subscription: subscription, .stale, now: now, into: &out)
                return
            }
            if unverified.createdAt > unixNow + window {
                drop(index, subscription: subscription, .future, now: now, into: &out)
                return
            }
        }
        // Dedup lookup before verification; ids are recorded only after success, so a forged copy
        // cannot suppress the genuine event (NOSTR-GEO §5.5 steps 3–4).
        if trusted { noteBackfill(subscription, relay: index, createdAt: unverified.createdAt) }
        if let claimed = unverified.claimedID, seen.contains(claimed.bytes) {
            relays[index].stats.duplicates += 1
            return
        }
        if trusted { relays[index].backfills[subscription]?.fresh += 1 }
        let priority = priorityAuthors.contains(unverified.pubkeyHex)
        if !trusted && !relays[index].verifier.hasBudget(now: now) && !(priority && reserveHasToken(index, author: unverified.pubkeyHex, now: now)) {
            // Over budget: only the id check is left to do (it decides between `id_mismatch`, a strike, and
            // `over_budget`). One SHA-256 here costs less than handing it to a worker (a wake-up and two
            // context switches), which made each frame of an over-budget flood several times dearer.
            let outcome = Self.verify(VerificationJob(
                relay: relays[index].key, connection: ConnectionID(raw: 0), sequence: 0, event: unverified, admitted: false))
            relays[index].verifier.record(outcome)
            verifierCounters.record(outcome)
            let slot = InboundWindow.Slot.verified(outcome, subscription: subscription)
            if relays[index].window.isEmpty || !relays[index].window.append(slot) {
                deliver(slot, relay: index, now: now, into: &out)
            }
            return
        }
        guard relays[index].window.append(.waiting(unverified, subscription: subscription, priority: priority, trusted: trusted)) else {
            drop(index, subscription: subscription, .verificationQueueFull, now: now, into: &out)
            return
        }
        waitingJobs += 1
        if !relays[index].readingPaused, relays[index].window.count >= Limits.pauseReadingAt, let connection = relays[index].connection {
            transport.setReading(connection, paused: true)
            relays[index].readingPaused = true
            relays[index].stats.readPauses += 1
        }
    }

    func relayIndex(_ id: ConnectionID) -> Int? { relays.firstIndex { $0.connection == id } }

    mutating func drop(
        _ index: Int, subscription: String?, _ reason: InboundDrop, now: ContinuousClock.Instant,
        into out: inout [RelayPoolEvent]
    ) {
        relays[index].stats.drops.add(reason)
        let count = relays[index].stats.drops[reason]
        if Self.isReported(count) {
            out.append(.rejected(relay: relays[index].url, subscription: subscription, reason: reason, count: count))
        }
        if reason.isStrike, relays[index].connection != nil, !relays[index].strikes.take(now: now) {
            closeByPool(
                relay: index, .misbehaving,
                detail: "used up its allowance of \(Int(configuration.misbehaviour.allowance)) malformed frames and invalid events (last: \(reason.rawValue))",
                now: now, into: &out)
        }
    }

    /// Closes an open connection for the relay's behaviour; the machine backs it off as any failure.
    mutating func closeByPool(
        relay index: Int, _ why: ConnectionEnd, detail: String, now: ContinuousClock.Instant, into out: inout [RelayPoolEvent]
    ) {
        guard let connection = relays[index].connection else { return }
        out.append(.closedByPool(relay: relays[index].url, why: why, detail: detail))
        transport.close(connection)
        let kind: RelayConnectionMachine.Failure = why == .misbehaving ? .misbehaving : .unanswered
        connectionEnded(relay: index, kind, why, reason: "\(why.rawValue): \(detail)", now: now, into: &out)
    }

    /// An attempt or a connection ended: counted by how, its window flushed, and the machine told.
    mutating func connectionEnded(
        relay index: Int, _ kind: RelayConnectionMachine.Failure, _ end: ConnectionEnd, reason: String,
        now: ContinuousClock.Instant, into out: inout [RelayPoolEvent]
    ) {
        let wasConnected = relays[index].machine.isConnected
        relays[index].connection = nil
        flushWindow(relay: index, now: now, into: &out)
        relays[index].stats.lastFailure = reason
        if wasConnected {
            relays[index].stats.losses.add(end)
        } else {
            relays[index].stats.failures.add(end)
            out.append(.connectFailed(relay: relays[index].url, reason: reason))
        }
        let actions = relays[index].machine.ended(kind, now: now)
        perform(actions, relay: index, now: now, unixNow: 0, reason: reason, into: &out)
    }

    /// A non-event message, in its turn.
    mutating func process(
        _ message: RelayMessage, relay index: Int, now: ContinuousClock.Instant, unixNow: Int64,
        into out: inout [RelayPoolEvent]
    ) {
        let url = relays[index].url
        switch message {
        case .ok(let eventID, let accepted, let reason):
            if accepted {
                relays[index].stats.okAccepted += 1
            } else {
                relays[index].stats.okRejected.add(RelayReason(message: reason))
            }
            if eventID == relays[index].auth.eventID, !eventID.isEmpty {
                if accepted { authenticated(relay: index, unixNow: unixNow) }
            } else if !accepted, reason.hasPrefix("auth-required:"), configuration.authKey != nil,
                let text = relays[index].auth.unconfirmed.removeValue(forKey: eventID)
            {
                if relays[index].auth.authenticated {
                    retry(event: eventID, text: text, relay: index)
                } else if relays[index].auth.refused.append(text) != nil {
                    relays[index].stats.queueDropped += 1
                }
            } else {
                relays[index].auth.unconfirmed.removeValue(forKey: eventID)
            }
            out.append(.ok(relay: url, eventID: eventID, accepted: accepted, message: reason))
        case .event:
            break  // events take the verified path (intake → window → deliver)
        case .endOfStoredEvents(let subscriptionID):
            relays[index].stats.eoseReceived += 1
            eoseAnswered(subscriptionID, relay: url, into: &out)
            backfillEnded(subscriptionID, relay: index, now: now)
        case .closed(let subscriptionID, let reason):
            relays[index].stats.closed.add(RelayReason(message: reason))
            if case (let id, true) = subscription(receivedAs: subscriptionID) { pageClosed(id, relay: index) }
            relays[index].activeSubscriptions.remove(subscriptionID)
            if reason.hasPrefix("auth-required:"), configuration.authKey != nil, subscriptions[subscriptionID] != nil {
                if relays[index].auth.authenticated {
                    // Closed although we are authenticated (the REQ crossed our AUTH): once more.
                    if relays[index].auth.retried.insert("sub:" + subscriptionID).inserted {
                        relays[index].stats.authRetried += 1
                        send(subscription: subscriptionID, relay: index, unixNow: unixNow)
                    }
                } else {
                    relays[index].auth.closedSubscriptions.insert(subscriptionID)
                }
            }
            eoseAnswered(subscriptionID, relay: url, into: &out)
            out.append(.closed(relay: url, subscription: subscriptionID, message: reason))
        case .notice(let text):
            relays[index].stats.notices += 1
            if relays[index].notices.take(now: now) {
                out.append(.notice(relay: url, message: text))
            } else {
                relays[index].stats.noticesSuppressed += 1
            }
        case .auth(let challenge):
            guard let key = configuration.authKey, let connection = relays[index].connection else {
                relays[index].stats.authIgnored += 1
                return
            }
            let unsigned = UnsignedEvent(pubkey: key.publicKey, createdAt: unixNow, kind: NostrKind.clientAuthentication,
                                         tags: [["relay", url], ["challenge", challenge]], content: "")
            guard let signed = try? unsigned.signed(with: key) else {
                drop(index, subscription: nil, .authSigningFailed, now: now, into: &out)
                return
            }
            relays[index].auth.eventID = signed.id.hex
            relays[index].stats.authAnswered += 1
            transport.send(connection, text: ClientMessage.auth(signed).text)
        }
    }

    /// Kinds, tags, ids and authors; `since`/`until` stay the relay's business (clock skew, replays).
    static func matchesIgnoringTime(_ filter: NostrFilter, _ event: NostrEvent) -> Bool {
        var filter = filter
        filter.since = nil
        filter.until = nil
        return filter.matches(event)
    }

    /// The relay accepted our AUTH: re-send what it refused for want of it, subscriptions first.
    mutating func authenticated(relay index: Int, unixNow: Int64) {
        var auth = relays[index].auth
        auth.authenticated = true
        auth.eventID = nil
        let closed = auth.closedSubscriptions
        auth.closedSubscriptions.removeAll()
        var refused: [String] = []
        while let text = auth.refused.popFirst() { refused.append(text) }
        auth.unconfirmed.removeAll()
        auth.unconfirmedOrder = BoundedQueue(capacity: Limits.maxQueuedEvents)
        relays[index].auth = auth
        for id in subscriptionOrder where closed.contains(id) && relays[index].auth.retried.insert("sub:" + id).inserted {
            relays[index].stats.authRetried += 1
            send(subscription: id, relay: index, unixNow: unixNow)
        }
        for text in refused { retry(event: nil, text: text, relay: index) }
    }

    mutating func retry(event id: String?, text: String, relay index: Int) {
        guard let connection = relays[index].connection else { return }
        if let id, !relays[index].auth.retried.insert("event:" + id).inserted { return }
        relays[index].stats.authRetried += 1
        transport.send(connection, text: text)
    }

    mutating func eoseAnswered(_ id: String, relay url: String, into out: inout [RelayPoolEvent]) {
        // Only a relay that was sent the REQ can complete the initial load; one that never got it
        // (connected later, or not at all) must not end it early.
        guard var subscription = subscriptions[id], subscription.eoseWaiting.remove(url) != nil else { return }
        if subscription.eoseWaiting.isEmpty, !subscription.eoseReported {
            subscription.eoseReported = true
            out.append(.endOfStoredEvents(subscription: id, fallback: false))
        }
        subscriptions[id] = subscription
    }

    mutating func send(subscription id: String, relay index: Int, unixNow: Int64) {
        guard let subscription = subscriptions[id], let connection = relays[index].connection else { return }
        transport.send(connection, text: subscription.request(unixNow: unixNow).text)
        relays[index].activeSubscriptions.insert(id)
        if !subscription.eoseReported { subscriptions[id]?.eoseWaiting.insert(relays[index].url) }
        startBackfill(id, relay: index)
    }

    mutating func perform(
        _ actions: [RelayConnectionMachine.Action], relay index: Int, now: ContinuousClock.Instant, unixNow: Int64,
        reason: String = "", into out: inout [RelayPoolEvent]
    ) {
        for action in actions {
            switch action {
            case .connect:
                relays[index].connection = transport.open(relays[index].endpoint)
            case .abort:
                if let connection = relays[index].connection { transport.close(connection) }
                relays[index].connection = nil
                let text = "connect: no WebSocket upgrade within \(configuration.connectTimeout.components.seconds) s"
                relays[index].stats.failures.add(.timeout)
                relays[index].stats.lastFailure = text
                out.append(.connectFailed(relay: relays[index].url, reason: text))
            case .close:
                if let connection = relays[index].connection { transport.close(connection) }
                relays[index].connection = nil
                flushWindow(relay: index, now: now, into: &out)
            case .connected:
                relays[index].stats.connects += 1
                guard let connection = relays[index].connection else { continue }
                relays[index].openedAt = now
                relays[index].lastAnswer = nil
                relays[index].lastProbe = now
                relays[index].window = InboundWindow(capacity: Limits.maxPendingFrames)
                relays[index].readingPaused = false
                // The first liveness probe: a relay without subscriptions to answer proves itself with a PONG.
                transport.ping(connection)
                while let queued = relays[index].queue.popFirst() { send(queued, relay: index, connection: connection) }
                relays[index].activeSubscriptions.removeAll()
                for id in subscriptionOrder { send(subscription: id, relay: index, unixNow: unixNow) }
                out.append(.connected(relay: relays[index].url))
            case .disconnected:
                relays[index].stats.disconnects += 1
                relays[index].activeSubscriptions.removeAll()
                relays[index].auth = AuthSession()
                relays[index].openedAt = nil
                relays[index].lastAnswer = nil
                relays[index].lastProbe = nil
                for id in subscriptionOrder { eoseAnswered(id, relay: relays[index].url, into: &out) }
                out.append(.disconnected(relay: relays[index].url, reason: reason.isEmpty ? "closed" : reason))
            }
        }
    }
}
