import BotStorage
import Bridge
public import BotSupport
import IdentityCache
import ModerationLog
public import SpamFilter
import Synchronization
public import WebSocketRuntime
import Identity
import Moderation
public import BridgeCore

/// The console's HTTP routes on the bridge's listener, beside `/healthz` and `/metrics`:
///
/// | route | what |
/// |---|---|
/// | `GET /console` (and `/console/…` assets) | the console page, compiled into the binary |
/// | `POST /console/login` (form `token`) / `POST /console/logout` | trade the token for a session cookie |
/// | `GET /api/session` | whether this browser is signed in, and whether a token exists (never the token) |
/// | `GET /api/audit?limit=&before=` | the audit table, newest first |
/// | `GET /api/modlog?…` / `GET /api/modlog/rules` | the moderation log, filtered and paged / the rules its rows can hold |
/// | `GET /api/charts` | the last hour per minute (``ChartSeries``): forwarded, hidden by rule, relays up, mesh peers, queue depths |
/// | `GET /api/senders/KEY` | an identity row (display names, first/last seen, relationships) and its recent verdicts |
/// | `POST /api/senders/KEY/ACTION` | `block`, `unblock`, `allow`, `unallow`, `verify`, `unverify`, `note` (form `text`) |
/// | `POST /api/spam` (form `json`: the `spam` object) | new spam limits, in force at once (until the next restart) |
///
/// Every state-changing request passes ``ConsoleAccess`` and lands in ``ConsoleAudit``, done or refused.
/// Sender actions write the identity rows as `bitchat-bridge identities` does, through ``ConsoleStoreAccess``:
/// in the bridge on the bridge's one connection, on the coordinator, which reloads its block list into the
/// judge right after (a CLI's commit reaches it through SQLite `data_version` within a second).
///
/// Threading: the listener calls ``handle(_:)`` on its one service thread; the state sits behind a `Mutex`.
/// Work in the bridge (a release, the stores) is awaited from that thread through ``AwaitedTasks``; ``stop()``
/// cancels and awaits what is still running.
public final class ConsoleService: Sendable {
    public struct Dependencies: Sendable {
        /// Unix seconds.
        public var now: @Sendable () -> Double
        public var random: @Sendable (Int) -> [UInt8]
        /// The status board's answer for routes that are not the console's (`/healthz`, `/metrics`, 404).
        public var fallback: @Sendable (_ method: String, _ path: String) -> HTTPResponse
        /// The live view's feed (nil: no live view).
        public var feed: ConsoleFeed?
        /// Applies shadow mode in the running bridge (the coordinator's operator input); nil: not offered.
        public var setShadowMode: (@Sendable (Bool) -> Void)?
        /// Shadow mode at start (the configuration's `shadow`).
        public var shadowAtStart: Bool
        /// Applies a denylist in the running bridge (the coordinator's operator input), with who set it (the audit's
        /// name); nil: not offered.
        public var setDenylist: (@Sendable (Denylist, String) -> Void)?
        /// Where the denylist is kept across restarts (`<data-dir>/denylist.json`), and the list at start.
        public var denylistPath: String?
        public var denylistAtStart: Denylist = .empty
        /// Releases a hidden message by id (and who released it) through the bridge's normal path; the error text says
        /// why not.
        public var release: (@Sendable (String, String) async -> String?)?
        /// Applies new spam limits in the running bridge (the coordinator's operator input); nil: not offered.
        public var setSpamLimits: (@Sendable (SpamFilterConfig) -> Void)?
        /// The spam limits at start (the configuration's `spam`).
        public var spamAtStart = SpamFilterConfig()
        /// Publishes a block/unblock to the fleet list (a bridge holding an operator key); nil: not a publisher.
        public var fleetChange: (@Sendable (FleetChange) -> Void)?
        /// Makes a moderator's block or staff mark (and their removals) a site record every stage applies (issue 35:
        /// the coordinator's operator input; a stage without the operator key keeps it local); nil: not offered.
        public var siteAction: (@Sendable (SiteTarget, Bool, String) -> Void)?
        /// The per-minute series the charts draw (fed by the status loop); nil: no charts.
        public var charts: ConsoleCharts?
        /// The console token and the moderators' tokens as their files hold them now (``WatchedFile``), asked before
        /// each console request so a token made, rotated or removed after start counts at once; nil: the settings' stay
        /// as they were at start.
        public var currentCredentials: (@Sendable () -> (token: String?, moderators: [String: String]))?

        public init(
            now: @escaping @Sendable () -> Double, random: @escaping @Sendable (Int) -> [UInt8],
            fallback: @escaping @Sendable (_ method: String, _ path: String) -> HTTPResponse, feed: ConsoleFeed? = nil,
            setShadowMode: (@Sendable (Bool) -> Void)? = nil, shadowAtStart: Bool = false,
            setDenylist: (@Sendable (Denylist, String) -> Void)? = nil, denylistPath: String? = nil, denylistAtStart: Denylist = .empty,
            setSpamLimits: (@Sendable (SpamFilterConfig) -> Void)? = nil, spamAtStart: SpamFilterConfig = SpamFilterConfig(),
            fleetChange: (@Sendable (FleetChange) -> Void)? = nil, siteAction: (@Sendable (SiteTarget, Bool, String) -> Void)? = nil,
            release: (@Sendable (String, String) async -> String?)? = nil, charts: ConsoleCharts? = nil,
            currentCredentials: (@Sendable () -> (token: String?, moderators: [String: String]))? = nil
        ) {
            self.charts = charts
            self.currentCredentials = currentCredentials
            self.setSpamLimits = setSpamLimits
            self.spamAtStart = spamAtStart
            self.fleetChange = fleetChange
            self.siteAction = siteAction
            self.release = release
            self.setDenylist = setDenylist
            self.denylistPath = denylistPath
            self.denylistAtStart = denylistAtStart
            self.now = now
            self.random = random
            self.fallback = fallback
            self.feed = feed
            self.setShadowMode = setShadowMode
            self.shadowAtStart = shadowAtStart
        }
    }

    /// Why the console could not open its stores.
    public struct OpenError: Error, CustomStringConvertible {
        public let description: String
    }

    private struct State: ~Copyable {
        var access: ConsoleAccess
        let stores: any ConsoleStoreAccess
        var lastAuditFailure: String?
        /// Shadow mode as last set (at start from the configuration, then by the console).
        var shadow: Bool
        var denylist: Denylist
        /// The spam limits as last set (at start from the configuration, then by the console).
        var spam: SpamFilterConfig
    }

    private let state: Mutex<State>
    private let dependencies: Dependencies
    /// The releases this console waits for (``Limits/releaseWaitSeconds``), cancelled and awaited at ``stop()``.
    private let waits = AwaitedTasks()

    /// The console over `stores` (in the bridge: the bridge's connection, reached on the coordinator).
    public init(settings: ConsoleAccess.Settings, stores: any ConsoleStoreAccess, dependencies: Dependencies) {
        state = Mutex(State(
            access: ConsoleAccess(settings: settings), stores: stores,
            shadow: dependencies.shadowAtStart, denylist: dependencies.denylistAtStart, spam: dependencies.spamAtStart))
        self.dependencies = dependencies
    }

    /// A console on a connection of its own to `<data-dir>/bridge.sqlite3` at `databasePath` (``LocalConsoleStores``:
    /// a console without a bridge in its process).
    public convenience init(settings: ConsoleAccess.Settings, databasePath: String, dependencies: Dependencies) throws(OpenError) {
        self.init(settings: settings, stores: try LocalConsoleStores(databasePath: databasePath), dependencies: dependencies)
    }

    /// Part of the listener's stop: cancels and awaits the releases still running, so none outlives it.
    public func stop() async { await waits.stop() }

    /// The stores' answer to `body`, or why there is none.
    private static func stores<T: Sendable>(
        _ state: borrowing State, changesBlocks: Bool = false, _ body: @escaping @Sendable (ConsoleStores) throws -> T
    ) -> Result<T, any Error> {
        state.stores.withStores(changesBlocks: changesBlocks) { stores in Result { try body(stores) } }
            ?? .failure(OpenError(description: "the bridge's stores did not answer in time"))
    }

    /// The verbs `POST /api/senders/KEY/VERB` takes.
    public static let senderActions = ["block", "unblock", "allow", "unallow", "verify", "unverify", "note"]

    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        let path = request.path
        if path == "/" && (request.method == "GET" || request.method == "HEAD") {
            return HTTPResponse(status: 303, contentType: "text/plain", body: [], headers: [("Location", "/console")])
        }
        guard path == "/console" || path.hasPrefix("/console/") || path.hasPrefix("/api/") else {
            return dependencies.fallback(request.method, path)
        }
        let now = dependencies.now()
        let credentials = dependencies.currentCredentials.map { $0() }
        return state.withLock { (state: inout State) -> HTTPResponse in
            if let credentials { state.access.setCredentials(token: credentials.token, moderators: credentials.moderators) }
            if request.method == "POST" && path == "/console/login" { return Self.login(&state, request, now: now, random: dependencies.random) }
            let verdict = state.access.check(request, now: now)
            let changing = ConsoleAccess.isStateChanging(request.method)
            switch verdict {
            case .failure(let refusal):
                if changing {
                    Self.audit(&state, request, now, Self.actionName(request), Self.target(request), "refused: \(refusal.reason)", "none")
                }
                return Self.json(refusal.status, .object([("error", .string(refusal.reason))]))
            case .success(let principal):
                if changing { return change(&state, request, now: now, principal: principal) }
                return read(&state, request, principal: principal, now: now)
            }
        }
    }

    // MARK: Reads

    private func read(
        _ state: inout State, _ request: HTTPRequest, principal: ConsoleAccess.Principal, now: Double
    ) -> HTTPResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            return Self.json(405, .object([("error", .string("method not allowed"))]))
        }
        let path = request.path
        if path == "/console" || path.hasPrefix("/console/") {
            guard let asset = ConsoleAssets.asset(for: path) else { return Self.json(404, .object([("error", .string("not found"))])) }
            return HTTPResponse(status: 200, contentType: asset.contentType, body: asset.body, headers: Self.securityHeaders)
        }
        let query = FormData.parse(request.query)
        switch path {
        case "/api/session":
            return Self.json(200, .object([
                ("signed_in", .bool(principal != .anonymous)), ("signed_in_as", principal.name.map(JSONValue.string) ?? .null),
                ("token_exists", .bool(state.access.settings.anyCredential)),
                ("reads_need_auth", .bool(state.access.settings.readsNeedAuth)),
            ]))
        case "/api/audit":
            let limit = query["limit"].flatMap(Int.init) ?? 100
            do {
                let before = query["before"].flatMap(Int64.init)
                let entries = try Self.stores(state) { try $0.audit.recent(limit: limit, beforeID: before) }.get()
                return Self.json(200, .object([("entries", .array(entries.map(\.jsonValue)))]))
            } catch {
                return Self.json(500, .object([("error", .string("audit read failed: \(error)"))]))
            }
        case "/api/modlog":
            return Self.modlog(&state, query, now: now)
        case "/api/modlog/rules":
            // The rule filter's choices, from the judge's own enumeration: every rule a log row can hold (every
            // hide is a row: the operator's block list and denylist, and the spam filter's rules).
            return Self.json(200, .object([("rules", .array(HideRule.allCases.map { .string($0.label) }))]))
        case "/api/live":
            guard let feed = dependencies.feed else { return Self.json(404, .object([("error", .string("no live view"))])) }
            return HTTPResponse(
                status: 200, contentType: "text/event-stream", body: [], headers: [("X-Content-Type-Options", "nosniff")],
                stream: feed.subscribe(after: query["after"].flatMap(UInt64.init)))
        case "/api/live/recent":
            let events = dependencies.feed?.recent(limit: min(query["limit"].flatMap(Int.init) ?? 200, Limits.maxPage)) ?? []
            return Self.json(200, .object([("events", .array(events.map { .object([("seq", .integer(Int64($0.sequence))), ("activity", $0.json)]) }))]))
        case "/api/settings":
            return Self.json(200, .object([
                ("shadow", .bool(state.shadow)), ("shadow_settable", .bool(dependencies.setShadowMode != nil)),
                ("denylist", state.denylist.jsonValue), ("denylist_settable", .bool(dependencies.setDenylist != nil)),
                ("spam", state.spam.jsonValue), ("spam_settable", .bool(dependencies.setSpamLimits != nil)),
            ]))
        case "/api/denylist/preview":
            return preview(query, now: now)
        case "/api/charts":
            guard let charts = dependencies.charts else { return Self.json(404, .object([("error", .string("no charts"))])) }
            return Self.json(200, charts.jsonValue(now: now))
        default:
            if let key = Self.senderKey(path, action: false) { return Self.sender(&state, key) }
            return Self.json(404, .object([("error", .string("not found"))]))
        }
    }

    /// `GET /api/modlog?since=&until=&rule=&direction=&sender=&channel=&search=&before=&limit=`: newest first; page on with
    /// `before` = the last id shown. Times as `modlog export` reads them (1h, 2026-12-01T10:00Z, @UNIX).
    private static func modlog(_ state: inout State, _ form: [String: String], now: Double) -> HTTPResponse {
        var query = ModerationQuery(limit: min(max(form["limit"].flatMap(Int.init) ?? 50, 1), Limits.maxPage))
        do {
            if let since = form["since"], !since.isEmpty { query.since = try ModerationExport.parseTime(since, field: "since", now: now) }
            if let until = form["until"], !until.isEmpty { query.until = try ModerationExport.parseTime(until, field: "until", now: now) }
        } catch {
            return json(400, .object([("error", .string(error.description))]))
        }
        if let rule = form["rule"], !rule.isEmpty {
            guard let parsed = HideRule(label: rule) else { return json(400, .object([("error", .string("rule '\(rule)' is unknown"))])) }
            query.rule = parsed
        }
        if let direction = form["direction"], !direction.isEmpty {
            guard let parsed = SpamDirection(text: direction) else {
                return json(400, .object([("error", .string("direction '\(direction)' is not nostr-to-mesh or mesh-to-nostr"))]))
            }
            query.direction = parsed
        }
        query.senderKey = form["sender"].flatMap { $0.isEmpty ? nil : $0.split(separator: ":").last.map(String.init) }
        query.channel = form["channel"].flatMap { $0.isEmpty ? nil : $0 }
        query.search = form["search"].flatMap { $0.isEmpty ? nil : $0 }
        query.beforeID = form["before"].flatMap(Int64.init)
        do {
            let records = try stores(state) { [query] in try $0.moderationLog.records(query) }.get()
            return json(200, .object([("records", .array(records.map(\.jsonValue)))]))
        } catch {
            return json(500, .object([("error", .string("moderation log read failed: \(error)"))]))
        }
    }

    public enum Limits {
        /// Largest page of the moderation log or audit a request gets.
        public static let maxPage = 500
        /// The denylist preview looks this far back (the issue's "the last hour"), within what the feed keeps.
        public static let previewSeconds = 3600.0
        /// Matching texts a preview shows (the count covers all).
        public static let previewExamples = 20
        /// Longest `spam` object a settings request may carry: every key of it fits in well under 2 KiB.
        public static let maxSpamJSONBytes = 8 << 10
        /// Longest wait for the coordinator's answer to a release.
        public static let releaseWaitSeconds = 2.0
    }

    /// The key a sender box or path names, as the CLI takes it (issue 35: the boxes refused the 16 hex the tables
    /// show): the whole key, or a unique prefix of at least 8 hex of a key the bridge has met — in the cache or the
    /// moderation log (``MetKeys``).
    private static func resolveKey(_ state: borrowing State, _ text: String) -> Result<IdentityKey, ConsoleAccess.Refusal> {
        switch stores(state, { try MetKeys.resolve(text, identities: $0.identities, moderationLog: $0.moderationLog) }) {
        case .success(let key): .success(key)
        case .failure(let error as KeyPrefixError):
            if case .lookupFailed = error { .failure(.init(status: 500, reason: error.description)) } else {
                .failure(.init(status: 400, reason: error.description))
            }
        case .failure(let error): .failure(.init(status: 500, reason: "read failed: \(error)"))
        }
    }

    private static func sender(_ state: inout State, _ text: String) -> HTTPResponse {
        let key: IdentityKey
        switch resolveKey(state, text) {
        case .success(let resolved): key = resolved
        case .failure(let refusal): return json(refusal.status, .object([("error", .string(refusal.reason))]))
        }
        do {
            var query = ModerationQuery(limit: 50)
            query.senderKey = key.hex
            let (record, verdicts) = try stores(state) { [query] in (try $0.identities.record(key), try $0.moderationLog.records(query)) }.get()
            var fields: [(String, JSONValue)] = [("key", .string(key.qualified)), ("known", .bool(record != nil))]
            if let record {
                fields += [
                    ("nickname", record.nickname.map(JSONValue.string) ?? .null),
                    ("first_seen_ms", record.firstSeen.map { .integer($0.millisecondsSince1970) } ?? .null),
                    ("last_seen_day", record.lastSeen.map { .integer(Int64($0.number)) } ?? .null),
                    ("blocked", .bool(record.annotations.blocked)), ("allowed", .bool(record.annotations.allowed)),
                    ("verified", .bool(record.annotations.verified)), ("trust", .string(record.annotations.trust.name)),
                    ("petname", record.annotations.petname.map(JSONValue.string) ?? .null),
                    ("notes", record.annotations.notes.map(JSONValue.string) ?? .null),
                ]
            }
            // What the bridge does now, and the site's records behind it (another stage, who, when): the identity row
            // holds this stage's own marks only.
            if let marks = state.stores.marksInForce(key) {
                fields += [
                    ("blocked_now", .bool(marks.blocked)), ("allowed_now", .bool(marks.staff)),
                    ("site", .object([("block", Self.siteJSON(marks.siteBlock)), ("allow", Self.siteJSON(marks.siteStaff))])),
                ]
            }
            let names = Array(Set(verdicts.compactMap(\.displayName))).sorted()
            fields.append(("display_names", .array(names.map(JSONValue.string))))
            fields.append(("verdicts", .array(verdicts.map(\.jsonValue))))
            return json(200, .object(fields))
        } catch {
            return json(500, .object([("error", .string("read failed: \(error)"))]))
        }
    }

    static func siteJSON(_ record: SiteRecord?) -> JSONValue {
        guard let record else { return .null }
        return .object([("on", .bool(record.on)), ("by", .string(record.by)), ("stage", .string(record.bridge)), ("at", .integer(record.createdAt))])
    }

    // MARK: Changes

    private static func login(
        _ state: inout State, _ request: HTTPRequest, now: Double, random: (Int) -> [UInt8]
    ) -> HTTPResponse {
        switch state.access.login(request, now: now, random: random) {
        case .failure(let refusal):
            audit(&state, request, now, "login", "", "refused: \(refusal.reason)", "none")
            return json(refusal.status, .object([("error", .string(refusal.reason))]))
        case .success(let (id, name)):
            audit(&state, request, now, "login", "", "ok", ConsoleAccess.Principal.session(name).rawValue)
            var response = json(200, .object([("signed_in", .bool(true))]))
            response.headers.append(("Set-Cookie", ConsoleAccess.sessionCookie(id)))
            return response
        }
    }

    private func change(
        _ state: inout State, _ request: HTTPRequest, now: Double, principal: ConsoleAccess.Principal
    ) -> HTTPResponse {
        let path = request.path
        if path == "/api/release" && request.method == "POST" {
            return releaseMessage(&state, request, now: now, principal: principal)
        }
        if path == "/api/denylist" && request.method == "POST" {
            return changeDenylist(&state, request, now: now, principal: principal)
        }
        if path == "/api/spam" && request.method == "POST" {
            return changeSpamLimits(&state, request, now: now, principal: principal)
        }
        if path == "/api/settings" && request.method == "POST" {
            let form = FormData.parse(request.body)
            guard let setShadow = dependencies.setShadowMode else {
                Self.audit(&state, request, now, "settings", "shadow", "refused: not settable here", principal.rawValue)
                return Self.json(404, .object([("error", .string("settings are not offered here"))]))
            }
            guard let value = form["shadow"], value == "on" || value == "off" else {
                Self.audit(&state, request, now, "settings", "shadow", "failed: shadow must be on or off", principal.rawValue)
                return Self.json(400, .object([("error", .string("shadow must be on or off"))]))
            }
            state.shadow = value == "on"
            setShadow(state.shadow)
            Self.audit(&state, request, now, "settings", "shadow=\(value)", "ok", principal.rawValue)
            return Self.json(200, .object([("shadow", .bool(state.shadow))]))
        }
        if path == "/console/logout" {
            state.access.logout(request)
            Self.audit(&state, request, now, "logout", "", "ok", principal.rawValue)
            var response = Self.json(200, .object([("signed_in", .bool(false))]))
            response.headers.append(("Set-Cookie", ConsoleAccess.clearedCookie))
            return response
        }
        guard request.method == "POST", let keyText = Self.senderKey(path, action: true),
            let verb = path.split(separator: "/").last.map(String.init), Self.senderActions.contains(verb)
        else {
            Self.audit(&state, request, now, Self.actionName(request), "", "refused: no such action", principal.rawValue)
            return Self.json(404, .object([("error", .string("no such action"))]))
        }
        let key: IdentityKey
        switch Self.resolveKey(state, keyText) {
        case .success(let resolved): key = resolved
        case .failure(let refusal):
            Self.audit(&state, request, now, verb, keyText, "failed: \(refusal.reason)", principal.rawValue)
            return Self.json(refusal.status, .object([("error", .string(refusal.reason))]))
        }
        let result = Self.senderAction(&state, verb: verb, key: key, form: FormData.parse(request.body))
        switch result {
        case .success(let body):
            Self.audit(&state, request, now, verb, key.qualified, "ok", principal.rawValue)
            // A bridge holding an operator key shares its blocks with the fleet (the coordinator publishes).
            if let fleetChange = dependencies.fleetChange {
                if verb == "block" { fleetChange(.block(key)) }
                if verb == "unblock" { fleetChange(.unblock(key)) }
            }
            // The same action on every stage of the site (a site record, by this moderator).
            if let siteAction = dependencies.siteAction, let (target, on) = SiteTarget.senderAction(verb, key: key) {
                siteAction(target, on, principal.rawValue)
            }
            return Self.json(200, body)
        case .failure(let failure):
            Self.audit(&state, request, now, verb, key.qualified, "failed: \(failure.reason)", principal.rawValue)
            return Self.json(failure.status, .object([("error", .string(failure.reason))]))
        }
    }

    private static func senderAction(
        _ state: inout State, verb: String, key: IdentityKey, form: [String: String]
    ) -> Result<JSONValue, ConsoleAccess.Refusal> {
        let note = form["text"].flatMap { $0.isEmpty ? nil : $0 }
        if verb == "note", let note, note.utf8.count > Annotations.Limits.maxNotesBytes {
            return .failure(.init(status: 400, reason: "note is \(note.utf8.count) bytes; at most \(Annotations.Limits.maxNotesBytes)"))
        }
        do {
            // The same edits as `bitchat-bridge identities VERB` (IdentitiesCommand.annotate).
            let record = try stores(state, changesBlocks: true) { try $0.identities.annotate(key) { a in
                switch verb {
                case "block": a.blocked = true; a.allowed = false
                case "unblock": a.blocked = false
                case "allow": a.allowed = true; a.blocked = false
                case "unallow": a.allowed = false
                case "verify": a.verified = true; a.trust = .verified
                case "unverify":
                    a.verified = false
                    if a.trust == .verified { a.trust = .casual }
                default: a.notes = note
                }
            } }.get()
            return .success(.object([
                ("key", .string(key.qualified)), ("action", .string(verb)),
                ("blocked", .bool(record?.annotations.blocked ?? false)), ("allowed", .bool(record?.annotations.allowed ?? false)),
                ("verified", .bool(record?.annotations.verified ?? false)),
                ("notes", record?.annotations.notes.map(JSONValue.string) ?? .null),
            ]))
        } catch {
            return .failure(.init(status: 500, reason: "write failed: \(error)"))
        }
    }

    // MARK: Release

    /// `POST /api/release` (form `message_id`): asks the coordinator, waiting at most ``Limits/releaseWaitSeconds``
    /// (one actor hop; the listener's thread is held that long at most). Audited either way.
    private func releaseMessage(
        _ state: inout State, _ request: HTTPRequest, now: Double, principal: ConsoleAccess.Principal
    ) -> HTTPResponse {
        let id = FormData.parse(request.body)["message_id"] ?? ""
        guard let release = dependencies.release else {
            Self.audit(&state, request, now, "release", id, "refused: not offered here", principal.rawValue)
            return Self.json(404, .object([("error", .string("release is not offered here"))]))
        }
        guard let result = waits.run(timeout: .seconds(Limits.releaseWaitSeconds), { await release(id, principal.rawValue) }) else {
            Self.audit(&state, request, now, "release", id, "failed: the bridge did not answer in time", principal.rawValue)
            return Self.json(504, .object([("error", .string("the bridge did not answer in time"))]))
        }
        if let reason = result {
            Self.audit(&state, request, now, "release", id, "refused: \(reason)", principal.rawValue)
            return Self.json(409, .object([("error", .string(reason)), ("released", .bool(false))]))
        }
        Self.audit(&state, request, now, "release", id, "ok", principal.rawValue)
        return Self.json(200, .object([("released", .bool(true)), ("message_id", .string(id))]))
    }

    // MARK: Denylist

    /// The entry a form names (`kind` keyword|regex, `pattern`).
    static func entry(_ form: [String: String]) -> Result<Denylist.Entry, ConsoleAccess.Refusal> {
        let pattern = form["pattern"] ?? ""
        switch form["kind"] ?? "keyword" {
        case "keyword": return .success(.keyword(pattern))
        case "regex": return .success(.regex(pattern))
        default: return .failure(.init(status: 400, reason: "kind must be keyword or regex"))
        }
    }

    /// `GET /api/denylist/preview?kind=&pattern=`: what this entry would have hidden among the messages judged in
    /// the last hour that the live view still holds, asked of ``Denylist/match(_:)`` — the code that hides.
    private func preview(_ form: [String: String], now: Double) -> HTTPResponse {
        let entry: Denylist.Entry
        let list: Denylist
        switch Self.entry(form) {
        case .failure(let refusal): return Self.json(refusal.status, .object([("error", .string(refusal.reason))]))
        case .success(let e): entry = e
        }
        do {
            list = try Denylist([entry])
        } catch {
            return Self.json(400, .object([("error", .string(error.description))]))
        }
        let judged = (dependencies.feed?.recent(limit: ConsoleFeed.Limits.keep) ?? []).map(\.json).filter { a in
            let kind = a["kind"]?.stringValue ?? ""
            return ["passed", "hidden", "would_hide"].contains(kind) && (a["at"]?.numberValue ?? 0) >= now - Limits.previewSeconds
                && a["text"]?.stringValue != nil
        }
        let hits = judged.filter { list.match($0["text"]?.stringValue ?? "") != nil }
        let alreadyHidden = hits.filter { $0["kind"] == .string("hidden") }.count
        return Self.json(200, .object([
            ("entry", entry.jsonValue), ("judged", .integer(Int64(judged.count))), ("would_hide", .integer(Int64(hits.count))),
            ("already_hidden", .integer(Int64(alreadyHidden))), ("window_seconds", .double(Limits.previewSeconds)),
            ("examples", .array(hits.suffix(Limits.previewExamples).map { a in
                .object([("at", a["at"] ?? .null), ("sender", a["sender"] ?? .null), ("text", a["text"] ?? .null), ("kind", a["kind"] ?? .null)])
            })),
        ]))
    }

    /// `POST /api/spam` (form `json`: a `spam` object, the config file's keys; missing keys take their defaults):
    /// validated by the filter's own parser, applied at once, audited. Not kept: the config file's `spam` is in
    /// force again after a restart.
    private func changeSpamLimits(
        _ state: inout State, _ request: HTTPRequest, now: Double, principal: ConsoleAccess.Principal
    ) -> HTTPResponse {
        guard let apply = dependencies.setSpamLimits else {
            Self.audit(&state, request, now, "spam limits", "", "refused: not settable here", principal.rawValue)
            return Self.json(404, .object([("error", .string("spam limits are not settable here"))]))
        }
        let text = FormData.parse(request.body)["json"] ?? ""
        let config: SpamFilterConfig
        do {
            let value = try JSONParser(limits: .init(maxBytes: Limits.maxSpamJSONBytes, maxDepth: 4)).parse(text)
            config = try SpamFilterConfig(json: value)
        } catch {
            Self.audit(&state, request, now, "spam limits", "", "failed: \(error)", principal.rawValue)
            return Self.json(400, .object([("error", .string("\(error)"))]))
        }
        state.spam = config
        apply(config)
        Self.audit(&state, request, now, "spam limits", JSONWriter.compact(config.jsonValue), "ok", principal.rawValue)
        return Self.json(200, .object([("spam", config.jsonValue)]))
    }

    /// `POST /api/denylist` (form `op` add|remove, `kind`, `pattern`): validated, kept in `denylist.json`, applied.
    private func changeDenylist(
        _ state: inout State, _ request: HTTPRequest, now: Double, principal: ConsoleAccess.Principal
    ) -> HTTPResponse {
        let form = FormData.parse(request.body)
        let op = form["op"] ?? "add"
        let target = "\(form["kind"] ?? "keyword"):\(form["pattern"] ?? "")"
        func fail(_ status: Int, _ reason: String) -> HTTPResponse {
            Self.audit(&state, request, now, "denylist \(op)", target, "failed: \(reason)", principal.rawValue)
            return Self.json(status, .object([("error", .string(reason))]))
        }
        guard let apply = dependencies.setDenylist else { return fail(404, "the denylist is not settable here") }
        let entry: Denylist.Entry
        switch Self.entry(form) {
        case .failure(let refusal): return fail(refusal.status, refusal.reason)
        case .success(let e): entry = e
        }
        var entries = state.denylist.entries
        switch op {
        case "add": if !entries.contains(entry) { entries.append(entry) }
        case "remove": entries.removeAll { $0 == entry }
        default: return fail(400, "op must be add or remove")
        }
        let list: Denylist
        do {
            list = try Denylist(entries)
        } catch {
            return fail(400, error.description)
        }
        if let path = dependencies.denylistPath {
            do {
                try FileIO.writeAtomically(Array((JSONWriter.pretty(list.jsonValue) + "\n").utf8), to: path, mode: 0o600)
            } catch {
                return fail(500, "cannot keep the denylist in \(path): \(error)")
            }
        }
        state.denylist = list
        apply(list, principal.rawValue)
        Self.audit(&state, request, now, "denylist \(op)", target, "ok", principal.rawValue)
        return Self.json(200, .object([("denylist", list.jsonValue)]))
    }

    // MARK: Helpers

    /// `KEY` of `/api/senders/KEY` (`action` false) or `/api/senders/KEY/VERB` (`action` true).
    static func senderKey(_ path: String, action: Bool) -> String? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == (action ? 5 : 4), parts[1] == "api", parts[2] == "senders", !parts[3].isEmpty else { return nil }
        return FormData.decode(parts[3])
    }

    static func actionName(_ request: HTTPRequest) -> String {
        if let _ = senderKey(request.path, action: true), let verb = request.path.split(separator: "/").last { return String(verb) }
        return "\(request.method) \(request.path)"
    }

    static func target(_ request: HTTPRequest) -> String { senderKey(request.path, action: true) ?? "" }

    private static func audit(
        _ state: inout State, _ request: HTTPRequest, _ now: Double, _ action: String, _ target: String, _ outcome: String,
        _ principal: String
    ) {
        let entry = ConsoleAuditEntry(
            at: now, action: action, target: target, remote: request.remoteAddress, outcome: outcome, principal: principal)
        do {
            _ = try stores(state) { try $0.audit.append(entry) }.get()
        } catch {
            state.lastAuditFailure = "\(error)"
        }
    }

    /// Pages may load only their own files; nothing frames them; nothing sniffs a type.
    static let securityHeaders: [(name: String, value: String)] = [
        ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
        ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "same-origin"), ("X-Frame-Options", "DENY"),
    ]

    static func json(_ status: Int, _ value: JSONValue) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "application/json", body: Array((JSONWriter.compact(value) + "\n").utf8),
                     headers: [("X-Content-Type-Options", "nosniff")])
    }
}
