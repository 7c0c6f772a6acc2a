import Testing

@testable import NostrRelay

@Suite("Relay connection state machine (no I/O)")
struct RelayConnectionMachineTests {
    let t0 = ContinuousClock.now

    @Test(arguments: [(1, 0.0, 0.8), (2, 0.999_999, 2.4), (3, 0.25, 3.6), (9, 0.5, 256), (10, 0.5, 300), (30, 0.0, 240)])
    func backoffFormula(_ k: Int, _ unit: Double, _ seconds: Double) {
        let delay = RelayConnectionMachine.backoff(failure: k, jitterUnit: unit)
        #expect(abs(Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18 - seconds) < 0.001)
    }

    @Test func connectsBacksOffAndBecomesPermanentAfterTenFailures() {
        var machine = RelayConnectionMachine(connectTimeout: .seconds(10), jitterUnit: { 0.5 })
        var now = t0
        do { let a = machine.start(now: now); #expect(a == [.connect]) }
        for k in 1...9 {
            do { let a = machine.ended(.connect, now: now); #expect(a == []) }
            guard case .backingOff(let until) = machine.state else { Issue.record("not backing off"); return }
            #expect(until == now + RelayConnectionMachine.backoff(failure: k, jitterUnit: 0.5))
            do { let a = machine.tick(now: until - .milliseconds(1)); #expect(a == []) }
            now = until
            do { let a = machine.tick(now: now); #expect(a == [.connect]) }
        }
        _ = machine.ended(.connect, now: now)
        #expect(machine.state == .permanentlyFailed(retryAt: now + .seconds(600)))
        do { let a = machine.tick(now: now + .seconds(599)); #expect(a == []) }
        do { let a = machine.tick(now: now + .seconds(600)); #expect(a == [.connect]) }
        // The late probe fails: permanent again at once.
        _ = machine.ended(.connect, now: now + .seconds(601))
        #expect(machine.state == .permanentlyFailed(retryAt: now + .seconds(1201)))
    }

    @Test func dnsFailureIsPermanentImmediately() {
        var machine = RelayConnectionMachine(jitterUnit: { 0 })
        _ = machine.start(now: t0)
        _ = machine.ended(.dns, now: t0)
        #expect(machine.state == .permanentlyFailed(retryAt: t0 + .seconds(600)))
    }

    @Test func connectTimeoutAbortsAndCountsAsFailure() {
        var machine = RelayConnectionMachine(connectTimeout: .seconds(10), jitterUnit: { 0 })
        _ = machine.start(now: t0)
        do { let a = machine.tick(now: t0 + .seconds(9)); #expect(a == []) }
        do { let a = machine.tick(now: t0 + .seconds(10)); #expect(a == [.abort]) }
        #expect(machine.consecutiveFailures == 1)
        #expect(machine.state == .backingOff(until: t0 + .seconds(10) + .milliseconds(800)))
    }

    @Test func onlyAStableConnectionEndsTheFailureSeries() {
        var machine = RelayConnectionMachine(jitterUnit: { 0 })
        _ = machine.start(now: t0)
        _ = machine.ended(.connect, now: t0)
        _ = machine.tick(now: t0 + .seconds(1))
        let opened = t0 + .seconds(2)
        do { let a = machine.opened(now: opened); #expect(a == [.connected]) }
        #expect(machine.consecutiveFailures == 1, "coming up is not enough")
        machine.answered()
        do { let a = machine.tick(now: opened + RelayConnectionMachine.Limits.stableAfter - .nanoseconds(1)); #expect(a == []) }
        #expect(!machine.isStable)
        #expect(machine.consecutiveFailures == 1)
        _ = machine.tick(now: opened + RelayConnectionMachine.Limits.stableAfter)
        #expect(machine.isStable)
        #expect(machine.consecutiveFailures == 0)
        // The loss of a stable connection is failure 1 of a new series.
        do { let a = machine.ended(.closed, now: t0 + .seconds(70)); #expect(a == [.disconnected]) }
        #expect(machine.consecutiveFailures == 1)
        #expect(machine.state == .backingOff(until: t0 + .seconds(70) + .milliseconds(800)))
        // Events for a state that does not expect them change nothing.
        do { let a = machine.opened(now: t0 + .seconds(70)); #expect(a == []) }
        do { let a = machine.stop(); #expect(a == []) }
        #expect(machine.state == .stopped)
    }

    /// Issue 14: a relay that completes the handshake and closes at once was retried every 0.8–1.2 s
    /// (55.7/min), because any connection that had come up restarted the series. Each such connection is
    /// one more failure, so its waits double like a refusal's, up to the permanent-failure rule.
    @Test func handshakeAndCloseAtOnceBacksOffLikeARefusal() {
        var machine = RelayConnectionMachine(jitterUnit: { 0.5 })
        var now = t0
        _ = machine.start(now: now)
        for k in 1...9 {
            do { let a = machine.opened(now: now); #expect(a == [.connected]) }
            machine.answered()  // even a connection that answered is not stable after 10 ms
            now = now + .milliseconds(10)
            do { let a = machine.ended(.closed, now: now); #expect(a == [.disconnected]) }
            guard case .backingOff(let until) = machine.state else { Issue.record("not backing off after \(k)"); return }
            #expect(until - now == RelayConnectionMachine.backoff(failure: k, jitterUnit: 0.5))
            now = until
            do { let a = machine.tick(now: now); #expect(a == [.connect]) }
        }
        _ = machine.opened(now: now)
        _ = machine.ended(.closed, now: now)
        #expect(machine.state == .permanentlyFailed(retryAt: now + .seconds(600)))
    }

    /// A connection that never answered (a silent relay) is never stable, however long it stays up; the
    /// pool closes it as unanswered (``RelayPoolCore/Liveness``) and the series goes on.
    @Test func anUnansweredConnectionNeverBecomesStable() {
        var machine = RelayConnectionMachine(jitterUnit: { 0 })
        _ = machine.start(now: t0)
        _ = machine.opened(now: t0)
        _ = machine.tick(now: t0 + .seconds(3600))
        #expect(!machine.isStable)
        _ = machine.ended(.unanswered, now: t0 + .seconds(3600))
        #expect(machine.consecutiveFailures == 1)
        _ = machine.tick(now: t0 + .seconds(3601))
        _ = machine.opened(now: t0 + .seconds(3601))
        _ = machine.ended(.misbehaving, now: t0 + .seconds(3602))
        #expect(machine.consecutiveFailures == 2)
    }

    @Test func stopClosesAnOpenConnectionWithoutCountingAFailure() {
        var machine = RelayConnectionMachine(jitterUnit: { 0 })
        _ = machine.start(now: t0)
        _ = machine.opened(now: t0)
        do { let a = machine.stop(); #expect(a == [.close, .disconnected]) }
        #expect(machine.consecutiveFailures == 0)
    }
}
