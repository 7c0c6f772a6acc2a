import BotStorage
import BotSupport
import BridgeTestSupport
import Foundation
import Testing

/// Operations end to end (issue 8): SIGHUP policy reload, graceful stop, a full disk. Real processes on
/// loopback, as in ``BridgeEndToEndTests``.
extension World {
    /// One post by `user` (a key kept in the user's data directory); returns (event id, author pubkey hex).
    func postWithKey(_ text: String, as user: String) async throws -> (id: String, pubkey: String) {
        let poster = try spawn(
            ["nostr", "post", "--geohash", "u4pruy", "--relay", relayURL, "--pow", "8", "--nickname", user, text],
            environment: ["BRIDGE_DATA_DIR": "\(directory)/phone-\(user)"], name: "post-\(user)")
        let line = try await poster.waitForLine("post by \(user)") { $0.contains("\"published\"") }
        let event = try JSONParser().parse(line)["event"]
        return (try #require(event?["id"]?.stringValue), try #require(event?["pubkey"]?.stringValue))
    }
}

/// `PRAGMA integrity_check` of the bridge database in `dataDirectory`, and the number of remembered event ids.
func databaseCheck(_ dataDirectory: String) throws -> (integrity: String, recentEvents: Int64) {
    let database = try SQLiteDatabase(path: "\(dataDirectory)/bridge.sqlite3")
    defer { database.close() }
    let integrity = try database.prepare("PRAGMA integrity_check").query { $0.text(0) }.joined(separator: "; ")
    let count = try database.prepare("SELECT count(*) FROM recent_events").query { $0.int64(0) }.first ?? -1
    return (integrity, count)
}

/// Runs a system command synchronously (mount/umount); returns its exit status.
@discardableResult
func system(_ executable: String, _ arguments: [String]) -> Int32 {
    (try? ChildProcess.run(executable, arguments, output: .discard))?.status ?? -1
}

/// True when this process can mount a tmpfs (root with CAP_SYS_ADMIN, `mount` present), probed once with a
/// real mount and unmount: the disk-full test needs one and is skipped elsewhere (e.g. an unprivileged CI).
let canMountTmpfs: Bool = {
    guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/bin/mount") else { return false }
    let probe = TestEnvironment.temporaryDirectory("tmpfs-probe")
    defer { try? FileManager.default.removeItem(atPath: probe) }
    guard system("/bin/mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe]) == 0 else { return false }
    return system("/bin/umount", [probe]) == 0
}()

@Suite("Bridge operations end to end (signals, disk full)", TestEnvironment.needsVenv, .serialized)
struct BridgeOperationsTests {
    @Test("SIGTERM under traffic: exit 0 within the stop deadline, a signed leave on the mesh, the database checkpointed and intact")
    func gracefulStop() async throws {
        let world = World()
        let (_, bridge, reader) = try await world.startGateway()
        let bridgePeer = try #require(
            reader.stdoutLines.compactMap { try? JSONParser().parse($0) }.first { $0["event"] == .string("peer") }?["peerID"]?.stringValue)

        // Traffic: posts crossing while the stop arrives.
        let first = try await world.post("traffic 1")
        _ = try await reader.waitForLine("traffic crosses") { $0.contains(first) }
        let traffic = Task { for i in 2...6 { _ = try? await world.post("traffic \(i)") } }
        try await Task.sleep(for: .milliseconds(300))
        let started = ContinuousClock.now
        kill(bridge.pid, SIGTERM)
        let status = try await bridge.waitForExit(timeout: .seconds(10))
        let elapsed = ContinuousClock.now - started
        await traffic.value
        print("graceful stop under traffic: \(elapsed) from SIGTERM to exit (deadline 5 s)")
        #expect(status == 0, "\(bridge.transcript)")
        #expect(bridge.stderrLines.contains { $0.contains("\"stopped\"") && $0.contains("stop.ms") })
        _ = try await reader.waitForLine("the bridge's leave") {
            $0.contains("\"peerLost\"") && $0.contains(bridgePeer) && $0.contains("\"leave\"")
        }
        let check = try databaseCheck("\(world.directory)/gateway")
        #expect(check.integrity == "ok")
        #expect(check.recentEvents >= 1)
        // Checkpointed at stop: the database file alone holds everything.
        let wal = (try? FileManager.default.attributesOfItem(atPath: "\(world.directory)/gateway/bridge.sqlite3-wal")[.size] as? Int) ?? 0
        #expect(wal == 0)
    }

    @Test("disk full (tiny tmpfs): clear errors, no crash, forwarding continues, no corruption after space returns",
          .enabled(if: canMountTmpfs))
    func diskFull() async throws {
        let world = World()
        let mountPoint = "\(world.directory)/tmpfs"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        try #require(system("/bin/mount", ["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", mountPoint]) == 0)
        defer {
            for process in world.processes { process.stop(signal: SIGKILL) }
            system("/bin/umount", ["-l", mountPoint])
        }
        let dataDirectory = "\(mountPoint)/gateway"
        try await world.startRelay()
        let island = try await world.startIsland()
        let bridge = try await world.startBridge("gateway", island: island, extra: ["BRIDGE_DATA_DIR": dataDirectory])
        let reader = try await world.startReader("reader", island: island)
        try await world.waitForBridges(reader, count: 1)
        let first = try await world.post("before the disk fills")
        _ = try await reader.waitForLine("first post") { $0.contains(first) }

        // Fill the file system to the last byte.
        let filler = "\(mountPoint)/filler"
        let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(fd >= 0)
        let chunk = [UInt8](repeating: 0x5a, count: 4096)
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        var single: UInt8 = 0
        while write(fd, &single, 1) > 0 {}
        #expect(errno == ENOSPC)
        close(fd)

        // Forwarding continues while nothing can be written (new users: the stranger cache writes too;
        // a burst: the moderation log writes too).
        var whileFull: [String] = []
        for i in 1...3 { whileFull.append(try await world.postWithKey("while the disk is full \(i)", as: "user\(i)").id) }
        _ = try await world.posts((1...8).map { "BUY CHEAP TICKETS \($0)" }, as: "burster")
        for id in whileFull { _ = try await reader.waitForLine("post while full") { $0.contains(id) } }
        #expect(bridge.isRunning)
        let errors = bridge.stderrLines.filter { $0.contains("\"disk_full\":true") || $0.contains("database or disk is full") }
        print("disk full: \(errors.count) error line(s) logged, \(bridge.stderrLines.count) lines in all")
        #expect(bridge.stderrLines.contains { $0.contains("cannot record a forwarded event; forwarding it anyway") && $0.contains("\"disk_full\":true") },
                "\(bridge.transcript)")

        // Space returns: forwards are recorded again; the stop is clean; the database is intact.
        try FileManager.default.removeItem(atPath: filler)
        let after = try await world.post("after space returns")
        _ = try await reader.waitForLine("post after space returns") { $0.contains(after) }
        try await Task.sleep(for: .seconds(2))  // longest downlink hold
        for id in whileFull + [first, after] { #expect(carriers(reader, eventID: id).count == 1) }
        kill(bridge.pid, SIGTERM)
        #expect(try await bridge.waitForExit(timeout: .seconds(10)) == 0)
        let check = try databaseCheck(dataDirectory)
        #expect(check.integrity == "ok")
        #expect(check.recentEvents >= 2)  // `first` and `after` (the ones while full were not written)
    }
}
