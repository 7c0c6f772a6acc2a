import BotSupport
import Foundation
import Testing

@Suite("File helpers")
struct FileIOTests {
    let directory = NSTemporaryDirectory() + "fileio-\(UUID().uuidString)"

    @Test("atomic write creates the file with the requested mode and replaces it whole")
    func atomicWrite() throws {
        try FileIO.makeDirectory(directory + "/a/b", mode: 0o700)
        #expect(try FileIO.permissions(directory + "/a/b") == 0o700)
        let path = directory + "/a/b/secret"
        try FileIO.writeAtomically(Array("one".utf8), to: path, mode: 0o600)
        #expect(try FileIO.permissions(path) == 0o600)
        try FileIO.writeAtomically(Array("two!".utf8), to: path, mode: 0o600)
        #expect(try FileIO.read(path) == Array("two!".utf8))
        // No temporary file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory + "/a/b") == ["secret"])
    }

    @Test("errors keep the operation, path and errno")
    func errors() {
        #expect(throws: FileError.self) { try FileIO.read(directory + "/missing") }
        do {
            _ = try FileIO.read(directory + "/missing")
        } catch {
            #expect(error.isNotFound)
            #expect(error.description.contains("No such file"))
        }
        #expect(throws: FileError.self) { try FileIO.writeAtomically([1], to: "/proc/forbidden/x") }
    }

    @Test("read honours its size bound")
    func bounded() throws {
        try FileIO.makeDirectory(directory)
        try FileIO.writeAtomically([UInt8](repeating: 1, count: 100), to: directory + "/big")
        #expect(try FileIO.read(directory + "/big", maxBytes: 100).count == 100)
        #expect(throws: FileError.self) { try FileIO.read(directory + "/big", maxBytes: 99) }
    }

    @Test("path helpers")
    func paths() {
        #expect(FileIO.directoryName(of: "/a/b/c") == "/a/b")
        #expect(FileIO.directoryName(of: "c") == ".")
        #expect(FileIO.directoryName(of: "/c") == "/")
        #expect(FileIO.join("/a/", "b") == "/a/b")
        #expect(FileIO.join("/a", "b") == "/a/b")
    }
}

@Suite("Logger")
struct LoggerTests {
    @Test("JSON lines with dotted metadata; suppressed levels never build their message")
    func lines() throws {
        let sink = InMemoryLogSink()
        let logger = Logger(label: "bridge.test", level: .info, sink: sink)
        nonisolated(unsafe) var built = false
        logger.debug({ built = true; return "hidden" }())
        #expect(!built)
        logger.warning("relay closed", [("relay.url", .string("wss://x.example")), ("drop.count", .integer(3))])
        let record = try #require(sink.all.first)
        let parsed = try JSONParser().parse(record.jsonLine)
        #expect(parsed["level"] == .string("warning"))
        #expect(parsed["logger"] == .string("bridge.test"))
        #expect(parsed["msg"] == .string("relay closed"))
        #expect(parsed["relay.url"] == .string("wss://x.example"))
        #expect(parsed["drop.count"] == .integer(3))
    }
}
