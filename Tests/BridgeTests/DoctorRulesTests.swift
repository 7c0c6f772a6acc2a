import Bridge
import Testing

/// `bitchat-bridge doctor`'s judgements on facts alone (issue 23): BlueZ's main.conf, the clock against the relays',
/// the data directory.
@Suite("Doctor rules")
struct DoctorRulesTests {
    static let path = "/etc/bluetooth/main.conf"

    @Test("main.conf: BlueZ's defaults (every line commented, as shipped) fail on ControllerMode and Privacy, naming the fix")
    func shippedDefaults() {
        let shipped = """
            [General]
            # Default adapter name
            #Name = BlueZ
            #ControllerMode = dual
            #JustWorksRepairing = never
            #Privacy = off
            """
        let check = DoctorRules.bluezSettings(text: shipped, path: Self.path, readError: nil)
        #expect(check.outcome == .fail)
        #expect(check.detail.contains("ControllerMode is dual (BlueZ's default)") && check.detail.contains("Privacy is off (BlueZ's default)"))
        #expect(!check.detail.contains("JustWorksRepairing"), "never is BlueZ's default: \(check.detail)")
        #expect(check.fix == "under [General] in /etc/bluetooth/main.conf set ControllerMode = le, Privacy = device, "
            + "then restart bluetoothd (sudo systemctl restart bluetooth)")
    }

    @Test("main.conf: the three settings under [General] pass; the same keys in another section or commented do not count")
    func sections() {
        let good = """
            [General]
            ControllerMode = le
            # a comment
            JustWorksRepairing=never
              Privacy =  device\u{20}
            [Policy]
            AutoEnable=true
            """
        #expect(DoctorRules.bluezSettings(text: good, path: Self.path, readError: nil).outcome == .ok)
        let elsewhere = """
            [LE]
            ControllerMode = le
            [General]
            Privacy = device
            ;ControllerMode = le
            JustWorksRepairing = always
            """
        let check = DoctorRules.bluezSettings(text: elsewhere, path: Self.path, readError: nil)
        #expect(check.outcome == .fail)
        #expect(check.detail.contains("JustWorksRepairing is always (") && check.detail.contains("ControllerMode is dual"), "\(check.detail)")
        #expect(check.fix?.contains("JustWorksRepairing = never, ControllerMode = le") == true, "\(check.fix ?? "")")
    }

    @Test("main.conf unreadable: a warning that says how to check it in a container")
    func unreadable() {
        let check = DoctorRules.bluezSettings(text: nil, path: Self.path, readError: "No such file or directory")
        #expect(check.outcome == .warn && check.detail.contains("No such file"))
        #expect(check.fix?.contains("--bluez-conf") == true)
    }

    @Test("clock: the median relay decides; ≤ 60 s ok, ≤ 900 s warn, beyond fail; the sign says which clock is ahead")
    func clock() {
        func judge(_ seconds: [Int64]) -> DoctorCheck {
            DoctorRules.clock(offsets: seconds.enumerated().map { ("wss://r\($0.offset)", $0.element) })
        }
        #expect(judge([2, -1, 0]).outcome == .ok)
        #expect(judge([60]).outcome == .ok)
        #expect(judge([61]).outcome == .warn)
        #expect(judge([900]).outcome == .warn)
        let behind = judge([1_200, 1_201, -3])
        #expect(behind.outcome == .fail && behind.detail.contains("is 1200 s behind the relays (median of 3 relays)"), "\(behind.detail)")
        #expect(behind.fix?.contains("timedatectl set-ntp true") == true)
        #expect(judge([-1_200]).detail.contains("1200 s ahead of the relays"))
        // One relay with a bad clock does not fail the host.
        #expect(judge([3_600, 1, 0]).outcome == .ok)
        #expect(judge([]).outcome == .warn)
    }

    @Test("issue 35: a data directory another bridge holds fails naming its PID; http_listen taken fails, free passes, off skips")
    func heldDirectoryAndPort() {
        var facts = DoctorRules.DirectoryFacts(path: "/srv/bridge")
        facts.mode = 0o700
        facts.held = true
        facts.holderPID = 4242
        let held = DoctorRules.dataDirectory(facts)
        #expect(held.outcome == .fail && held.detail.contains("PID 4242") && held.fix?.contains("data directory of its own") == true)
        let taken = DoctorRules.httpListen("127.0.0.1:9464", inUse: true)
        #expect(taken.outcome == .fail && taken.fix?.contains("BRIDGE_HTTP_LISTEN") == true)
        #expect(DoctorRules.httpListen("127.0.0.1:9464", inUse: false).outcome == .ok)
        #expect(DoctorRules.httpListen(nil, inUse: nil).outcome == .skip)
    }

    @Test("issue 35: site records on with the operator key; said when the stage only follows the list; failed when the key file would stop run; skipped without operator keys")
    func siteRecords() {
        #expect(DoctorRules.siteRecords(site: "u4pruy", operatorKeys: 0, holdsKey: false, keyError: nil).outcome == .skip)
        let on = DoctorRules.siteRecords(site: "u4pruy", operatorKeys: 1, holdsKey: true, keyError: nil)
        #expect(on.outcome == .ok && on.detail.contains("u4pruy"))
        let follows = DoctorRules.siteRecords(site: "u4pruy", operatorKeys: 1, holdsKey: false, keyError: nil)
        #expect(follows.outcome == .warn && follows.detail.contains("stay its own") && follows.fix?.contains("operator.key") == true)
        let bad = DoctorRules.siteRecords(site: "u4pruy", operatorKeys: 1, holdsKey: false, keyError: "operator.key is readable by others")
        #expect(bad.outcome == .fail && bad.detail.contains("readable by others"))
    }

    @Test("data directory: missing but creatable, unsafe, not writable, open secret files, little space")
    func dataDirectory() {
        var facts = DoctorRules.DirectoryFacts(path: "/srv/bridge")
        facts.uid = 1000
        // Issue 35: missing is a warning — the first start makes a new identity there (a typo'd path did, silently).
        let missing = DoctorRules.dataDirectory(facts)
        #expect(missing.outcome == .warn && missing.detail.contains("new bridge identity") && missing.fix?.contains("BRIDGE_DATA_DIR") == true)
        facts.writable = false
        #expect(DoctorRules.dataDirectory(facts).fix?.contains("install -d -m 700") == true)
        facts.mode = 0o700
        facts.ownerUID = 0
        let foreign = DoctorRules.dataDirectory(facts)
        #expect(foreign.outcome == .fail && foreign.fix?.contains("chown") == true)
        facts.writable = true
        facts.ownerUID = 1000
        facts.secretFiles = [("keys.json", 0o600), ("console-token", 0o644)]
        let open = DoctorRules.dataDirectory(facts)
        #expect(open.outcome == .fail && open.detail.contains("console-token has mode 644") && open.fix == "chmod 600 /srv/bridge/console-token")
        facts.secretFiles = [("keys.json", 0o600)]
        facts.freeBytes = 50 << 20
        #expect(DoctorRules.dataDirectory(facts).outcome == .warn)
        facts.freeBytes = 5 << 30
        let fine = DoctorRules.dataDirectory(facts)
        #expect(fine.outcome == .ok && fine.detail == "/srv/bridge: owner uid 1000, mode 700, keys.json 600, 5120 MB free", "\(fine.detail)")
        facts.unsafe = "data directory /srv/bridge has mode 777 …"
        #expect(DoctorRules.dataDirectory(facts).outcome == .fail)
    }
}
