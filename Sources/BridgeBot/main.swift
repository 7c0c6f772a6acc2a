#if canImport(Glibc)
import BridgeApp
import Glibc
#endif
import BotCrypto

// Before any OpenSSL use (libwebsockets' TLS included): no OpenSSL teardown at exit() while tasks on other
// threads may still sign or hash (see `CryptoRuntime.skipCleanupAtExit`).
CryptoRuntime.skipCleanupAtExit()

// OpenSSL writes to a dead peer can raise SIGPIPE; a bridge must survive relays hanging up.
signal(SIGPIPE, SIG_IGN)
exit(BridgeCommandLine.run(Array(CommandLine.arguments.dropFirst())))
