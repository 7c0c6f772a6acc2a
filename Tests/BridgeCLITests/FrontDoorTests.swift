import Foundation
import Testing

/// The README is the front door (issue 23): short, and every page it points to is there.
@Suite("The README as a front door")
struct FrontDoorTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("the README has at most 250 lines and every relative link it makes resolves to a file")
    func frontDoor() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(text.split(separator: "\n", omittingEmptySubsequences: false).count <= 250)
        var links: [String] = []
        var rest = Substring(text)
        while let open = rest.range(of: "](") {
            let target = rest[open.upperBound...].prefix { $0 != ")" }
            links.append(String(target.split(separator: "#").first ?? ""))
            rest = rest[open.upperBound...]
        }
        #expect(links.count >= 5, "\(links)")
        for link in links where !link.hasPrefix("http") {
            #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(link).path), "\(link)")
        }
    }
}
