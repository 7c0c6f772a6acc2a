import BotSupport
public import Nostr
public import SpamFilter
public import Identity

/// Inbound relay traffic, already verified by the pool (structure, verification budget, signature).
public enum BridgeRelayInput: Sendable {
    case event(NostrEvent)
    /// How many relays are connected now.
    case connectedRelays(Int)
    /// A relay answered `OK true` for this event (stored, or `duplicate:`): it is no longer a pending uplink.
    case accepted(EventID)
    /// A relay answered `OK false` for this event, with its message (`rate-limited: …`, `invalid: …`).
    case refused(EventID, message: String)
}

/// What the operator asks of a running bridge (signals today; the console later). Thread-safe to submit
/// (``BridgeCoordinator/submit(_:)``), handled in order on the coordinator.
public enum OperatorInput: Sendable {
    /// SIGHUP: the policy file read again (or why it could not be read).
    case reloadPolicy(Result<OperatorLists, OperatorLists.LoadError>)
    /// The console's settings: shadow mode on or off, at once, without a restart.
    case setShadowMode(Bool)
    /// The console's settings: the keyword/regex denylist, in force from the next message; `by` names who set it
    /// (the site's word records carry it).
    case setDenylist(Denylist, by: String)
    /// The console blocked or unblocked a sender: a bridge holding an operator key publishes the change to the
    /// fleet list (read-modify-write of the newest list); one that holds none ignores it.
    case fleetChange(FleetChange)
    /// A moderator's block, staff mark, word or release (and their removals), by who the audit names: with the
    /// operator key, a site record every stage applies (issue 35); without it, nothing more than the local change.
    case site(SiteTarget, on: Bool, by: String)
    /// The console's settings: new spam filter limits (the `spam` object's keys), in force from the next
    /// message; every sender's budget starts again full (``BridgeJudge/setSpamConfig(_:)``).
    case setSpamLimits(SpamFilterConfig)
}
