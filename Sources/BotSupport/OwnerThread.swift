#if canImport(Glibc)
import Glibc
#endif

/// A detached OS thread for a loop that owns a C library's state (one owner thread per event loop; other
/// threads only enqueue and wake it). The closure keeps whatever it captures alive until it returns.
public enum OwnerThread {
    private final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Starts `body` on a new detached thread; false when the thread could not be created.
    public static func detach(_ body: @escaping @Sendable () -> Void) -> Bool {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        let result = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            Unmanaged<Box>.fromOpaque(raw).takeRetainedValue().body()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Box>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}
