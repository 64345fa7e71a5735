import Foundation
import Testing
@testable import HomebaseCuration

@Suite struct DownloadStateTests {
    let id = "mlx-community/Qwen2.5-1.5B-Instruct-4bit"
    typealias Action = DownloadStateMachine.Action

    func started(_ m: inout DownloadStateMachine) throws -> Int {
        guard case (.begin(let attempt), _) = m.start(self.id) else { throw Failure("did not start") }
        return attempt
    }

    struct Failure: Error { let why: String; init(_ why: String) { self.why = why } }

    /// The machine of another process over the same state database: it sees this one's record as stored.
    func otherProcess(_ m: DownloadStateMachine, record: DownloadRecord?, alive: Bool = true) -> DownloadStateMachine {
        var other = DownloadStateMachine(isCapable: true, readyIDs: m.readyIDs, pid: 200)
        other.observed(self.id, record: record, ownerAlive: alive)
        return other
    }

    @Test func theHappyPathAndItsActions() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [], pid: 100)
        #expect(m.state(self.id) == .absent)
        let (outcome, actions) = m.start(self.id)
        guard case .begin(let a) = outcome else { throw Failure("did not start") }
        #expect(actions == [.persistRecord(self.id, DownloadRecord(pid: 100, attempt: a))])
        #expect(m.isCurrent(self.id, attempt: a))
        do {
            let (applied, persist) = m.progress(self.id, attempt: a, fraction: 0.5, nowMs: 1000)
            #expect(applied)
            #expect(persist == [.persistRecord(self.id, DownloadRecord(pid: 100, attempt: a, fraction: 0.5))])
        }
        #expect(m.state(self.id) == .downloading(0.5))
        // Progress is written at most every 500 ms; the state here moves on every tick.
        do { let (applied, persist) = m.progress(self.id, attempt: a, fraction: 0.6, nowMs: 1400); #expect(applied && persist.isEmpty) }
        do { let (_, persist) = m.progress(self.id, attempt: a, fraction: 0.7, nowMs: 1500); #expect(persist.count == 1) }
        #expect(m.state(self.id) == .downloading(0.7))
        let (end, done) = m.finished(self.id, attempt: a, .loaded)
        #expect(end == .ready)
        #expect(done == [.persistReady(self.id), .removeRecord(self.id)])
        #expect(m.readyIDs == [self.id])
        // Seeded from the persisted markers at the next launch.
        #expect(DownloadStateMachine(isCapable: true, readyIDs: m.readyIDs).state(self.id) == .ready)
    }

    @Test func theRecordIsWhatOtherProcessesSee() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [], pid: 100)
        let a = try self.started(&m)
        let record = DownloadRecord(pid: 100, attempt: a, fraction: 0.25)
        #expect(self.otherProcess(m, record: record).state(self.id) == .downloading(0.25))
        // Its owner died: absent (the partial files stay for a resume), and a start may take it over.
        var orphan = self.otherProcess(m, record: record, alive: false)
        #expect(orphan.state(self.id) == .absent)
        guard case (.begin, let actions) = orphan.start(self.id) else { throw Failure("an orphan blocked a start") }
        #expect(actions.count == 1)
        // A cancel asked: absent at once, even while the owner is still stopping.
        var cancelled = record
        cancelled.cancel = true
        #expect(self.otherProcess(m, record: cancelled).state(self.id) == .absent)
        #expect(self.otherProcess(m, record: .failed("sha256 mismatch")).state(self.id) == .failed("sha256 mismatch"))
        // Our own record keeps the progress this process knows; the stored copy lags.
        m.progress(self.id, attempt: a, fraction: 0.5, nowMs: 0)
        m.observed(self.id, record: DownloadRecord(pid: 100, attempt: a, fraction: 0.1), ownerAlive: false)
        #expect(m.state(self.id) == .downloading(0.5))
        #expect(m.isCurrent(self.id, attempt: a))
    }

    @Test func aRefusedStartWritesNothing() throws {
        // Two processes start at once; the second's transaction observes the first's record.
        var first = DownloadStateMachine(isCapable: true, readyIDs: [], pid: 100)
        let a = try self.started(&first)
        var second = self.otherProcess(first, record: DownloadRecord(pid: 100, attempt: a))
        let (outcome, actions) = second.start(self.id)
        #expect(outcome == .alreadyDownloading)
        #expect(actions.isEmpty)
        // Nothing the refused process does later touches the winner's record either.
        #expect(second.finished(self.id, attempt: 1, .failed("another download holds the lock")).1.isEmpty)
        #expect(second.state(self.id) == .downloading(0))
        #expect(second.cancel(self.id) == (.requested, [.persistRecord(self.id, DownloadRecord(pid: 100, attempt: a, cancel: true))]))
    }

    @Test func cancelWinsOverCompletionAndError() throws {
        for ending in [DownloadStateMachine.Ending.loaded, .failed("connection reset"), .cancelled] {
            var m = DownloadStateMachine(isCapable: true, readyIDs: [], pid: 100)
            let a = try self.started(&m)
            let (outcome, actions) = m.cancel(self.id)
            #expect(outcome == .requested)
            #expect(actions == [.persistRecord(self.id, DownloadRecord(pid: 100, attempt: a, cancel: true))])
            #expect(m.state(self.id) == .absent)
            #expect(!m.isCurrent(self.id, attempt: a))
            #expect(m.progress(self.id, attempt: a, fraction: 0.9, nowMs: 0) == (false, []))
            let (end, done) = m.finished(self.id, attempt: a, ending)
            #expect(end == .absent)
            #expect(done == [.removeRecord(self.id), .removePartials(self.id)])
            #expect(m.readyIDs.isEmpty)
            // A new attempt's events are not confused with the cancelled one's.
            let b = try self.started(&m)
            #expect(b != a)
            #expect(m.finished(self.id, attempt: a, .loaded).1 == [])
            #expect(m.state(self.id) == .downloading(0))
            #expect(m.finished(self.id, attempt: b, .loaded).0 == .ready)
        }
    }

    @Test func aCancelFromAnotherProcessIsSeenAtTheNextObservation() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [], pid: 100)
        let a = try self.started(&m)
        var other = self.otherProcess(m, record: DownloadRecord(pid: 100, attempt: a, fraction: 0.3))
        let (outcome, actions) = other.cancel(self.id)
        #expect(outcome == .requested)
        guard case .persistRecord(_, let flagged) = actions.first else { throw Failure("no cancel flag written") }
        m.observed(self.id, record: flagged, ownerAlive: true)
        #expect(!m.isCurrent(self.id, attempt: a))
        #expect(m.finished(self.id, attempt: a, .loaded) == (.absent, [.removeRecord(self.id), .removePartials(self.id)]))
        // A second cancel, or one of nothing, is not a download.
        #expect(other.cancel(self.id).0 == .notDownloading)
        var none = DownloadStateMachine(isCapable: true, readyIDs: [])
        #expect(none.cancel(self.id) == (.notDownloading, []))
    }

    @Test func aDeadOwnersDownloadIsCleanedUpByCancel() {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [], pid: 100)
        m.observed(self.id, record: DownloadRecord(pid: 4242, attempt: 3, fraction: 0.4), ownerAlive: false)
        #expect(m.cancel(self.id) == (.cleanedUp, [.removePartials(self.id), .removeRecord(self.id)]))
        #expect(m.state(self.id) == .absent)
    }

    @Test func deleteDuringADownloadInAnotherProcessEndsAbsentNeverFailed() throws {
        var owner = DownloadStateMachine(isCapable: true, readyIDs: [], pid: 100)
        let a = try self.started(&owner)
        var deleter = self.otherProcess(owner, record: DownloadRecord(pid: 100, attempt: a, fraction: 0.5))
        #expect(deleter.delete(self.id) == [.removeRecord(self.id), .removeReady(self.id), .removeFiles(self.id)])
        #expect(deleter.state(self.id) == .absent)
        // The owner's next poll finds no record: stop. Its transfer then fails on the removed files, and that
        // failure must not be recorded.
        owner.observed(self.id, record: nil, ownerAlive: false)
        #expect(!owner.isCurrent(self.id, attempt: a))
        let (end, actions) = owner.finished(self.id, attempt: a, .failed("got -1 bytes; the file was deleted"))
        #expect(end == .absent)
        #expect(actions == [.removePartials(self.id)])
        #expect(owner.state(self.id) == .absent)
    }

    @Test func aSupersededAttemptLeavesTheNewOnesFilesAlone() throws {
        var old = DownloadStateMachine(isCapable: true, readyIDs: [], pid: 100)
        let a = try self.started(&old)
        // Deleted, then started again by process 200, before the old attempt noticed.
        old.observed(self.id, record: DownloadRecord(pid: 200, attempt: 1, fraction: 0.1), ownerAlive: true)
        #expect(!old.isCurrent(self.id, attempt: a))
        #expect(old.finished(self.id, attempt: a, .failed("locked")) == (.downloading(0.1), []))
    }

    @Test func failureAndRetry() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [], pid: 100)
        let a = try self.started(&m)
        let (end, actions) = m.finished(self.id, attempt: a, .failed("sha256 mismatch"))
        #expect(end == .failed("sha256 mismatch"))
        #expect(actions == [.persistRecord(self.id, .failed("sha256 mismatch"))])
        #expect(m.cancel(self.id).0 == .notDownloading)
        _ = try self.started(&m)
        #expect(m.state(self.id) == .downloading(0))
    }

    @Test func startRefusals() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [self.id])
        #expect(m.start(self.id) == (.alreadyReady, []))
        _ = m.delete(self.id)
        #expect(m.state(self.id) == .absent)
        _ = try self.started(&m)
        #expect(m.start(self.id) == (.alreadyDownloading, []))
        var incapable = DownloadStateMachine(isCapable: false, readyIDs: [self.id])
        #expect(incapable.state(self.id) == .unsupported)
        #expect(incapable.start(self.id) == (.unsupported, []))
    }

    @Test func progressIsClamped() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [])
        let a = try self.started(&m)
        m.progress(self.id, attempt: a, fraction: 7, nowMs: 0)
        #expect(m.state(self.id) == .downloading(1))
        m.progress(self.id, attempt: a, fraction: -.infinity, nowMs: 0)
        #expect(m.state(self.id) == .downloading(0))
        m.progress(self.id, attempt: a, fraction: .nan, nowMs: 0)
        #expect(m.state(self.id) == .downloading(0))
    }

    @Test func aLateProgressTickNeverStompsReady() throws {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [])
        let a = try self.started(&m)
        _ = m.finished(self.id, attempt: a, .loaded)
        #expect(m.progress(self.id, attempt: a, fraction: 1.0, nowMs: 0) == (false, []))
        #expect(m.state(self.id) == .ready)
    }

    @Test func aHostileRecordReadsAsSomethingSane() {
        var m = DownloadStateMachine(isCapable: true, readyIDs: [], pid: 100)
        for (fraction, shown) in [(7.0, 1.0), (-3.0, 0.0), (Double.nan, 0.0), (Double.infinity, 1.0)] {
            m.observed(self.id, record: DownloadRecord(pid: 5, attempt: 1, fraction: fraction), ownerAlive: true)
            #expect(m.state(self.id) == .downloading(shown))
        }
        // A record naming this process but no attempt of it is not ours: it never makes an attempt current.
        m.observed(self.id, record: DownloadRecord(pid: 100, attempt: 0), ownerAlive: true)
        #expect(!m.isCurrent(self.id, attempt: 0))
    }

    @Test func recordsWrittenBeforeAttemptsDecode() throws {
        let old = #"{"cancel":false,"fraction":0.5,"pid":77}"#
        let record = try JSONDecoder().decode(DownloadRecord.self, from: Data(old.utf8))
        #expect(record == DownloadRecord(pid: 77, attempt: 0, fraction: 0.5))
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
