import Testing
@testable import HomebaseCore

@Suite struct InferenceClientStateMachineTests {
    let t0: UInt64 = 1_000_000
    let usage = Usage(promptTokens: 3, completionTokens: 4)

    func accepted() -> InferenceClientStateMachine {
        var m = InferenceClientStateMachine(sentAtMs: t0)
        _ = m.acceptReceived(model: "m", nowMs: t0 + 100)
        return m
    }

    @Test func happyPath() {
        var m = InferenceClientStateMachine(sentAtMs: t0)
        var a = m.acceptReceived(model: "qwen", nowMs: t0 + 5)
        #expect(a == .accepted(model: "qwen"))
        a = m.chunkReceived(seq: 0, text: "Hel", nowMs: t0 + 10)
        #expect(a == .text("Hel"))
        a = m.chunkReceived(seq: 1, text: "lo", nowMs: t0 + 20)
        #expect(a == .text("lo"))
        a = m.doneReceived(finishReason: "stop", usage: usage, chunks: 2)
        #expect(a == .finished(finishReason: "stop", usage: usage))
        a = m.chunkReceived(seq: 2, text: "late", nowMs: t0 + 30)
        #expect(a == .none)
        #expect(m.nextDeadlineMs == nil)
    }

    /// Issue 34: an advancing queue (`infer.queued`) is progress: each advance restarts the first-output
    /// watchdog; a repeated or worse position, one out of range, or a report before the accept does not.
    @Test func anAdvancingQueueRestartsTheFirstOutputWatchdog() {
        var m = InferenceClientStateMachine(sentAtMs: t0)
        #expect(m.queuedReceived(position: 2, nowMs: t0 + 1) == .none)  // before the accept
        _ = m.acceptReceived(model: "m", nowMs: t0 + 100)
        let first = t0 + 100 + m.watchdogs.firstOutputMs
        #expect(m.nextDeadlineMs == first)
        #expect(m.queuedReceived(position: 3, nowMs: t0 + 200) == .queued(position: 3))
        #expect(m.nextDeadlineMs == t0 + 200 + m.watchdogs.firstOutputMs)
        // The same position again, or a worse one, is no progress.
        #expect(m.queuedReceived(position: 3, nowMs: t0 + 80_000) == .none)
        #expect(m.queuedReceived(position: 4, nowMs: t0 + 80_000) == .none)
        #expect(m.queuedReceived(position: 0, nowMs: t0 + 80_000) == .none)
        #expect(m.queuedReceived(position: InferenceClientStateMachine.maxQueuePosition + 1, nowMs: t0 + 80_000) == .none)
        #expect(m.nextDeadlineMs == t0 + 200 + m.watchdogs.firstOutputMs)
        // Two advances 80 s apart: the 90 s watchdog never fires though 170 s pass before the first chunk.
        #expect(m.queuedReceived(position: 2, nowMs: t0 + 80_200) == .queued(position: 2))
        #expect(m.timerFired(nowMs: t0 + 160_000) == .none)
        #expect(m.queuedReceived(position: 1, nowMs: t0 + 160_200) == .queued(position: 1))
        #expect(m.timerFired(nowMs: t0 + 240_000) == .none)
        #expect(m.chunkReceived(seq: 0, text: "hi", nowMs: t0 + 240_100) == .text("hi"))
        // After output began, queue reports change nothing.
        #expect(m.queuedReceived(position: 1, nowMs: t0 + 240_200) == .none)
    }

    @Test func queueAdvancesNeverStretchTheWaitPastTheCap() {
        var m = InferenceClientStateMachine(
            sentAtMs: t0, watchdogs: .init(acceptMs: 10_000, firstOutputMs: 90_000, stallMs: 30_000, maxQueueWaitMs: 150_000))
        _ = m.acceptReceived(model: "m", nowMs: t0)
        _ = m.queuedReceived(position: 1000, nowMs: t0 + 80_000)
        _ = m.queuedReceived(position: 999, nowMs: t0 + 140_000)
        #expect(m.nextDeadlineMs == t0 + 150_000)  // 80 s + 90 s and 140 s + 90 s are both past the 150 s cap
        #expect(m.timerFired(nowMs: t0 + 150_000) == .fail(.firstOutputTimeout, sendCancel: true))
    }

    /// Reasoning is output: it satisfies the first-output watchdog and is passed on apart from the text.
    @Test func reasoningCountsAsOutputAndIsPassedApart() {
        var m = self.accepted()
        #expect(m.chunkReceived(seq: 0, text: "", reasoning: "Let me think", nowMs: t0 + 200)
            == .reasoning("Let me think", text: ""))
        #expect(m.nextDeadlineMs == t0 + 200 + m.watchdogs.stallMs)
        #expect(m.chunkReceived(seq: 1, text: "Yes.", reasoning: nil, nowMs: t0 + 300) == .text("Yes."))
        #expect(m.chunkReceived(seq: 2, text: "", reasoning: "", nowMs: t0 + 400) == .text(""))
    }

    @Test func acceptWatchdogBoundary() {
        var m = InferenceClientStateMachine(sentAtMs: t0)
        var a = m.timerFired(nowMs: t0 + 9_999)
        #expect(a == .none)
        a = m.timerFired(nowMs: t0 + 10_000)
        #expect(a == .fail(.acceptTimeout, sendCancel: true))
        a = m.acceptReceived(model: "m", nowMs: t0 + 10_001)
        #expect(a == .none)
    }

    @Test func firstOutputWatchdogBoundary() {
        var m = accepted()
        #expect(m.nextDeadlineMs == t0 + 100 + 90_000)
        var a = m.timerFired(nowMs: t0 + 100 + 89_999)
        #expect(a == .none)
        a = m.timerFired(nowMs: t0 + 100 + 90_000)
        #expect(a == .fail(.firstOutputTimeout, sendCancel: true))
    }

    @Test func stallWatchdogBoundary() {
        var m = accepted()
        _ = m.chunkReceived(seq: 0, text: "a", nowMs: t0 + 1_000)
        var a = m.timerFired(nowMs: t0 + 1_000 + 29_999)
        #expect(a == .none)
        _ = m.chunkReceived(seq: 1, text: "b", nowMs: t0 + 1_000 + 29_999)
        a = m.timerFired(nowMs: t0 + 1_000 + 59_997)
        #expect(a == .none)
        a = m.timerFired(nowMs: t0 + 1_000 + 59_999)
        #expect(a == .fail(.stall, sendCancel: true))
        #expect(m.state == .failed(.stall))
    }

    @Test func doneWithoutChunksCountsAsFirstOutput() {
        var m = accepted()
        let a = m.doneReceived(finishReason: "length", usage: usage, chunks: 0)
        #expect(a == .finished(finishReason: "length", usage: usage))
    }

    @Test(arguments: [ReceiptStatus.recipientOffline, .mailboxFull, .payloadTooLarge, .rateLimited, .badFlags, .unknown(77)])
    func failingReceiptsFallBackAtOnce(status: ReceiptStatus) {
        var m = InferenceClientStateMachine(sentAtMs: t0)
        let a = m.receiptReceived(status)
        guard case .fail(let reason, true) = a else { Issue.record("\(a)"); return }
        #expect((status == .recipientOffline) == (reason == .offline))
        #expect(reason.label != "")
    }

    @Test func goodReceiptsChangeNothing() {
        var m = InferenceClientStateMachine(sentAtMs: t0)
        var a = m.receiptReceived(.delivered)
        #expect(a == .none)
        a = m.receiptReceived(.stored)
        #expect(a == .none)
        #expect(m.nextDeadlineMs == t0 + 10_000)
    }

    @Test func seqGapFails() {
        var m = accepted()
        _ = m.chunkReceived(seq: 0, text: "a", nowMs: t0)
        let a = m.chunkReceived(seq: 2, text: "c", nowMs: t0)
        #expect(a == .fail(.seqGap(expected: 1, got: 2), sendCancel: true))
    }

    @Test func duplicateSeqFails() {
        var m = accepted()
        _ = m.chunkReceived(seq: 0, text: "a", nowMs: t0)
        let a = m.chunkReceived(seq: 0, text: "a", nowMs: t0)
        #expect(a == .fail(.seqGap(expected: 1, got: 0), sendCancel: true))
    }

    @Test func chunkBeforeAcceptFails() {
        var m = InferenceClientStateMachine(sentAtMs: t0)
        guard case .fail(.seqGap, true) = m.chunkReceived(seq: 0, text: "a", nowMs: t0) else { Issue.record(); return }
    }

    @Test func countMismatchAtDoneFails() {
        var m = accepted()
        _ = m.chunkReceived(seq: 0, text: "a", nowMs: t0)
        let a = m.doneReceived(finishReason: "stop", usage: usage, chunks: 3)
        #expect(a == .fail(.countMismatch(expected: 3, got: 1), sendCancel: true))
    }

    @Test func errorFailsWithoutCancel() {
        var m = accepted()
        let a = m.errorReceived(code: "cache_miss", message: "x")
        #expect(a == .fail(.error(code: "cache_miss", message: "x"), sendCancel: false))
        #expect(FailureLabel.of(a) == "error:cache_miss")
    }

    @Test func relayLossFails() {
        var m = accepted()
        var a = m.relayLost()
        #expect(a == .fail(.relayGone, sendCancel: true))
        a = m.relayLost()
        #expect(a == .none)
    }

    @Test func shortenedLadderForIntegrationTests() {
        var m = InferenceClientStateMachine(sentAtMs: 0, watchdogs: .init(acceptMs: 50, firstOutputMs: 100, stallMs: 30))
        #expect(m.nextDeadlineMs == 50)
        _ = m.acceptReceived(model: "m", nowMs: 10)
        #expect(m.nextDeadlineMs == 110)
    }
}

enum FailureLabel {
    static func of(_ a: InferenceClientStateMachine.Action) -> String? {
        if case .fail(let r, _) = a { return r.label }
        return nil
    }
}

@Suite struct ChunkCoalescerTests {
    @Test func firstTextGoesAtOnce() {
        var c = ChunkCoalescer(maxDelayMs: 30, maxBytes: 100)
        let d = c.textArrived("Hi", nowMs: 0)
        #expect(d == .emit("Hi"))
    }

    @Test func laterTextIsHeldThenFlushed() {
        var c = ChunkCoalescer(maxDelayMs: 30, maxBytes: 100)
        _ = c.textArrived("a", nowMs: 0)
        var d = c.textArrived("b", nowMs: 5)
        #expect(d == .holdUntil(30))
        d = c.textArrived("c", nowMs: 10)
        #expect(d == .holdUntil(30))
        d = c.flushDue(nowMs: 29)
        #expect(d == .holdUntil(30))
        d = c.flushDue(nowMs: 30)
        #expect(d == .emit("bc"))
        d = c.flushDue(nowMs: 100)
        #expect(d == .none)
    }

    @Test func sizeForcesAnEmit() {
        var c = ChunkCoalescer(maxDelayMs: 1000, maxBytes: 4)
        _ = c.textArrived("x", nowMs: 0)
        var d = c.textArrived("ab", nowMs: 1)
        #expect(d == .holdUntil(1000))
        d = c.textArrived("cd", nowMs: 2)
        #expect(d == .emit("abcd"))
    }

    @Test func slowTokensAreNotDelayed() {
        var c = ChunkCoalescer(maxDelayMs: 30, maxBytes: 100)
        _ = c.textArrived("a", nowMs: 0)
        let d = c.textArrived("b", nowMs: 50)
        #expect(d == .emit("b"))
    }

    @Test func textDueWithinTheToleranceGoesAtOnce() {
        var c = ChunkCoalescer(maxDelayMs: 30, maxBytes: 100, toleranceMs: 10)
        _ = c.textArrived("a", nowMs: 100)
        // 19 ms after the last chunk: due in 11 ms, over the tolerance, so held.
        #expect(c.textArrived("b", nowMs: 119) == .holdUntil(130))
        // 20 ms after: due within 10 ms, so it goes now, with what was held.
        #expect(c.textArrived("c", nowMs: 120) == .emit("bc"))
        // The next one counts from this chunk.
        #expect(c.textArrived("d", nowMs: 139) == .holdUntil(150))
        #expect(c.textArrived("e", nowMs: 140) == .emit("de"))
    }

    @Test func bigTextIsCutIntoBoundedPiecesOnScalarBoundaries() {
        let text = String(repeating: "ab中😀", count: 500)  // 9 bytes per repeat, 4,500 in all
        let pieces = ChunkCoalescer.pieces(of: text, maxBytes: 1024)
        #expect(pieces.joined() == text)
        #expect(pieces.allSatisfy { $0.utf8.count <= 1024 && !$0.isEmpty })
        #expect(pieces.count == 5)
        #expect(ChunkCoalescer.pieces(of: "short", maxBytes: 1024) == ["short"])
        #expect(ChunkCoalescer.pieces(of: "😀😀", maxBytes: 4) == ["😀", "😀"])
    }

    @Test func toleranceIsAtMostTheDelay() {
        let c = ChunkCoalescer(maxDelayMs: 30, maxBytes: 100, toleranceMs: 500)
        #expect(c.toleranceMs == 30)
    }

    @Test func finishFlushesTheRest() {
        var c = ChunkCoalescer()
        _ = c.textArrived("a", nowMs: 0)
        _ = c.textArrived("b", nowMs: 1)
        var d = c.finish(nowMs: 2)
        #expect(d == .emit("b"))
        d = c.finish(nowMs: 3)
        #expect(d == .none)
    }
}
