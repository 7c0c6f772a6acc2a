#if canImport(Glibc)
import Glibc
#endif

// OpenSSL writes to a dead peer can raise SIGPIPE; a bridge must survive relays hanging up.
signal(SIGPIPE, SIG_IGN)
exit(BridgeCommandLine.run(Array(CommandLine.arguments.dropFirst())))
