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

    @Test func successResetsTheSeriesAndLossReportsDisconnect() {
        var machine = RelayConnectionMachine(jitterUnit: { 0 })
        _ = machine.start(now: t0)
        _ = machine.ended(.connect, now: t0)
        _ = machine.tick(now: t0 + .seconds(1))
        do { let a = machine.opened(now: t0 + .seconds(2)); #expect(a == [.connected]) }
        #expect(machine.consecutiveFailures == 0)
        do { let a = machine.ended(.closed, now: t0 + .seconds(3)); #expect(a == [.disconnected]) }
        #expect(machine.consecutiveFailures == 1)
        #expect(machine.state == .backingOff(until: t0 + .seconds(3) + .milliseconds(800)))
        // Events for a state that does not expect them change nothing.
        do { let a = machine.opened(now: t0 + .seconds(3)); #expect(a == []) }
        do { let a = machine.stop(); #expect(a == []) }
        #expect(machine.state == .stopped)
    }
}
