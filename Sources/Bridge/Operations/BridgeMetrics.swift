public import BotSupport
import BitchatWire
import IdentityCache
public import Mesh
public import MeshRuntime
import MeshSync
import ModerationLog
import Moderation
import BridgeCore
public import Courier

/// Every `/metrics` family the bridge exposes: its name, kind, help and label names — the one place metric
/// names are chosen (issue 15). Modules count in typed values (``Tally`` of ``CounterKey``s, counter
/// structs); ``BridgeMetrics/snapshot()`` turns them into series under these names. The metric
/// table is checked against this list by a test.
public enum BridgeMetric: String, CaseIterable, Sendable {
    // Relays (label `relay` = a configured URL: bounded by the configuration).
    case relayUp = "bitchat_bridge_relay_up"
    case relayAnswering = "bitchat_bridge_relay_answering"
    case relayState = "bitchat_bridge_relay_state"
    case relayClockOffset = "bitchat_bridge_relay_clock_offset_seconds"
    case relayReconnects = "bitchat_bridge_relay_reconnects_total"
    case relayFramesReceived = "bitchat_bridge_relay_frames_received_total"
    case relayEventsDelivered = "bitchat_bridge_relay_events_delivered_total"
    case relayDuplicates = "bitchat_bridge_relay_duplicates_total"
    case relayDropped = "bitchat_bridge_relay_dropped_total"
    case relayConnectFailures = "bitchat_bridge_relay_connect_failures_total"
    case relayConnectionsLost = "bitchat_bridge_relay_connections_lost_total"
    case relayRejections = "bitchat_bridge_relay_rejections_total"
    // Events from relays, all relays together.
    case eventsReceived = "bitchat_bridge_events_received_total"
    case eventsVerified = "bitchat_bridge_events_verified_total"
    case eventsRejected = "bitchat_bridge_events_rejected_total"
    case eventsDropped = "bitchat_bridge_events_dropped_total"
    // The bridge's own judgement and queues.
    case forwarded = "bitchat_bridge_forwarded_total"
    case downlinkForms = "bitchat_bridge_downlink_forms_total"
    case hidden = "bitchat_bridge_hidden_total"
    case deposits = "bitchat_bridge_deposits_total"
    case depositsDropped = "bitchat_bridge_deposits_dropped_total"
    case carriersDropped = "bitchat_bridge_carriers_dropped_total"
    case presenceSent = "bitchat_bridge_presence_sent_total"
    case queueDepth = "bitchat_bridge_queue_depth"
    case queueDropped = "bitchat_bridge_queue_dropped_total"
    // The mesh transport (radio hub connections or BlueZ).
    case meshUp = "bitchat_bridge_mesh_up"
    case meshLinks = "bitchat_bridge_mesh_links"
    case meshFramesReceived = "bitchat_bridge_mesh_frames_received_total"
    case meshTransportDropped = "bitchat_bridge_mesh_transport_dropped_total"
    case meshLinkDropped = "bitchat_bridge_mesh_link_dropped_total"
    case meshReconnects = "bitchat_bridge_mesh_reconnects_total"
    // The mesh engine (``MeshCounters``) and node.
    case meshPeers = "bitchat_bridge_mesh_peers"
    case meshPeerEvents = "bitchat_bridge_mesh_peer_events_total"
    case meshPins = "bitchat_bridge_mesh_pins_total"
    case meshLinkBindings = "bitchat_bridge_mesh_link_bindings_total"
    case meshPacketsReceived = "bitchat_bridge_mesh_packets_received_total"
    case meshPacketsOriginated = "bitchat_bridge_mesh_packets_originated_total"
    case meshIngressDropped = "bitchat_bridge_mesh_ingress_dropped_total"
    case meshDecodeRejected = "bitchat_bridge_mesh_decode_rejected_total"
    case meshVerificationFailed = "bitchat_bridge_mesh_verification_failed_total"
    case meshFragments = "bitchat_bridge_mesh_fragments_total"
    case meshCarriersRejected = "bitchat_bridge_mesh_carriers_rejected_total"
    case meshDedup = "bitchat_bridge_mesh_dedup_total"
    case meshRelayed = "bitchat_bridge_mesh_relayed_total"
    case meshRelayGate = "bitchat_bridge_mesh_relay_gate_total"
    case meshTransmit = "bitchat_bridge_mesh_transmit_total"
    case meshNodeDropped = "bitchat_bridge_mesh_node_dropped_total"
    // Identities and stores.
    case strangerCacheEntries = "bitchat_bridge_stranger_cache_entries"
    case strangerCacheEvictions = "bitchat_bridge_stranger_cache_evictions_total"
    case pinRefusals = "bitchat_bridge_identity_pin_refusals_total"
    case blockedKeys = "bitchat_bridge_blocked_keys"
    case moderationLogRecords = "bitchat_bridge_moderation_log_records"
    case storeFailures = "bitchat_bridge_store_failures_total"
    case syncRequests = "bitchat_bridge_sync_requests_total"
    case syncReplies = "bitchat_bridge_sync_replies_total"
    case syncReplyBytes = "bitchat_bridge_sync_reply_bytes_total"
    case boardPackets = "bitchat_bridge_board_packets_total"
    case fleetLists = "bitchat_bridge_fleet_lists_total"
    // The site's moderation records (issue 35).
    case siteRecordsOffered = "bitchat_bridge_site_records_total"
    case siteRecords = "bitchat_bridge_site_records"
    case siteRecordsUnacknowledged = "bitchat_bridge_site_records_unacknowledged"
    case siteStages = "bitchat_bridge_site_stages"
    case boardNostr = "bitchat_bridge_board_nostr_total"
    case uptime = "bitchat_bridge_uptime_seconds"
    // What runs, and whether it is well (issue 23).
    case buildInfo = "bitchat_bridge_build_info"
    case health = "bitchat_bridge_health"
    // The courier gateway (issue 24): counts without identities — no peer, tag or event id is ever a label.
    case courierDeposits = "bitchat_bridge_courier_deposits_total"
    case courierDrops = "bitchat_bridge_courier_drops_total"
    case courierPublishes = "bitchat_bridge_courier_publishes_total"
    case courierDeliveries = "bitchat_bridge_courier_deliveries_total"
    case courierRemoved = "bitchat_bridge_courier_removed_total"
    case courierAirtimeWaits = "bitchat_bridge_courier_airtime_waits_total"
    case courierMail = "bitchat_bridge_courier_mail"
    case courierWatchedPeers = "bitchat_bridge_courier_watched_peers"
    case courierSubscriptions = "bitchat_bridge_courier_subscriptions"
    case courierFilterTags = "bitchat_bridge_courier_filter_tags"
    // The process, under the names every Prometheus client library uses (no application prefix, by convention).
    case processCPUSeconds = "process_cpu_seconds_total"
    case processResidentMemory = "process_resident_memory_bytes"
    case processStartTime = "process_start_time_seconds"
    case processOpenFDs = "process_open_fds"
    case processMaxFDs = "process_max_fds"

    public var kind: MetricsSnapshot.Kind {
        switch self {
        case .relayUp, .relayAnswering, .relayState, .relayClockOffset, .queueDepth, .meshUp, .meshPeers, .meshLinks, .strangerCacheEntries,
            .blockedKeys, .moderationLogRecords, .uptime, .buildInfo, .health, .processResidentMemory, .processStartTime,
            .processOpenFDs, .processMaxFDs, .courierMail, .courierWatchedPeers, .courierSubscriptions,
            .courierFilterTags, .siteRecords, .siteRecordsUnacknowledged, .siteStages:
            .gauge
        default: .counter
        }
    }

    /// Label names, in the order each series carries them. Every label value is a typed key's label (a
    /// bounded set), a configured relay URL, or a live link's ID.
    public var labels: [String] {
        switch self {
        case .relayUp, .relayAnswering, .relayClockOffset, .relayReconnects, .relayFramesReceived, .relayEventsDelivered, .relayDuplicates: ["relay"]
        case .relayState: ["relay", "state"]
        case .relayDropped: ["relay", "reason"]
        case .relayConnectFailures, .relayConnectionsLost: ["relay", "kind"]
        case .relayRejections: ["relay", "message", "reason"]
        case .eventsRejected, .eventsDropped, .depositsDropped, .carriersDropped: ["reason"]
        case .forwarded: ["direction"]
        case .downlinkForms: ["queue"]
        case .hidden: ["direction", "rule"]
        case .presenceSent: ["kind"]
        case .queueDepth, .queueDropped: ["queue"]
        case .meshTransportDropped: ["direction", "reason"]
        case .meshLinkDropped: ["link", "direction", "reason"]
        case .meshPeerEvents, .meshPins, .meshLinkBindings, .meshFragments, .meshTransmit: ["event"]
        case .meshPacketsReceived, .meshPacketsOriginated: ["type"]
        case .meshIngressDropped, .meshVerificationFailed, .meshCarriersRejected, .meshNodeDropped: ["reason"]
        case .meshDecodeRejected: ["stage", "reason"]
        case .meshDedup: ["kind", "pool"]
        case .meshRelayed, .meshRelayGate: ["outcome"]
        case .storeFailures: ["store"]
        case .syncRequests, .syncReplies, .boardPackets, .fleetLists, .boardNostr, .siteRecordsOffered: ["outcome"]
        case .buildInfo: ["version", "commit"]
        case .health: ["component"]
        case .courierDeposits, .courierDrops, .courierPublishes, .courierDeliveries: ["outcome"]
        case .courierRemoved: ["store", "reason"]
        case .courierAirtimeWaits: ["cap"]
        case .courierMail: ["state"]
        default: []
        }
    }

    public var help: String {
        switch self {
        case .relayUp: "1 while the relay connection is open, else 0."
        case .relayAnswering: "1 while the relay is connected and answered within the answer window (what health counts), else 0."
        case .relayState: "Current state of each relay connection (1 = in this state)."
        case .relayClockOffset: "The relay's clock minus the bridge's, in seconds, from the Date header of its last upgrade answer (absent when it sent none); phones drop events outside ±900 s."
        case .relayReconnects: "Reconnections per relay since start."
        case .relayFramesReceived: "Text frames received from each relay, valid or not."
        case .relayEventsDelivered: "Events from each relay that passed every check and reached the bridge (first copy only)."
        case .relayDuplicates: "Copies of events already seen, per relay."
        case .relayDropped: "Frames and events dropped at intake, by relay and reason (stale/future = outside the ±900 s window)."
        case .relayConnectFailures: "Connection attempts that never came up, by relay and kind."
        case .relayConnectionsLost: "Open connections that ended, by relay and kind."
        case .relayRejections: "The relay's OK false (message=ok) and CLOSED (message=closed) answers, by NIP-01 reason prefix."
        case .eventsReceived: "Nostr events received from relays (EVENT frames that parsed, before any check)."
        case .eventsVerified: "Nostr events whose id and signature verified."
        case .eventsRejected: "Nostr events rejected by verification, by reason."
        case .eventsDropped: "Verified relay events not carried, by reason."
        case .forwarded: "Messages carried across, by direction; each once, however many forms it took on the mesh."
        case .downlinkForms: "Forms of channel messages put on the mesh, by queue (gateway carriers per level, bridge carriers, mirror lines)."
        case .hidden: "Messages hidden (block list or spam filter), by direction and rule."
        case .deposits: "Deposits from mesh-only phones accepted for publishing."
        case .depositsDropped: "Deposits from the mesh not published, by reason."
        case .carriersDropped: "Mesh carriers the bridge could not use, by reason."
        case .presenceSent: "Presence events published, by kind."
        case .queueDepth: "Items waiting in each queue."
        case .queueDropped: "Items dropped because a queue was full (or expired in it), by queue."
        case .meshUp: "1 while the mesh transport is up (every radio-hub connection; BlueZ powered and our GATT application registered)."
        case .meshLinks: "Direct links currently open."
        case .meshFramesReceived: "Frames the transport accepted from the radio."
        case .meshTransportDropped: "Frames the transport dropped, by direction (in/out) and reason."
        case .meshLinkDropped: "Frames the transport dropped on each live link, by direction and reason."
        case .meshReconnects: "Radio-hub connections re-established, or BlueZ registrations redone."
        case .meshPeers: "Mesh peers currently known (announced, not expired)."
        case .meshPeerEvents: "Peer table changes, by event (added, promoted, lost_*)."
        case .meshPins: "Pins kept beyond the live table, by event (verified_by_pin, refused, book_full, forgotten)."
        case .meshLinkBindings: "Direct announces' claims on the bridge's links, by event (bound, rebound, refused_cooldown, refused_bound_elsewhere, refused_full)."
        case .meshPacketsReceived: "Mesh packets processed, by type (after the ingress gate and dedup)."
        case .meshPacketsOriginated: "Mesh packets the bridge originated, by type."
        case .meshIngressDropped: "Frames dropped at the engine's ingress gate, by reason."
        case .meshDecodeRejected: "Bytes the mesh decoders rejected, by stage and reason."
        case .meshVerificationFailed: "Mesh packets that decoded but did not verify, by reason."
        case .meshFragments: "Fragment handling and reassembly budget events, by event."
        case .meshCarriersRejected: "Nostr carriers refused by the engine, by reason."
        case .meshDedup: "Dedup set hits (duplicate) and trims (evicted), by pool."
        case .meshRelayed: "Packets the engine could relay, by what became of them."
        case .meshRelayGate: "Public mesh messages held for the verdict, by outcome: released (passed), hidden (the judgement hid it), expired (no verdict within 5 s: withheld), overflow, cached_relay, cached_withhold, unattributed."
        case .meshTransmit: "The bridge's own transmissions: fragmented, cannot_fragment, sign_failed."
        case .meshNodeDropped: "Work the mesh node dropped, by reason (its queues were full, or a flush ran out of time)."
        case .strangerCacheEntries: "Identities held in the bounded stranger cache."
        case .strangerCacheEvictions: "Identities evicted from the stranger cache."
        case .pinRefusals: "Mesh announces refused because their signing key differs from the pinned one."
        case .blockedKeys: "Keys on the block list in force."
        case .moderationLogRecords: "Records in the moderation log."
        case .storeFailures: "Failed writes or reads of the bridge database, by store (the bridging goes on)."
        case .syncRequests: "REQUEST_SYNCs from mesh peers: answered (deferred: waited for their link's turn first), or the check that refused them."
        case .syncReplies: "Stored packets a sync request asked for: sent, covered by its filter, or withheld by the airtime budget."
        case .syncReplyBytes: "Bytes of sync replies sent (what the airtime budget counts)."
        case .boardPackets: "Board posts and tombstones received, by store outcome (only accepted ones are relayed)."
        case .fleetLists: "Fleet lists (operator-signed NIP-51 sets) offered, by outcome: applied, older, ignored_author, other_site, invalid."
        case .siteRecordsOffered: "Site moderation records offered (from relays, the store, and made here), by outcome: applied, older, ignored_author, other_site, unreadable, invalid, full."
        case .siteRecords: "Targets (blocks, staff marks, words, releases) the site's records hold on this stage (at most 20,000)."
        case .siteRecordsUnacknowledged: "Site records made on this stage that no relay has acknowledged yet (published again every 30 s and when a relay returns)."
        case .siteStages: "Stages of the site (this one included) whose heartbeat was heard within the last 3 minutes."
        case .boardNostr: "Board posts and tombstones between the board and Nostr: kind-1 copy published, skipped (author bridged it, or not bridged), kind 5 sent, failed; carried in from another island's copy (inbound_*: relayed, stored for sync only, duplicate, hidden, rejected, undecodable, bad_signature, wrong_geohash)."
        case .uptime: "Seconds since the bridge started."
        case .buildInfo: "1, labelled with the release (version) and the commit it was built from (unknown unless the build stamped it)."
        case .health: "1 while the component passes its /healthz check (relays: one answering; mesh: the transport up), else 0."
        case .courierDeposits: "Courier envelopes (0x04) phones handed the bridge, by outcome: accepted, duplicate, malformed, expired, expiry_too_far, for_bridge, rate_limited, depositor_full; refused by the engine: not_direct, unverified_depositor."
        case .courierDrops: "Kind-1401 drops from the courier relays, by outcome: queued (for a watched peer), duplicate, not_watched, for_bridge, or the refusal (bad_base64, malformed, expired, expiry_too_far, tag_mismatch, expiration_mismatch, too_large, wrong_kind)."
        case .courierPublishes: "Drops published for held mail, by outcome: sent, confirmed (a relay's OK true within 10 s), refused, unanswered, unencodable."
        case .courierDeliveries: "Directed 0x04 handovers to mesh peers, by outcome: sent, delivered (a link took it), failed (direct on no link)."
        case .courierRemoved: "Courier mail removed before handover, by store (held, pending) and reason (evicted by a quota, expired)."
        case .courierAirtimeWaits: "Times ready courier handovers began waiting for airtime, by the cap that held them: peer_rate (6 a minute per phone), bytes (256 KiB a minute over all links), downlink_budget (no slot in the mesh's one downlink schedule: chat first, courier's share 10 of the 30 a minute)."
        case .courierMail: "Courier mail kept now, by state: held (deposits, published as drops), pending (drops waiting for their peer)."
        case .courierWatchedPeers: "Mesh peers whose courier tags the bridge watches on the courier relays."
        case .courierSubscriptions: "Courier watch subscriptions open on each courier relay."
        case .courierFilterTags: "Tags per courier subscription filter now: 300 at start, halved each time a relay refuses a filter (its CLOSED or NOTICE), not below 48."
        case .processCPUSeconds: "User and system CPU time the process spent, seconds."
        case .processResidentMemory: "Resident memory of the process, bytes."
        case .processStartTime: "When the process started, seconds since the Unix epoch."
        case .processOpenFDs: "Open file descriptors of the process."
        case .processMaxFDs: "The process's limit on open file descriptors."
        }
    }
}

/// The bridge's operational figures, gathered each time it publishes status (every few seconds) and turned
/// into a ``MetricsSnapshot`` by ``snapshot()`` under the names of ``BridgeMetric``. A plain value: the
/// executable fills it from the coordinator's ``BridgeCoordinator/Snapshot``, the relay pool's snapshot, the
/// mesh node's typed counters and the transport's status.
///
/// The mesh side is kept as the mesh module's typed values (``MeshCounters``, ``MeshTransportStatus``); the
/// relay side crosses as ``RelayFigures`` (this module does not import the relay pool: label-keyed
/// dictionaries there are `Tally.byLabel` of the pool's typed counters).
public struct BridgeMetrics: Sendable, Equatable {
    /// One relay's figures (from the pool's `RelaySnapshot`).
    public struct RelayFigures: Sendable, Equatable {
        /// One of ``BridgeMetrics/relayStateNames`` (`open` = connected).
        public var state = "closed"
        public var answering = false
        /// The relay's clock minus ours at the last connect (its `Date` header), nil when unknown.
        public var clockOffset: Int64?
        public var reconnects = 0
        public var framesReceived = 0
        /// EVENT frames that parsed.
        public var eventsReceived = 0
        public var delivered = 0
        public var duplicates = 0
        /// Inbound drops: `reason → count` (the pool's `InboundDrop` labels).
        public var drops: [String: Int] = [:]
        /// Attempts that never came up / open connections that ended: `kind → count` (`ConnectionEnd`).
        public var failures: [String: Int] = [:]
        public var losses: [String: Int] = [:]
        /// `OK false` and `CLOSED` answers: `reason → count` (`RelayReason`).
        public var okRejected: [String: Int] = [:]
        public var closed: [String: Int] = [:]

        public init() {}
    }

    /// `relay URL → figures`.
    public var relays: [String: RelayFigures] = [:]
    public var eventsVerified = 0
    /// Verification failures: `reason → count` (e.g. `bad_signature`, `over_budget`).
    public var eventsRejected: [String: Int] = [:]
    /// Verified events not carried: `reason → count`.
    public var eventsDropped: [String: Int] = [:]
    /// `direction → count` (`nostr-to-mesh`, `mesh-to-nostr`).
    public var forwarded: [String: Int] = [:]
    public var downlinkForms: [String: Int] = [:]
    /// `(direction, rule) → count`.
    public var hidden: [HiddenKey: Int] = [:]
    public var deposits = 0
    public var depositsDropped: [String: Int] = [:]
    public var carriersDropped: [String: Int] = [:]
    public var presenceSent: [String: Int] = [:]
    public var queueDepths: [Queue: Int] = [:]
    public var queueDrops: [Queue: Int] = [:]
    public var meshPeers = 0
    /// The transport's own status (nil until the executable read it).
    public var meshTransport: MeshTransportStatus?
    /// The mesh engine's typed counters.
    public var mesh = MeshCounters()
    /// The mesh node's own drops.
    public var meshNode = MeshNode.Counters()
    public var strangerCacheEntries = 0
    public var strangerCacheEvictions = 0
    public var pinRefusals = 0
    public var blockedKeys = 0
    public var moderationLogRecords = 0
    public var storeFailures: [Store: Int] = [:]
    /// Gossip sync requests: `answered` or a refusal label (`SyncRefusal`).
    public var syncRequests: [String: Int] = [:]
    /// `SyncReplyOutcome` label → count.
    public var syncReplies: [String: Int] = [:]
    public var syncReplyBytes = 0
    /// `SyncBoardOutcome` label → count.
    public var boardPackets: [String: Int] = [:]
    /// `FleetListOutcome` label → count.
    public var fleetLists: [String: Int] = [:]
    /// The site's records (nil: this stage holds no operator key).
    public var site: BridgeCoordinator.SiteFigures?
    /// `BoardNostrOutcome` label → count.
    public var boardNostr: [String: Int] = [:]
    public var uptimeSeconds = 0.0
    /// The release and the commit it was built from.
    public var build = BuildInfo(version: "", commit: "")
    /// Each /healthz check by name: whether it passes.
    public var health: [String: Bool] = [:]
    /// The process's own figures (nil where /proc could not be read).
    public var process: ProcessFigures?
    /// The courier gateway's figures (nil with it off).
    public var courier: CourierFigures?

    /// The courier gateway's counters and sizes (``CourierGateway``), and the engine's refused deposits.
    public struct CourierFigures: Sendable, Equatable {
        public var counters = CourierCounters()
        public var held = 0
        public var pending = 0
        public var watchedPeers = 0
        public var subscriptions = 0
        public var tagsPerFilter = 0

        public init() {}
    }

    /// The `queue` label of ``BridgeMetric/queueDepth`` and ``BridgeMetric/queueDropped``: each queue's name is
    /// chosen here and nowhere else.
    public enum Queue: String, CounterKey, CaseIterable {
        /// Channel messages waiting for the mesh (the router's downlink queue).
        case downlink
        /// Deposits held while no relay is connected.
        case uplink
        /// Uplinks no relay has acknowledged yet, kept in `bridge.sqlite3`.
        case uplinkStore = "uplink_store"
        /// The coordinator's ordered mesh submissions.
        case meshOutbox = "mesh_outbox"
        /// The relay pool's event stream.
        case relayEvents = "relay_events"
        /// Events waiting in the relay pool to be published.
        case relayPublish = "relay_publish"
    }

    /// The `store` label of ``BridgeMetric/storeFailures``.
    public enum Store: String, CounterKey, CaseIterable {
        case recentEvents = "recent_events"
        case pendingUplinks = "pending_uplinks"
        case moderationLog = "moderation_log"
        case identities
        case blockList = "block_list"
        case syncPackets = "sync_packets"
        case courier
        case siteRecords = "site_records"
    }

    /// The `reason` label of ``BridgeMetric/meshNodeDropped`` (the mesh node's ``MeshNode/Counters``).
    public enum MeshNodeDrop: String, CounterKey, CaseIterable {
        case actions, transmits, inputs
        case flushTimeout = "flush_timeout"
    }

    public struct BuildInfo: Equatable, Sendable {
        public var version: String
        public var commit: String

        public init(version: String, commit: String) {
            self.version = version
            self.commit = commit
        }
    }

    public struct HiddenKey: Hashable, Sendable {
        public var direction: String
        public var rule: String

        public init(direction: String, rule: String) {
            self.direction = direction
            self.rule = rule
        }
    }

    /// The states a relay can be reported in; every one is rendered (0 or 1) so dashboards see transitions.
    public static let relayStateNames = ["connecting", "open", "backoff", "failed", "closed"]

    public init() {}

    /// Events received from every relay (EVENT frames that parsed).
    public var eventsReceived: Int { relays.values.reduce(0) { $0 + $1.eventsReceived } }

    /// Fills the bridge-side figures from the coordinator's snapshot.
    public mutating func add(_ bridge: BridgeCoordinator.Snapshot) {
        let c = bridge.router
        forwarded[BridgeRouter.Direction.nostrToMesh.rawValue] = bridge.airtime.messages
        forwarded[BridgeRouter.Direction.meshToNostr.rawValue] = c.uplinked
        downlinkForms = bridge.airtime.broadcasts.byLabel
        for (key, count) in c.hidden.counts {
            hidden[HiddenKey(direction: key.direction.rawValue, rule: key.rule.label), default: 0] += count
        }
        eventsDropped = c.relayDrops.byLabel
        deposits = c.depositsAccepted
        depositsDropped = c.depositDrops.byLabel
        carriersDropped = c.carrierDrops.byLabel
        presenceSent = c.presenceSent.byLabel
        queueDepths[.downlink] = bridge.pendingDownlinks
        queueDepths[.uplink] = bridge.queuedUplinks
        queueDrops[.downlink] = bridge.airtime.queueDrops.total
        queueDrops[.uplink] = c.depositDrops[.queueFull]
        queueDrops[.meshOutbox] = bridge.coordinator.meshOutboxDrops
        if let stored = bridge.storedUplinks { queueDepths[.uplinkStore] = stored }
        if let store = bridge.uplinkStore { queueDrops[.uplinkStore] = store.dropped + store.expired }
        meshPeers = bridge.meshPeers
        strangerCacheEntries = bridge.strangerCacheEntries ?? 0
        strangerCacheEvictions = bridge.identities.evictedByCap + bridge.identities.forgottenByAge
        pinRefusals = bridge.identities.rejectedPinMismatches
        blockedKeys = bridge.blockedKeys
        moderationLogRecords = bridge.moderationRecords ?? 0
        let failures = bridge.coordinator
        storeFailures = [
            .recentEvents: failures.failedPersists, .pendingUplinks: failures.failedUplinkWrites,
            .moderationLog: failures.failedModerationWrites, .identities: failures.failedSightingWrites,
            .blockList: failures.failedBlockListReads, .syncPackets: bridge.syncWriteFailures,
            .courier: failures.failedCourierWrites, .siteRecords: failures.failedSiteWrites,
        ]
        syncRequests = bridge.sync.refused.byLabel
        syncRequests["answered"] = bridge.sync.answered
        syncRequests["deferred"] = bridge.sync.deferred
        syncReplies = bridge.sync.replies.byLabel
        syncReplyBytes = bridge.sync.replyBytes
        boardPackets = bridge.boardPackets.byLabel
        fleetLists = bridge.fleetLists.byLabel
        site = bridge.site
        boardNostr = bridge.boardNostr.byLabel
        courier = bridge.courier
    }

    public func snapshot() -> MetricsSnapshot {
        var writer = MetricsWriter()
        writeRelays(&writer)
        writeBridge(&writer)
        writeMesh(&writer)
        writeStores(&writer)
        writer.add(.uptime, [], uptimeSeconds)
        writer.add(.buildInfo, [build.version, build.commit], 1)
        for (component, ok) in health.sorted(by: { $0.key < $1.key }) { writer.add(.health, [component], ok ? 1 : 0) }
        if let process {
            writer.add(.processCPUSeconds, [], process.cpuSeconds)
            writer.add(.processResidentMemory, [], process.residentBytes)
            writer.add(.processStartTime, [], process.startTime)
            writer.add(.processOpenFDs, [], process.openFDs)
            writer.add(.processMaxFDs, [], process.maxFDs)
        }
        return writer.snapshot
    }

    private func writeRelays(_ w: inout MetricsWriter) {
        let urls = relays.keys.sorted()
        for url in urls { w.add(.relayUp, [url], relays[url]?.state == "open" ? 1 : 0) }
        for url in urls { w.add(.relayAnswering, [url], relays[url]?.answering == true ? 1 : 0) }
        for url in urls { if let offset = relays[url]?.clockOffset { w.add(.relayClockOffset, [url], Double(offset)) } }
        for url in urls {
            let current = relays[url]?.state ?? ""
            var names = Self.relayStateNames
            if !names.contains(current) { names.append(current) }
            for state in names { w.add(.relayState, [url, state], state == current ? 1 : 0) }
        }
        for url in urls { w.add(.relayReconnects, [url], Double(relays[url]?.reconnects ?? 0)) }
        for url in urls { w.add(.relayFramesReceived, [url], Double(relays[url]?.framesReceived ?? 0)) }
        for url in urls { w.add(.relayEventsDelivered, [url], Double(relays[url]?.delivered ?? 0)) }
        for url in urls { w.add(.relayDuplicates, [url], Double(relays[url]?.duplicates ?? 0)) }
        for url in urls { w.addEach(.relayDropped, relays[url]?.drops ?? [:], under: [url]) }
        for url in urls { w.addEach(.relayConnectFailures, relays[url]?.failures ?? [:], under: [url]) }
        for url in urls { w.addEach(.relayConnectionsLost, relays[url]?.losses ?? [:], under: [url]) }
        for url in urls {
            w.addEach(.relayRejections, relays[url]?.okRejected ?? [:], under: [url, "ok"])
            w.addEach(.relayRejections, relays[url]?.closed ?? [:], under: [url, "closed"])
        }
    }

    private func writeBridge(_ w: inout MetricsWriter) {
        w.add(.eventsReceived, eventsReceived)
        w.add(.eventsVerified, eventsVerified)
        w.addEach(.eventsRejected, eventsRejected)
        w.addEach(.eventsDropped, eventsDropped)
        w.addEach(.forwarded, forwarded)
        w.addEach(.downlinkForms, downlinkForms)
        for (key, count) in hidden.sorted(by: { ($0.key.direction, $0.key.rule) < ($1.key.direction, $1.key.rule) }) {
            w.add(.hidden, [key.direction, key.rule], Double(count))
        }
        w.add(.deposits, deposits)
        w.addEach(.depositsDropped, depositsDropped)
        w.addEach(.carriersDropped, carriersDropped)
        w.addEach(.presenceSent, presenceSent)
        w.addEach(.queueDepth, queueDepths)
        w.addEach(.queueDropped, queueDrops)
    }

    private func writeMesh(_ w: inout MetricsWriter) {
        if let transport = meshTransport {
            w.add(.meshUp, transport.isUp ? 1 : 0)
            w.add(.meshLinks, transport.linksUp)
            let t = transport.counters
            w.add(.meshFramesReceived, t.framesIn)
            w.addTally(.meshTransportDropped, t.inboundDrops, under: ["in"])
            w.addTally(.meshTransportDropped, t.outboundDrops, under: ["out"])
            for (link, counters) in t.links.sorted(by: { $0.key < $1.key }) {
                w.addTally(.meshLinkDropped, counters.inboundDrops, under: [link.description, "in"])
                w.addTally(.meshLinkDropped, counters.outboundDrops, under: [link.description, "out"])
            }
            w.add(.meshReconnects, t.reconnects)
        }
        w.add(.meshPeers, meshPeers)
        w.addTally(.meshPeerEvents, mesh.peers)
        w.addTally(.meshPins, mesh.pins)
        w.addTally(.meshLinkBindings, mesh.links)
        w.addTally(.meshPacketsReceived, mesh.received)
        w.addTally(.meshPacketsOriginated, mesh.originated)
        w.addTally(.meshIngressDropped, mesh.ingress)
        w.addTally(.meshDecodeRejected, mesh.decode) { [$0.stage.rawValue, $0.reason.name] }
        w.addTally(.meshVerificationFailed, mesh.verification)
        w.addTally(.meshFragments, mesh.fragment)
        w.addTally(.meshCarriersRejected, mesh.carrier)
        w.addTally(.meshDedup, mesh.dedup) { [$0.kind.rawValue, $0.pool.rawValue] }
        w.addTally(.meshRelayed, mesh.relay)
        w.addTally(.meshRelayGate, mesh.relayGate)
        w.addTally(.meshTransmit, mesh.transmit)
        w.addEach(.meshNodeDropped, [
            MeshNodeDrop.actions: meshNode.droppedActions, .transmits: meshNode.droppedTransmits, .inputs: meshNode.droppedInputs,
            .flushTimeout: meshNode.abandonedAtFlush,
        ])
    }

    private func writeStores(_ w: inout MetricsWriter) {
        w.add(.strangerCacheEntries, strangerCacheEntries)
        w.add(.strangerCacheEvictions, strangerCacheEvictions)
        w.add(.pinRefusals, pinRefusals)
        w.add(.blockedKeys, blockedKeys)
        w.add(.moderationLogRecords, moderationLogRecords)
        w.addEach(.storeFailures, storeFailures)
        w.addEach(.syncRequests, syncRequests)
        w.addEach(.syncReplies, syncReplies)
        w.add(.syncReplyBytes, syncReplyBytes)
        w.addEach(.boardPackets, boardPackets)
        w.addEach(.fleetLists, fleetLists)
        if let site {
            w.addEach(.siteRecordsOffered, site.outcomes.byLabel)
            w.add(.siteRecords, site.targets)
            w.add(.siteRecordsUnacknowledged, site.unacknowledged)
            w.add(.siteStages, site.stagesHeard)
        }
        w.addEach(.boardNostr, boardNostr)
        writeCourier(&w)
    }

    private func writeCourier(_ w: inout MetricsWriter) {
        guard let courier else { return }
        let c = courier.counters
        w.addTally(.courierDeposits, c.deposits)
        w.addTally(.courierDeposits, mesh.courier)
        w.addTally(.courierDrops, c.drops)
        w.addTally(.courierDrops, c.dropRefusals)
        w.addTally(.courierPublishes, c.publishes)
        w.addTally(.courierDeliveries, c.deliveries)
        w.addTally(.courierRemoved, c.evictions) { [$0.rawValue, "evicted"] }
        w.addTally(.courierRemoved, c.expired) { [$0.rawValue, "expired"] }
        w.addTally(.courierAirtimeWaits, c.airtimeWaits)
        w.addEach(.courierMail, ["held": courier.held, "pending": courier.pending])
        w.add(.courierWatchedPeers, courier.watchedPeers)
        w.add(.courierSubscriptions, courier.subscriptions)
        w.add(.courierFilterTags, courier.tagsPerFilter)
    }
}

/// Builds a snapshot from typed metrics: every family declared (so an unset one still has its HELP and TYPE), each
/// sample's label values checked against the metric's label names.
struct MetricsWriter {
    typealias Label = MetricsSnapshot.Label
    private(set) var snapshot = MetricsSnapshot()

    init() {
        for metric in BridgeMetric.allCases { snapshot.declare(metric.rawValue, metric.help, kind: metric.kind) }
    }

    mutating func add(_ metric: BridgeMetric, _ value: Int) { add(metric, [], Double(value)) }

    mutating func add(_ metric: BridgeMetric, _ labelValues: [String], _ value: Double) {
        precondition(labelValues.count == metric.labels.count, "\(metric.rawValue): labels \(metric.labels)")
        snapshot.add(metric.rawValue, help: metric.help, kind: metric.kind,
                     labels: zip(metric.labels, labelValues).map { Label($0, $1) }, value: value)
    }

    /// One series per key, sorted by label, each under the fixed leading label values `prefix`.
    mutating func addEach(_ metric: BridgeMetric, _ values: [String: Int], under prefix: [String] = []) {
        for (label, count) in values.sorted(by: { $0.key < $1.key }) { add(metric, prefix + [label], Double(count)) }
    }

    mutating func addEach<K: CounterKey>(_ metric: BridgeMetric, _ values: [K: Int]) {
        addEach(metric, Dictionary(uniqueKeysWithValues: values.map { ($0.key.label, $0.value) }))
    }

    /// One series per distinct label values (keys that share their labels, as every unknown packet type does,
    /// are summed into one), in label order.
    mutating func addTally<K: CounterKey>(_ metric: BridgeMetric, _ tally: Tally<K>, under prefix: [String] = [], labels: (K) -> [String]) {
        var summed: [[String]: Int] = [:]
        for (key, count) in tally.counts { summed[prefix + labels(key), default: 0] += count }
        for (values, count) in summed.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) { add(metric, values, Double(count)) }
    }

    mutating func addTally<K: CounterKey>(_ metric: BridgeMetric, _ tally: Tally<K>, under prefix: [String] = []) {
        addTally(metric, tally, under: prefix) { [$0.label] }
    }
}
