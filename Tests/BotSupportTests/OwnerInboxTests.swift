import Testing
#if canImport(Glibc)
import Glibc
#endif
import BotSupport

@Suite("Owner-thread inbox and wake pipe")
struct OwnerInboxTests {
    /// Whether the wake pipe has something to read right now (poll with a zero timeout).
    func isAwake(_ pipe: WakePipe) -> Bool {
        var fds = [pollfd(fd: pipe.readFD, events: Int16(POLLIN), revents: 0)]
        return poll(&fds, 1, 0) == 1
    }

    @Test func postsWakeTheOwnerAndAreTakenOnceInOrder() throws {
        let inbox = try OwnerInbox<Int>()
        #expect(!isAwake(inbox.wake))
        inbox.post(1)
        inbox.post(2)
        #expect(isAwake(inbox.wake))
        inbox.wake.drain()
        #expect(!isAwake(inbox.wake))
        let first = inbox.take()
        #expect(first.items == [1, 2] && !first.closing)
        #expect(inbox.take().items.isEmpty)
    }

    @Test func closeIsStickyAndWakes() throws {
        let inbox = try OwnerInbox<Int>()
        inbox.requestClose()
        #expect(isAwake(inbox.wake))
        inbox.post(3)
        let taken = inbox.take()
        #expect(taken.items == [3] && taken.closing)
        #expect(inbox.take().closing)
    }

    @Test func afterTheOwnerFinishedPostsNoLongerPoke() throws {
        let inbox = try OwnerInbox<Int>()
        inbox.ownerFinished()
        inbox.post(4)
        inbox.requestClose()
        #expect(!isAwake(inbox.wake))
    }
}
