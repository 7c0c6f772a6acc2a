import BridgeApp
/// How a command ends, mapped to exit codes once in `main` (swift-argument-parser's three outcomes).

/// One option a command accepts.
struct OptionSpec {
    let name: String
    let valueName: String?
    let help: String
    /// The command cannot run without it (`nostr listen --geohash GH`): the parser refuses its absence.
    var required = false

    static func flag(_ name: String, _ help: String) -> OptionSpec { OptionSpec(name: name, valueName: nil, help: help) }

    static func value(_ name: String, _ valueName: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: valueName, help: help)
    }

    static func required(_ name: String, _ valueName: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, valueName: valueName, help: help, required: true)
    }

    /// `--name VALUE` or `--name`.
    var form: String { valueName.map { "\(name) \($0)" } ?? name }
}

/// One positional argument: its name in capitals, as help shows it (`KEY`, `TEXT`).
struct PositionalSpec {
    let name: String
    var optional = false
    /// Free text that may start with '-' (then it goes after `--`): help shows `[--] TEXT`.
    var text = false

    static func text(_ name: String) -> PositionalSpec { PositionalSpec(name: name, text: true) }
    static func optional(_ name: String) -> PositionalSpec { PositionalSpec(name: name, optional: true) }
}

/// A (sub)command's interface: what the parser accepts, and the help generated from it (so every form help lists
/// is one the parser takes: `HelpFormsTests`).
struct CommandSpec {
    let path: String
    let summary: String
    var positionals: [PositionalSpec] = []
    let options: [OptionSpec]
    /// A remark after the usage line (where standard input is read, what a value may also be).
    var note: String = ""
    var details: String = ""

    init(
        path: String, summary: String, positionals: [PositionalSpec] = [], options: [OptionSpec], note: String = "",
        details: String = ""
    ) {
        self.path = path
        self.summary = summary
        self.positionals = positionals
        self.options = options
        self.note = note
        self.details = details
    }

    /// The usage line after `bitchat-bridge PATH`: required options, the optional ones in brackets, then the
    /// positionals (optional ones in brackets, free text after `[--]`).
    var usage: String {
        var words = options.filter(\.required).map(\.form) + options.filter { !$0.required }.map { "[\($0.form)]" }
        for positional in positionals {
            if positional.text { words.append("[--]") }
            words.append(positional.optional ? "[\(positional.name)]" : positional.name)
        }
        return words.joined(separator: " ")
    }

    var usageLine: String { "bitchat-bridge \(path)" + (usage.isEmpty ? "" : " \(usage)") }

    var helpText: String {
        var lines = ["\(summary)", "", "Usage:", "  " + usageLine]
        if !note.isEmpty { lines.append("  " + note) }
        let all = options + [
            .flag("--help", "Show this help."),
            .flag("--", "End of options: every later argument is positional (a TEXT starting with '-')."),
        ]
        lines += ["", "Options:"]
        for option in all {
            lines.append("  " + option.form.padding(toLength: max(option.form.count, 24)) + "  " + option.help)
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
        for sub in listed { lines.append("  " + sub.spec.usageLine) }
        lines += ["", "Subcommands:"]
        let width = listed.map(\.name.count).max() ?? 0
        for sub in listed {
            lines.append("  " + sub.name.padding(toLength: width + 2) + sub.spec.summary)
        }
        lines += ["", "Options differ per subcommand: bitchat-bridge \(name) <subcommand> --help."]
        if !details.isEmpty { lines += ["", details] }
        return lines.joined(separator: "\n")
    }

    /// The subcommand the arguments name and its parsed arguments. A fallback named by a word (`modlog show`,
    /// `notice post`) may also be named; one named by a placeholder in capitals (`relays GEOHASH`) is not a word.
    func resolve(_ arguments: [String]) throws(CommandExit) -> (Subcommand, ParsedArguments) {
        let first = arguments.first
        if first == "--help" || first == "-h" {
            print(helpText)
            throw .clean
        }
        let named = subcommands + (fallback.map { $0.name == $0.name.lowercased() ? [$0] : [] } ?? [])
        if let first, let sub = named.first(where: { $0.name == first || $0.aliases.contains(first) }) {
            return (sub, try ParsedArguments.parse(Array(arguments.dropFirst()), spec: sub.spec))
        } else if let fallback {
            return (fallback, try ParsedArguments.parse(arguments, spec: fallback.spec))
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
        try result.check(against: spec)
        return result
    }

    /// The positionals' count and the required options, as the spec (and so the help) says.
    private func check(against spec: CommandSpec) throws(CommandExit) {
        let usage = "usage: \(spec.usageLine)"
        if let missing = spec.options.first(where: { $0.required && values[$0.name] == nil }) {
            throw .usage("\(missing.name) is required (\(usage))")
        }
        let required = spec.positionals.filter { !$0.optional }.count
        guard positionals.count >= required else {
            throw .usage("missing argument \(spec.positionals[positionals.count].name) (\(usage))")
        }
        guard positionals.count <= spec.positionals.count else {
            throw .usage("unexpected argument '\(positionals[spec.positionals.count])' (\(usage))")
        }
    }

    private static func isNegativeNumber(_ text: String) -> Bool {
        text.count > 1 && text.hasPrefix("-") && Double(text) != nil
    }
}

extension String {
    func padding(toLength length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }
}
