import BridgeApp
@testable import BridgeBot
import Testing

/// Help is generated from the parser's own spec; these tests hold it to that: every form a help page lists parses
/// (issue 23 finding 6: help listed `modlog show` and `notice post TEXT`, and the parser refused both).
@Suite("The command line: every form help lists parses")
struct HelpFormsTests {
    /// Every help page: the top-level commands' own pages (a group's page lists each subcommand's usage line).
    static var pages: [String] {
        BridgeCommandLine.commands.map { command in
            switch command.node {
            case .single(let sub): sub.spec.helpText
            case .group(let group): group.helpText
            }
        }
    }

    /// The usage lines of a page: `bitchat-bridge PATH …`.
    static func usageLines(_ page: String) -> [String] {
        page.split(separator: "\n").map { $0.trimmingPrefix("  ") }.filter { $0.hasPrefix("bitchat-bridge ") }.map(String.init)
    }

    /// A usage line read as a user reads it: the leading lowercase words are the command path; `[…]` is optional;
    /// every other word that is no option is a placeholder (a positional or an option's value).
    struct Form {
        var path: [String] = []
        /// Words with whether they sit in brackets, in order (each bracket group one entry).
        var parts: [(words: [String], optional: Bool)] = []

        init(_ line: String) {
            var rest = Substring(line.dropFirst("bitchat-bridge ".count))
            while !rest.isEmpty {
                rest = rest.drop { $0 == " " }
                guard let first = rest.first else { break }
                if first == "[" {
                    let end = rest.firstIndex(of: "]")!
                    parts.append((rest[rest.index(after: rest.startIndex)..<end].split(separator: " ").map(String.init), true))
                    rest = rest[rest.index(after: end)...]
                } else {
                    let end = rest.firstIndex(of: " ") ?? rest.endIndex
                    let word = String(rest[..<end])
                    if parts.isEmpty, word.allSatisfy({ $0.isLowercase || $0 == "-" }), !word.hasPrefix("-") {
                        path.append(word)
                    } else {
                        parts.append(([word], false))
                    }
                    rest = rest[end...]
                }
            }
        }

        /// The arguments with (`full`) or without the optional parts; placeholders and option values become `x`.
        func arguments(full: Bool) -> [String] {
            path + parts.filter { full || !$0.optional }.flatMap(\.words).map { $0.hasPrefix("-") ? $0 : "x" }
        }
    }

    @Test("every usage line help prints parses, with and without its optional parts, to the command it names")
    func everyListedForm() throws {
        var checked = 0
        for page in Self.pages {
            for line in Self.usageLines(page) {
                let form = Form(line)
                for full in [false, true] {
                    let arguments = form.arguments(full: full)
                    let resolved: (Subcommand, ParsedArguments)
                    do {
                        resolved = try BridgeCommandLine.resolve(arguments)
                    } catch {
                        Issue.record("\(line) → \(arguments): \(error)")
                        continue
                    }
                    #expect(resolved.0.spec.path == form.path.joined(separator: " "), "\(line) → \(arguments)")
                    checked += 1
                }
            }
        }
        #expect(checked >= 2 * 40, "only \(checked) forms found: the usage lines were not read")
    }

    @Test("a fallback named by a word can be named: modlog show, notice post TEXT; a placeholder (relays GEOHASH) cannot")
    func fallbackWords() throws {
        #expect(try BridgeCommandLine.resolve(["modlog", "show", "--limit", "5"]).0.spec.path == "modlog")
        let post = try BridgeCommandLine.resolve(["notice", "post", "water point moved"])
        #expect(post.0.name == "post" && post.1.positionals == ["water point moved"])
        // Without the word, the same subcommand; "list" is its own subcommand.
        #expect(try BridgeCommandLine.resolve(["notice", "water point moved"]).0.name == "post")
        #expect(try BridgeCommandLine.resolve(["notice", "list"]).0.name == "list")
        // `relays GEOHASH` takes the word as the geohash.
        #expect(try BridgeCommandLine.resolve(["relays", "GEOHASH"]).1.positionals == ["GEOHASH"])
    }

    @Test("the parser enforces what help shows: a missing or extra positional and a missing required option exit 64 with the usage")
    func enforced() {
        let cases: [([String], String)] = [
            (["identities", "allow"], "missing argument KEY"),
            (["identities", "allow", "a", "b"], "unexpected argument 'b'"),
            (["identities", "note", "k"], "missing argument TEXT"),
            (["nostr", "listen"], "--geohash is required"),
            (["modlog", "export"], "--since is required"),
            (["geohash", "encode", "1"], "missing argument LON"),
        ]
        for (arguments, message) in cases {
            #expect {
                _ = try BridgeCommandLine.resolve(arguments)
            } throws: { error in
                guard case .usage(let text) = error as? CommandExit else { return false }
                return text.contains(message) && text.contains("usage: bitchat-bridge \(arguments[0])")
            }
        }
    }
}
