import BridgeApp
import BotSupport
import Console

/// `bitchat-bridge moderators add|list|remove` (issue 35): a console token per person in `<data-dir>/moderators.json`
/// (mode 0600), so the audit names who did what and removing one person ends only their sessions. A running bridge
/// follows the file at once.
enum ModeratorsCommand {
    static let dataDirOption = OptionSpec.value("--data-dir", "DIR", "Data directory (default: $BRIDGE_DATA_DIR, else ~/.local/share/bitchat-bridge).")

    static let group = CommandGroup(
        name: "moderators",
        summary: "Give each moderator a console token of their own: add NAME, list, remove NAME.",
        subcommands: [
            Subcommand("add", CommandSpec(
                path: "moderators add", summary: "Add a moderator and print their console token (the one time it is shown).",
                positionals: [PositionalSpec(name: "NAME")], options: [dataDirOption],
                details: """
                    NAME: 1–32 letters, digits, '.', '_' or '-' (not 'operator': the console-token's). The token is printed
                    once, on stdout; give it to that person only. They sign in to the console with it, and every audit row
                    of theirs names them (session:NAME).
                    """)) { args throws(CommandExit) in
                    let name = args.positionals[0]
                    let dataDirectory = try directory(args)
                    var moderators = try load(dataDirectory)
                    let token: String
                    do throws(ModeratorsError) {
                        token = try moderators.add(name, now: wallClockNow())
                        try moderators.save(dataDirectory: dataDirectory)
                    } catch {
                        throw error == .badName(name) || error == .exists(name) ? .usage(error.description) : .failure(error.description)
                    }
                    printError("moderators: added \(name) in \(Moderators.path(dataDirectory: dataDirectory)) (mode 0600)")
                    CLIAudit.record(action: "moderator add", target: name, dataDirectory: dataDirectory)
                    print(token)
                },
            Subcommand("list", CommandSpec(
                path: "moderators list", summary: "List the moderators (names and when they were added; never the tokens).",
                options: [dataDirOption, .flag("--json", "One JSON object per line: name, added.")])) { args throws(CommandExit) in
                    let moderators = try load(try directory(args))
                    for moderator in moderators.list {
                        if args.has("--json") {
                            print(JSONWriter.compact(.object([("name", .string(moderator.name)), ("added", .double(moderator.added))])))
                        } else {
                            print(moderator.name.padding(toLength: 34) + "added " + ModlogCommand.utcTime(moderator.added) + " UTC")
                        }
                    }
                    if moderators.list.isEmpty && !args.has("--json") { print("No moderators yet (bitchat-bridge moderators add NAME).") }
                },
            Subcommand("remove", CommandSpec(
                path: "moderators remove", summary: "Remove a moderator: their token stops working and their sessions end; no one else's.",
                positionals: [PositionalSpec(name: "NAME")], options: [dataDirOption])) { args throws(CommandExit) in
                    let name = args.positionals[0]
                    let dataDirectory = try directory(args)
                    var moderators = try load(dataDirectory)
                    guard moderators.remove(name) else { throw .usage("no moderator named '\(name)' (bitchat-bridge moderators list)") }
                    do throws(ModeratorsError) {
                        try moderators.save(dataDirectory: dataDirectory)
                    } catch {
                        throw .failure(error.description)
                    }
                    CLIAudit.record(action: "moderator remove", target: name, dataDirectory: dataDirectory)
                    print("removed \(name): their token no longer signs in, and their sessions end at their next request")
                },
        ])

    private static func directory(_ args: ParsedArguments) throws(CommandExit) -> String {
        let dataDirectory = Paths.dataDirectory(option: args.value("--data-dir"))
        try KeysCommand.checkDataDirectory(dataDirectory)
        return dataDirectory
    }

    private static func load(_ dataDirectory: String) throws(CommandExit) -> Moderators {
        do throws(ModeratorsError) {
            return try Moderators.load(dataDirectory: dataDirectory)
        } catch {
            throw .failure(error.description)
        }
    }
}
