import BotSupport

/// One line of `bitchat-bridge doctor`: what was checked, how it came out, what was seen, and what to do about it.
public struct DoctorCheck: Sendable, Equatable {
    public enum Outcome: String, Sendable, Equatable {
        case ok
        /// Works now, but needs attention (the bridge copes, or the check could not be made).
        case warn
        /// The bridge will not work as it should: `doctor` exits 1.
        case fail
        /// Does not apply to this configuration (Bluetooth checks over `tcp://` segments).
        case skip
    }

    public let name: String
    public let outcome: Outcome
    public let detail: String
    /// What to do (warn and fail only).
    public let fix: String?

    public init(_ name: String, _ outcome: Outcome, _ detail: String, fix: String? = nil) {
        self.name = name
        self.outcome = outcome
        self.detail = detail
        self.fix = fix
    }
}

/// The judgements of `bitchat-bridge doctor`, on facts its probes gathered (pure: no I/O, so each rule is tested
/// on the facts alone). The probes live with the command.
public enum DoctorRules {
    public enum Limits {
        /// Beyond this many seconds from the relays' clocks the host has no working network time: a warning.
        public static let clockWarnSeconds: Int64 = 60
        /// Phones (and the bridge's own intake) drop events whose `created_at` is more than 900 s from their
        /// clock (NOSTR-GEO §5.5): beyond it, what the bridge posts is dropped, so the check fails.
        public static let clockFailSeconds: Int64 = 900
        /// Less free space than this on the data directory's file system is a warning (the moderation log and
        /// the stores grow; SQLite needs room for its journal).
        public static let minimumFreeBytes: UInt64 = 100 << 20
    }

    // MARK: BlueZ settings

    /// A setting of BlueZ's `main.conf` ([General]) the bridge wants, BlueZ's default when the line is absent, and
    /// why. These are the settings community Raspberry Pi bridges document so iPhones connect without a PIN prompt.
    public struct BlueZSetting: Sendable {
        public let key: String
        public let wanted: String
        public let bluezDefault: String
        public let why: String
    }

    public static let bluezSettings: [BlueZSetting] = [
        BlueZSetting(key: "JustWorksRepairing", wanted: "never", bluezDefault: "never",
                     why: "a phone that forgot the pairing is not asked to confirm a new one"),
        BlueZSetting(key: "ControllerMode", wanted: "le", bluezDefault: "dual",
                     why: "LE only: iPhones otherwise try classic (BR/EDR) pairing and prompt for a PIN"),
        BlueZSetting(key: "Privacy", wanted: "device", bluezDefault: "off",
                     why: "a resolvable private address, as the phones use"),
    ]

    /// The `[General]` values of a `main.conf` text (BlueZ's INI dialect: `#` comments, `key = value`).
    public static func generalSection(of text: String) -> [String: String] {
        var section = ""
        var values: [String: String] = [:]
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingSpaces
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast()).trimmingSpaces
                continue
            }
            guard section == "General", let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals]).trimmingSpaces] = String(line[line.index(after: equals)...]).trimmingSpaces
        }
        return values
    }

    /// The BlueZ settings check on `text` (nil: the file could not be read, `readError` says why).
    public static func bluezSettings(text: String?, path: String, readError: String?) -> DoctorCheck {
        guard let text else {
            return DoctorCheck(
                "bluez settings", .warn, "cannot read \(path)\(readError.map { " (\($0))" } ?? "")",
                fix: "check it by hand, or pass the host's file with --bluez-conf FILE (in a container, mount /etc/bluetooth read-only)")
        }
        let values = generalSection(of: text)
        var wrong: [String] = []
        var fixes: [String] = []
        for setting in bluezSettings {
            let value = values[setting.key] ?? setting.bluezDefault
            if value.lowercased() != setting.wanted {
                wrong.append("\(setting.key) is \(value)\(values[setting.key] == nil ? " (BlueZ's default)" : "") (\(setting.why))")
                fixes.append("\(setting.key) = \(setting.wanted)")
            }
        }
        guard !wrong.isEmpty else {
            return DoctorCheck("bluez settings", .ok, bluezSettings.map { "\($0.key) = \($0.wanted)" }.joined(separator: ", ") + " in \(path)")
        }
        return DoctorCheck(
            "bluez settings", .fail, wrong.joined(separator: "; "),
            fix: "under [General] in \(path) set \(fixes.joined(separator: ", ")), then restart bluetoothd (sudo systemctl restart bluetooth)")
    }

    // MARK: Clock

    /// The clock check on each relay's offset (its clock minus ours, from its `Date` header); relays that sent
    /// no date are left out. The median offset decides, so one relay with a bad clock does not.
    public static func clock(offsets: [(relay: String, seconds: Int64)]) -> DoctorCheck {
        let fix = "turn on network time: sudo timedatectl set-ntp true (a Raspberry Pi has no battery-backed clock); "
            + "phones drop events more than 900 s from their clocks"
        guard !offsets.isEmpty else {
            return DoctorCheck(
                "clock", .warn, "no relay answered with a Date header, so the clock could not be compared",
                fix: "compare by hand: timedatectl (System clock synchronized: yes)")
        }
        let sorted = offsets.map(\.seconds).sorted()
        let median = sorted[sorted.count / 2]
        let how = median == 0 ? "matches the relays" : "is \(abs(median)) s \(median > 0 ? "behind" : "ahead of") the relays"
        let detail = "this host's clock \(how) (median of \(offsets.count) relay\(offsets.count == 1 ? "" : "s"))"
        switch abs(median) {
        case ...Limits.clockWarnSeconds: return DoctorCheck("clock", .ok, detail)
        case ...Limits.clockFailSeconds: return DoctorCheck("clock", .warn, detail, fix: fix)
        default: return DoctorCheck("clock", .fail, detail + ": what the bridge posts is dropped", fix: fix)
        }
    }

    // MARK: Data directory

    /// What the probe saw of the data directory.
    public struct DirectoryFacts: Sendable {
        public var path: String
        /// nil: it does not exist (yet).
        public var mode: UInt32?
        public var ownerUID: UInt32 = 0
        /// The user the check runs as.
        public var uid: UInt32 = 0
        /// This user can create files in it (or, when it is missing, in the nearest existing parent).
        public var writable = true
        /// The secret files present in it and their modes (`keys.json` 600, …).
        public var secretFiles: [(name: String, mode: UInt32)] = []
        public var freeBytes: UInt64?
        /// ``KeyStore/checkDirectory(_:)``'s refusal, if any (group/other-writable, another user's).
        public var unsafe: String?
        /// Another process holds the directory's lock (`bridge.lock`): a bridge runs on it; the PID it wrote, if any.
        public var held = false
        public var holderPID: Int32?

        public init(path: String) { self.path = path }
    }

    public static func dataDirectory(_ facts: DirectoryFacts) -> DoctorCheck {
        let name = "data directory"
        let setting = "set another with --data-dir, data_dir or BRIDGE_DATA_DIR"
        if let unsafe = facts.unsafe { return DoctorCheck(name, .fail, unsafe) }
        if facts.held {
            return DoctorCheck(
                name, .fail, "a bridge\(facts.holderPID.map { " (PID \($0))" } ?? "") runs on \(facts.path): it holds its lock (bridge.lock)",
                fix: "stop it first, or give this bridge a data directory of its own: \(setting)")
        }
        guard let mode = facts.mode else {
            // Issue 35: a typo in the path made a new identity and started bridging without the staff, the blocks or the
            // held mail of the bridge the operator meant.
            return facts.writable
                ? DoctorCheck(name, .warn, "\(facts.path) does not exist yet: the first start creates it (mode 700) with a new "
                                + "bridge identity — no staff, no blocks, no held mail",
                              fix: "if this bridge has run before, the path is wrong: \(setting); a new bridge needs nothing")
                : DoctorCheck(name, .fail, "\(facts.path) does not exist and this user (uid \(facts.uid)) cannot create it",
                              fix: "sudo install -d -m 700 -o $(id -un) \(facts.path), or \(setting)")
        }
        guard facts.writable else {
            return DoctorCheck(name, .fail, "\(facts.path) (owner uid \(facts.ownerUID), mode \(octal(mode))) is not writable by this user (uid \(facts.uid))",
                               fix: "sudo chown $(id -un) \(facts.path), run the bridge as its owner, or \(setting)")
        }
        let open = facts.secretFiles.filter { $0.mode & 0o077 != 0 }
        if !open.isEmpty {
            let files = open.map { "\($0.name) has mode \(octal($0.mode))" }.joined(separator: ", ")
            return DoctorCheck(name, .fail, "\(files): it holds secrets",
                               fix: open.map { "chmod 600 \(facts.path)/\($0.name)" }.joined(separator: "; "))
        }
        let detail = "\(facts.path): owner uid \(facts.ownerUID), mode \(octal(mode))"
            + (facts.secretFiles.isEmpty ? "" : ", " + facts.secretFiles.map { "\($0.name) \(octal($0.mode))" }.joined(separator: ", "))
            + (facts.freeBytes.map { ", \(megabytes($0)) MB free" } ?? "")
        if let free = facts.freeBytes, free < Limits.minimumFreeBytes {
            return DoctorCheck(name, .warn, detail, fix: "free space on its file system (the moderation log and the stores grow), or \(setting)")
        }
        return DoctorCheck(name, .ok, detail)
    }

    /// `http_listen` (the console and `/metrics`): free, or taken by another listener (`inUse` nil: it did not parse,
    /// which the configuration check reports).
    public static func httpListen(_ listen: String?, inUse: Bool?) -> DoctorCheck {
        let name = "http listen"
        guard let listen else { return DoctorCheck(name, .skip, "http_listen is off") }
        guard let inUse else { return DoctorCheck(name, .skip, "\(listen) is not an address to listen on") }
        guard inUse else { return DoctorCheck(name, .ok, "\(listen) is free") }
        return DoctorCheck(
            name, .fail, "something already listens on \(listen) (another bridge's console and /metrics?)",
            fix: "stop it, or set http_listen (BRIDGE_HTTP_LISTEN) to a free port")
    }

    /// Site records (issue 35): on when the stage holds the site's operator key, said when it follows the site's list
    /// only (a block made here then stays this stage's), failed when the key file would stop `run`.
    /// - Parameters:
    ///   - operatorKeys: how many `operator_keys` are configured.
    ///   - holdsKey: `operator.key` was read and is one of them.
    ///   - keyError: why `operator.key` would stop `run` (mode, form, not an operator key), if it would.
    public static func siteRecords(site: String, operatorKeys: Int, holdsKey: Bool, keyError: String?) -> DoctorCheck {
        let name = "site records"
        guard operatorKeys > 0 else { return DoctorCheck(name, .skip, "no operator_keys: this bridge moderates alone") }
        if let keyError { return DoctorCheck(name, .fail, keyError, fix: "copy the site's operator.key (64 hex, chmod 600) into the data directory, or remove it") }
        guard holdsKey else {
            return DoctorCheck(
                name, .warn, "no operator.key in the data directory: this stage follows the site's operator list (\(site)) but neither "
                    + "reads nor makes site records, so its console's and the CLI's blocks, staff and words stay its own",
                fix: "to share moderation with the site's other stages, copy the operator.key they hold into the data directory (chmod 600)")
        }
        return DoctorCheck(name, .ok, "on for site \(site): blocks, staff, words and releases made here reach every stage holding the same operator key")
    }

    static func octal(_ mode: UInt32) -> String { String(mode & 0o7777, radix: 8) }
    static func megabytes(_ bytes: UInt64) -> UInt64 { bytes >> 20 }
}
