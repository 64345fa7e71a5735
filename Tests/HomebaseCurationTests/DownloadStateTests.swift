import Testing
@testable import HomebaseCuration

@Suite struct DownloadStateTests {
    let id = "mlx-community/Qwen2.5-1.5B-Instruct-4bit"

    func started(_ m: inout DownloadStateMachine) throws -> Int {
        guard case .begin(let attempt) = m.start(self.id) else { throw Failure("did not start") }
        return attempt
    }

    struct Failure: Error { let why: String; init(_ why: String) { self.why = why } }

    @Test func theHappyPathAndStateSeeding() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [])
        #expect(m.state(self.id) == .absent)
        let a = try self.started(&m)
        do { let r = m.progress(self.id, attempt: a, fraction: 0.5); #expect(r) }
        #expect(m.state(self.id) == .downloading(0.5))
        do { let r = m.completed(self.id, attempt: a); #expect(r) }
        #expect(m.state(self.id) == .ready)
        #expect(m.readyIDs == [self.id])
        // Seeded from the persisted markers at the next launch.
        #expect(DownloadStateMachine(isCapable: true, readyIDs: m.readyIDs).state(self.id) == .ready)
    }

    @Test func aLateProgressTickNeverStompsReady() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [])
        let a = try self.started(&m)
        do { let r = m.completed(self.id, attempt: a); #expect(r) }
        do { let r = m.progress(self.id, attempt: a, fraction: 1.0); #expect(!r) }
        #expect(m.state(self.id) == .ready)
    }

    @Test func cancelWinsOverCompletionAndError() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [])
        let a = try self.started(&m)
        do { let r = m.cancel(self.id); #expect(r) }
        #expect(m.state(self.id) == .absent)
        do { let r = m.completed(self.id, attempt: a); #expect(!r) }
        do { let r = m.failed(self.id, attempt: a, message: "connection reset"); #expect(!r) }
        do { let r = m.progress(self.id, attempt: a, fraction: 0.9); #expect(!r) }
        #expect(m.state(self.id) == .absent)
        #expect(m.readyIDs.isEmpty)
        // A new attempt's events are not confused with the cancelled one's.
        let b = try self.started(&m)
        #expect(b != a)
        do { let r = m.completed(self.id, attempt: a); #expect(!r) }
        #expect(m.state(self.id) == .downloading(0))
        do { let r = m.completed(self.id, attempt: b); #expect(r) }
    }

    @Test func failureAndRetry() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [])
        let a = try self.started(&m)
        do { let r = m.failed(self.id, attempt: a, message: "sha256 mismatch"); #expect(r) }
        #expect(m.state(self.id) == .failed("sha256 mismatch"))
        do { let r = m.cancel(self.id); #expect(!r) }
        _ = try self.started(&m)
        #expect(m.state(self.id) == .downloading(0))
    }

    @Test func startRefusals() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [self.id])
        do { let r = m.start(self.id); #expect(r == .alreadyReady) }
        m.delete(self.id)
        #expect(m.state(self.id) == .absent)
        _ = try self.started(&m)
        do { let r = m.start(self.id); #expect(r == .alreadyDownloading) }
        var incapable = DownloadStateMachine(isCapable: false, readyIDs: [self.id])
        #expect(incapable.state(self.id) == .unsupported)
        do { let r = incapable.start(self.id); #expect(r == .unsupported) }
    }

    @Test func progressIsClamped() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [])
        let a = try self.started(&m)
        m.progress(self.id, attempt: a, fraction: 7)
        #expect(m.state(self.id) == .downloading(1))
        m.progress(self.id, attempt: a, fraction: -.infinity)
        #expect(m.state(self.id) == .downloading(0))
        m.progress(self.id, attempt: a, fraction: .nan)
        #expect(m.state(self.id) == .downloading(0))
    }

    @Test func deleteDuringADownloadRetiresIt() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [])
        let a = try self.started(&m)
        m.delete(self.id)
        do { let r = m.completed(self.id, attempt: a); #expect(!r) }
        #expect(m.state(self.id) == .absent)
    }
}

@Suite struct DownloadProgressTests {
    @Test func rateAndETAOverTheWindow() {
        var p = DownloadProgress(totalBytes: 10_000_000, nowMs: 0)
        #expect(p.etaSeconds == nil)
        p.record(doneBytes: 1_000_000, nowMs: 1000)
        #expect(p.bytesPerSecond == 1_000_000)
        #expect(p.etaSeconds == 9)
        #expect(p.fraction == 0.1)
        // A stall shows as a falling rate once the window moves past the burst.
        p.record(doneBytes: 1_000_000, nowMs: 5000)
        p.record(doneBytes: 1_000_000, nowMs: 9000)
        #expect(p.bytesPerSecond == 0)
        #expect(p.bar(width: 10).hasPrefix("[#---------]  10%"))
    }

    @Test func aResumedDownloadStartsPartWay() {
        let p = DownloadProgress(totalBytes: 100, resumedBytes: 40, nowMs: 5)
        #expect(p.fraction == 0.4)
    }
}
