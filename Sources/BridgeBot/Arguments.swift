import BridgeApp
/// How a command ends, mapped to exit codes once in `main` (swift-argument-parser's three outcomes).

/// One option a command accepts.
struct OptionSpec {
    let name: String
    let valueName: String?
    let help: String

    static func flag(_ name: String, _ help: String) -> OptionSpec { OptionSpec(name: name, valueName: nil, help: help) }

    static func value(_ name: String, _ valueName: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: valueName, help: help)
    }
}

/// A (sub)command's interface: what `--help` prints and what the parser accepts.
struct CommandSpec {
    let path: String
    let summary: String
    let usage: [String]
    let options: [OptionSpec]
    var details: String = ""

    var helpText: String {
        var lines = ["\(summary)", "", "Usage:"]
        lines += usage.map { "  bitchat-bridge \(path) \($0)" }
        let all = options + [
            .flag("--help", "Show this help."),
            .flag("--", "End of options: every later argument is positional (a TEXT starting with '-')."),
        ]
        lines += ["", "Options:"]
        for option in all {
            let left = option.valueName.map { "\(option.name) \($0)" } ?? option.name
            lines.append("  " + left.padding(toLength: max(left.count, 24)) + "  " + option.help)
        }
        if !details.isEmpty { lines += ["", details] }
        return lines.joined(separator: "\n")
    }
}

/// One subcommand of a ``CommandGroup``: its own spec (help and accepted options) and what it runs with
/// the arguments after its name, parsed against that spec.
struct Subcommand: Sendable {
    let name: String
    let spec: CommandSpec
    /// Other words that name it (`neighbours` for `neighbors`).
    var aliases: [String] = []
    let run: @Sendable (ParsedArguments) throws(CommandExit) -> Void

    init(_ name: String, _ spec: CommandSpec, aliases: [String] = [],
         run: @escaping @Sendable (ParsedArguments) throws(CommandExit) -> Void) {
        self.name = name
        self.spec = spec
        self.aliases = aliases
        self.run = run
    }
}

/// A command made of subcommands (`nostr listen|post|sign|verify`). Each subcommand has its own spec, so
/// `nostr post --help` shows post's options only and an option another subcommand takes is refused (exit 64,
/// naming it); `nostr --help` lists the subcommands with their usage lines.
struct CommandGroup: Sendable {
    let name: String
    let summary: String
    let subcommands: [Subcommand]
    /// Runs when the first word names no subcommand, with all the arguments (`relays GEOHASH`).
    var fallback: Subcommand?
    var details: String = ""

    private var names: String { subcommands.map(\.name).joined(separator: ", ") }

    var helpText: String {
        let listed = subcommands + (fallback.map { [$0] } ?? [])
        var lines = [summary, "", "Usage:"]
        for sub in listed {
            lines += sub.spec.usage.map { "  bitchat-bridge \(sub.spec.path) \($0)" }
        }
        lines += ["", "Subcommands:"]
        let width = listed.map(\.name.count).max() ?? 0
        for sub in listed {
            lines.append("  " + sub.name.padding(toLength: width + 2) + sub.spec.summary)
        }
        lines += ["", "Options differ per subcommand: bitchat-bridge \(name) <subcommand> --help."]
        if !details.isEmpty { lines += ["", details] }
        return lines.joined(separator: "\n")
    }

    func run(_ arguments: [String]) throws(CommandExit) {
        let first = arguments.first
        if first == "--help" || first == "-h" {
            print(helpText)
            throw .clean
        }
        if let first, let sub = subcommands.first(where: { $0.name == first || $0.aliases.contains(first) }) {
            try sub.run(try ParsedArguments.parse(Array(arguments.dropFirst()), spec: sub.spec))
        } else if let fallback {
            try fallback.run(try ParsedArguments.parse(arguments, spec: fallback.spec))
        } else if let first {
            throw .usage("unknown subcommand '\(name) \(first)' (\(names); see bitchat-bridge \(name) --help)")
        } else {
            throw .usage("missing subcommand for '\(name)': \(names) (see bitchat-bridge \(name) --help)")
        }
    }
}

/// Arguments after the command words, split into positionals, flags and option values.
struct ParsedArguments {
    var positionals: [String] = []
    var flags: Set<String> = []
    var values: [String: [String]] = [:]

    func has(_ flag: String) -> Bool { flags.contains(flag) }

    func value(_ name: String) -> String? { values[name]?.last }

    func allValues(_ name: String) -> [String] { values[name] ?? [] }

    /// Parses against `spec`. `--name value` and `--name=value` both work; `--` ends options.
    static func parse(_ arguments: [String], spec: CommandSpec) throws(CommandExit) -> ParsedArguments {
        var result = ParsedArguments()
        var index = 0
        var optionsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsEnded || !argument.hasPrefix("-") || argument == "-" || isNegativeNumber(argument) {
                result.positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            if argument == "--help" || argument == "-h" {
                print(spec.helpText)
                throw .clean
            }
            var name = argument
            var inlineValue: String?
            if let eq = argument.firstIndex(of: "=") {
                name = String(argument[..<eq])
                inlineValue = String(argument[argument.index(after: eq)...])
            }
            guard let option = spec.options.first(where: { $0.name == name }) else {
                // Every option is `--name`: a single-dash word is more likely a text meant as a positional.
                let hint = name.hasPrefix("--") ? "" : "; an argument starting with '-' goes after '--'"
                throw .usage("unknown option '\(name)' for '\(spec.path)' (see bitchat-bridge \(spec.path) --help\(hint))")
            }
            if option.valueName == nil {
                guard inlineValue == nil else { throw .usage("option '\(name)' takes no value") }
                result.flags.insert(name)
                continue
            }
            if let inlineValue {
                result.values[name, default: []].append(inlineValue)
            } else {
                guard index < arguments.count else { throw .usage("option '\(name)' needs a value") }
                result.values[name, default: []].append(arguments[index])
                index += 1
            }
        }
        return result
    }

    private static func isNegativeNumber(_ text: String) -> Bool {
        text.count > 1 && text.hasPrefix("-") && Double(text) != nil
    }

    /// Exactly `count` positionals (their names used in the message), or a usage error.
    func requirePositionals(_ names: [String], optional: Int = 0) throws(CommandExit) -> [String] {
        guard positionals.count >= names.count - optional else {
            throw .usage("missing argument \(names[positionals.count].uppercased())")
        }
        guard positionals.count <= names.count else {
            throw .usage("unexpected argument '\(positionals[names.count])'")
        }
        return positionals
    }
}

extension String {
    func padding(toLength length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }
}
