/// How a command ends, for the executable's exit code (EX_USAGE 64, failure 1, clean 0).
public enum CommandExit: Error {
    /// Bad invocation: message names the argument; exit 64 (EX_USAGE).
    case usage(String)
    /// The command ran and failed; exit 1.
    case failure(String)
    /// Help or version was printed; exit 0.
    case clean
}

extension CommandExit {
    /// What the command says when it ends this way (empty for ``clean``).
    public var message: String {
        switch self {
        case .usage(let message), .failure(let message): message
        case .clean: ""
        }
    }
}
