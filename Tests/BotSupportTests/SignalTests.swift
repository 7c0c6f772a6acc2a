import BotSupport
import Foundation
import Testing

@Suite("Signal watcher")
struct SignalTests {
    @Test("a raised SIGHUP arrives on the stream instead of ending the process")
    func hangup() async throws {
        let stream = SignalHandler.stream([.hangup])
        var iterator = stream.makeAsyncIterator()
        // Raise until seen: the source may need a moment to be installed on its queue.
        let raiser = Task {
            for _ in 0..<200 {
                kill(getpid(), SIGHUP)
                try await Task.sleep(for: .milliseconds(25))
            }
        }
        let first = await iterator.next()
        raiser.cancel()
        #expect(first == .hangup)
    }
}
