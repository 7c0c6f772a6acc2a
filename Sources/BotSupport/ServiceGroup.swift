/// One long-running part of a process: started in order with the others of its ``ServiceGroup`` and
/// stopped in reverse order, each within its own deadline (the shape of swift-service-lifecycle, written
/// small because no outside package can be fetched here).
public struct Service: Sendable {
    public let name: String
    /// Gets the service ready before the next one starts (nil: nothing to do); a throw stops the services
    /// already started, in reverse, and the group reports ``ServiceGroup/StopReason/startFailed(_:_:)``.
    public let start: (@Sendable () async throws -> Void)?
    /// Runs until the service is done: after ``stop`` (or cancellation), or on its own (then the whole
    /// group stops, and says which service ended).
    public let run: @Sendable () async -> Void
    /// Asks the service to finish gracefully; ``run`` must return soon after. Nil: the group cancels the
    /// task running ``run`` instead (for services whose whole stop is "cancel me").
    public let stop: (@Sendable () async -> Void)?
    /// How long `stop` plus `run`'s return may take; past it the task is cancelled and the group moves on.
    public let deadline: Duration

    public init(
        name: String, deadline: Duration, start: (@Sendable () async throws -> Void)? = nil, run: @escaping @Sendable () async -> Void,
        stop: (@Sendable () async -> Void)? = nil
    ) {
        self.name = name
        self.start = start
        self.deadline = deadline
        self.run = run
        self.stop = stop
    }
}

/// Runs ``Service``s: starts them in the order given, waits until a stop is requested (``requestStop(_:)``,
/// e.g. from a signal handler) or one of them ends by itself, then stops them one by one in reverse order.
/// Every task it starts is awaited or cancelled before ``run()`` returns: nothing is left running.
public final class ServiceGroup: Sendable {
    /// Why the group stopped.
    public enum StopReason: Sendable, Equatable {
        /// ``requestStop(_:)`` was called (the reason given, e.g. `SIGTERM`).
        case requested(String)
        /// A service's `run` returned before any stop was requested.
        case serviceEnded(String)
        /// A service's `start` threw (its name, the error); the services started before it were stopped.
        case startFailed(String, String)
    }

    /// What ``run()`` did.
    public struct Report: Sendable, Equatable {
        public var reason: StopReason
        /// Services that did not finish within their deadline (cancelled).
        public var overran: [String] = []
    }

    private enum Event: Sendable {
        case stopRequested(String)
        case ended(String)
    }

    private let services: [Service]
    private let logger: Logger?
    private let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    /// Waits a stop deadline out (`Task.sleep`; tests pass a clock of their own); throws when cancelled.
    private let sleep: @Sendable (Duration) async throws -> Void

    public init(
        _ services: [Service], logger: Logger? = nil,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        precondition(Set(services.map(\.name)).count == services.count, "service names must be unique")
        self.services = services
        self.logger = logger
        self.sleep = sleep
        (events, continuation) = AsyncStream.makeStream(of: Event.self)
    }

    /// Asks the group to stop (thread-safe; the first reason wins).
    public func requestStop(_ reason: String) { continuation.yield(.stopRequested(reason)) }

    /// Starts the services in order (each one's `start` awaited before the next), runs until a stop is requested
    /// or a service ends, then stops them in reverse; returns after every started service has stopped.
    public func run() async -> Report {
        var tasks: [Task<Void, Never>] = []
        for service in services {
            if let start = service.start {
                do {
                    try await start()
                } catch {
                    logger?.error("service failed to start; stopping the others", [("service", .string(service.name)), ("error", .string("\(error)"))])
                    var report = Report(reason: .startFailed(service.name, "\(error)"))
                    report.overran = await stopStarted(tasks, ended: [])
                    continuation.finish()
                    return report
                }
            }
            let continuation = continuation
            tasks.append(Task {
                await service.run()
                continuation.yield(.ended(service.name))
            })
        }
        var reason = StopReason.requested("cancelled")
        var ended: Set<String> = []
        for await event in events {
            switch event {
            case .stopRequested(let why): reason = .requested(why)
            case .ended(let name):
                ended.insert(name)
                reason = .serviceEnded(name)
                logger?.error("service ended on its own; stopping the others", [("service", .string(name))])
            }
            break
        }
        var report = Report(reason: reason)
        report.overran = await stopStarted(tasks, ended: ended)
        continuation.finish()
        return report
    }

    /// Stops the services whose tasks were started, last started first, skipping those that ended by
    /// themselves; returns the ones that overran their deadline.
    private func stopStarted(_ tasks: [Task<Void, Never>], ended: Set<String>) async -> [String] {
        var overran: [String] = []
        for (service, task) in zip(services, tasks).reversed() {
            if ended.contains(service.name) { continue }
            if await !stop(service, task) { overran.append(service.name) }
        }
        return overran
    }

    /// Stops one service within its deadline; false when it overran. An overrunning service's task is
    /// cancelled at the deadline, and the group waits for it to notice (a service that ignores cancellation
    /// too is the caller's hard deadline's business).
    private func stop(_ service: Service, _ task: Task<Void, Never>) async -> Bool {
        let sleep = sleep
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                if let stop = service.stop { await stop() } else { task.cancel() }
                await task.value
                return true
            }
            group.addTask {
                do {
                    try await sleep(service.deadline)
                } catch {
                    return true  // cancelled: the service finished first
                }
                task.cancel()
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}
