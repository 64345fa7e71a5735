import HomebaseCore
import HomebaseEngines
import HomebaseNode
import Synchronization
import Testing
@testable import HomebaseService

/// `InferenceStream` alone: what `stop()` reports, that nothing is sent after it, and that it lets go of the
/// engine's handle (which, for a real engine, reaches back to the stream through the HTTP transfer).
@Suite struct InferenceStreamTests {
    final class Tracked: Sendable {}
    final class Counter: Sendable {
        let value = Mutex(0)
        func add() { self.value.withLock { $0 += 1 } }
        var count: Int { self.value.withLock { $0 } }
    }

    func make(_ hub: LoopbackMessengerHub, ends: Counter) -> InferenceStream {
        let host = hub.messenger(for: testKey(1), relation: { _ in .sibling })
        _ = hub.messenger(for: testKey(2), relation: { _ in .sibling })
        return InferenceStream(id: "s1", peer: testKey(2), channel: .sibling, messenger: host,
                               limits: InferenceLimits(coalesceDelayMs: 0), keepAnswer: true, clock: .system,
                               onEnd: { _ in ends.add() }, onRequesterGone: {})
    }

    func types(_ hub: LoopbackMessengerHub) -> [String] { hub.sent.filter { $0.from == testKey(1) }.map(\.type) }

    @Test func stopAfterDoneReportsDoneAndSendsNothingMore() {
        let hub = LoopbackMessengerHub()
        let ends = Counter()
        let stream = self.make(hub, ends: ends)
        stream.events([.text("a"), .finished(.stop, Usage(promptTokens: 1, completionTokens: 1))])
        guard case .done(let answer, let usage)? = stream.stop() else {
            Issue.record("stop() after infer.done must say done")
            return
        }
        #expect(answer == "a" && usage.completionTokens == 1)
        stream.events([.text("late")])
        stream.ended(nil)
        #expect(self.types(hub) == ["infer.chunk", "infer.done"])
        #expect(ends.count == 1)
    }

    @Test func stopOfALiveStreamReportsNothingAndSilencesIt() {
        let hub = LoopbackMessengerHub()
        let ends = Counter()
        let stream = self.make(hub, ends: ends)
        stream.events([.text("a")])
        #expect(stream.stop() == nil ? true : false)
        stream.events([.text("b"), .finished(.stop, nil)])
        stream.ended(ChatEngineError.cancelled)
        #expect(self.types(hub) == ["infer.chunk"])
        #expect(ends.count == 0)  // stopped by the server: the server knows
    }

    /// Records the messages sent.
    final class MessageRecorder: PeerMessenger {
        let publicKey = testKey(1)
        let inbound = InboundMessages.none()
        let events = AsyncStream<MessengerEvent> { _ in }
        var isConnected: Bool { true }
        let sent = Mutex<[Message]>([])
        func send(_ message: Message, to peer: PublicKey, channel: Channel, store: Bool,
                  onReceipt: (@Sendable (SendOutcome) -> Void)?) {
            self.sent.withLock { $0.append(message) }
        }
        var chunks: [InferChunk] {
            self.sent.withLock { $0 }.compactMap { if case .inferChunk(let c) = $0 { c } else { nil } }
        }
    }

    func recorded(_ limits: InferenceLimits = InferenceLimits(coalesceDelayMs: 0)) -> (InferenceStream, MessageRecorder) {
        let messenger = MessageRecorder()
        let stream = InferenceStream(id: "s1", peer: testKey(2), channel: .sibling, messenger: messenger,
                                     limits: limits, keepAnswer: true, clock: .system, onEnd: { _ in },
                                     onRequesterGone: {})
        return (stream, messenger)
    }

    @Test func aReadThatEndsTheAnswerSendsAllItsTextFirst() {
        // The runtime's last read brings its last tokens and the end together: all of them go, joined, before
        // infer.done, whatever their UTF-8 length (an empty piece included).
        let (stream, messenger) = self.recorded()
        stream.events([.text("b"), .text("é"), .text(""), .text("🙂d"), .finished(.stop, nil)])
        #expect(messenger.chunks.map(\.text) == ["bé🙂d"])
        guard case .done(let answer, _)? = stream.stop() else {
            Issue.record("the stream must have ended as done")
            return
        }
        #expect(answer == "bé🙂d")
        let (second, secondMessenger) = self.recorded()
        second.events([.text(""), .text("x"), .text("y")])
        second.events([.text("z"), .finished(.stop, nil)])
        #expect(secondMessenger.chunks.map(\.text) == ["xy", "z"])
        #expect(secondMessenger.sent.withLock { $0 }.last?.type == "infer.done")
    }

    /// Issue 34: reasoning goes in its own chunks (`reasoning`, empty `text`), in order with the answer, never
    /// in the answer's text or the kept answer.
    @Test func reasoningTravelsInItsOwnChunksAndNeverInTheAnswer() {
        let (stream, messenger) = self.recorded()
        stream.events([.reasoning("Two"), .reasoning(" and two")])
        stream.events([.reasoning("."), .text("Four"), .text(".")])
        stream.events([.finished(.stop, Usage(promptTokens: 3, completionTokens: 6))])
        #expect(messenger.chunks == [
            InferChunk(id: "s1", seq: 0, text: "", reasoning: "Two and two"),
            InferChunk(id: "s1", seq: 1, text: "", reasoning: "."),
            InferChunk(id: "s1", seq: 2, text: "Four."),
        ])
        guard case .done(let answer, _)? = stream.stop() else {
            Issue.record("the stream must have ended as done")
            return
        }
        #expect(answer == "Four.")
        #expect(messenger.sent.withLock { $0 }.last == .inferDone(InferDone(
            id: "s1", finishReason: "stop", usage: Usage(promptTokens: 3, completionTokens: 6), chunks: 3)))
    }

    /// Issue 34: a budget spent on reasoning is no empty success: the stream ends without infer.done and
    /// reports it, for the server's `reasoning_budget` error. A length cut after some answer is a plain done.
    @Test func aBudgetSpentReasoningEndsWithoutDone() {
        let (stream, messenger) = self.recorded()
        stream.events([.reasoning("Let me think"), .finished(.length, Usage(promptTokens: 3, completionTokens: 8))])
        guard case .reasoningBudgetSpent(let usage)? = stream.stop() else {
            Issue.record("a budget spent reasoning must be reported")
            return
        }
        #expect(usage.completionTokens == 8)
        #expect(messenger.sent.withLock { $0 }.map(\.type) == ["infer.chunk"])
        let (cut, cutMessenger) = self.recorded()
        cut.events([.reasoning("Hm"), .text("Fo"), .finished(.length, nil)])
        #expect(cutMessenger.sent.withLock { $0 }.last?.type == "infer.done")
    }

    @Test func aChunkCarriesAtMostTheTextLimitAndExactlyItInOne() {
        var limits = InferenceLimits(coalesceDelayMs: 0)
        limits.maxChunkTextBytes = 8
        let (stream, messenger) = self.recorded(limits)
        stream.events([.text("1234"), .text("5678")])  // exactly the limit: one chunk
        stream.events([.text("abcdefgh"), .text("ij")])  // over: cut at the limit
        #expect(messenger.chunks.map(\.text) == ["12345678", "abcdefgh", "ij"])
        #expect(messenger.chunks.map(\.seq) == [0, 1, 2])
    }

    /// Records each send and whether it asked for a RECEIPT; answers `outcome` to those that did.
    final class ReceiptRecorder: PeerMessenger {
        let publicKey = testKey(1)
        let inbound = InboundMessages.none()
        let events = AsyncStream<MessengerEvent> { _ in }
        let connected = Mutex(true)
        var isConnected: Bool { self.connected.withLock { $0 } }
        let log = Mutex<[(type: String, askedReceipt: Bool)]>([])
        let outcome = Mutex(SendOutcome.receipt(.delivered))
        func send(_ message: Message, to peer: PublicKey, channel: Channel, store: Bool,
                  onReceipt: (@Sendable (SendOutcome) -> Void)?) {
            self.log.withLock { $0.append((message.type, onReceipt != nil)) }
            onReceipt?(self.outcome.withLock { $0 })
        }
    }

    @Test func chunksAskForAReceiptAtMostOncePerIntervalFromTheStart() {
        let messenger = ReceiptRecorder()
        let now = Mutex<UInt64>(1_000)
        let gone = Counter()
        var limits = InferenceLimits(coalesceDelayMs: 0)
        limits.chunkReceiptIntervalMs = 500
        func makeStream(_ id: String) -> InferenceStream {
            InferenceStream(
                id: id, peer: testKey(2), channel: .sibling, messenger: messenger, limits: limits, keepAnswer: false,
                clock: ServiceClock(nowMs: { now.withLock { $0 } }, monotonicMs: { now.withLock { $0 } }),
                onEnd: { _ in }, onRequesterGone: { gone.add() })
        }
        let stream = makeStream("r1")  // starts at 1_000
        func read(_ text: String, at ms: UInt64, _ s: InferenceStream? = nil) {
            now.withLock { $0 = ms }
            (s ?? stream).events([.text(text)])
        }
        read("a", at: 1_000)  // the first chunk, at the start: no ask (an answer this short costs no RECEIPT)
        read("b", at: 1_100)
        read("c", at: 1_499)
        read("d", at: 1_500)  // 500 ms after the start
        read("e", at: 1_700)
        messenger.outcome.withLock { $0 = .receipt(.recipientOffline) }
        read("f", at: 1_900)  // not asked: the requester's going is not heard yet
        #expect(gone.count == 0)
        read("g", at: 2_000)  // asked, and the RECEIPT says gone
        #expect(gone.count == 1)
        // With the relay link down every chunk asks, so its failure (not connected) is heard at once.
        messenger.connected.withLock { $0 = false }
        messenger.outcome.withLock { $0 = .notConnected }
        read("h", at: 2_100)
        #expect(gone.count == 2)
        var chunks = messenger.log.withLock { $0 }.filter { $0.type == "infer.chunk" }
        #expect(chunks.map(\.askedReceipt) == [false, false, false, true, false, false, true, true])

        // A slow first chunk (a cold load) asks at once: the requester may have gone while it waited.
        messenger.connected.withLock { $0 = true }
        messenger.outcome.withLock { $0 = .receipt(.delivered) }
        messenger.log.withLock { $0 = [] }
        let slow = makeStream("r2")  // starts at 2_100
        read("x", at: 2_600, slow)
        read("y", at: 2_700, slow)
        chunks = messenger.log.withLock { $0 }.filter { $0.type == "infer.chunk" }
        #expect(chunks.map(\.askedReceipt) == [true, false])
    }

    @Test func theHandleIsLetGoOnStopAndNotKeptWhenAttachedLate() async {
        let hub = LoopbackMessengerHub()
        let ends = Counter()
        let stream = self.make(hub, ends: ends)
        weak var weakTracked: Tracked?
        let cancels = Counter()
        do {
            let tracked = Tracked()
            weakTracked = tracked
            stream.attach(ChatStreamHandle { _ = tracked; cancels.add() })
        }
        #expect(weakTracked != nil)
        stream.stop()
        #expect(cancels.count == 1)
        #expect(weakTracked == nil)
        // Attached after the stream stopped: cancelled at once, not kept.
        do {
            let tracked = Tracked()
            weakTracked = tracked
            stream.attach(ChatStreamHandle { _ = tracked; cancels.add() })
        }
        #expect(cancels.count == 2)
        #expect(weakTracked == nil)
    }

    /// A messenger whose relay link paces (or not), recording chunk texts.
    final class PacedRecorder: PeerMessenger {
        let publicKey = testKey(1)
        let inbound = InboundMessages.none()
        let events = AsyncStream<MessengerEvent> { _ in }
        var isConnected: Bool { true }
        let paced = Mutex(false)
        var isSendPaced: Bool { self.paced.withLock { $0 } }
        let sent = Mutex<[Message]>([])
        func send(_ message: Message, to peer: PublicKey, channel: Channel, store: Bool,
                  onReceipt: (@Sendable (SendOutcome) -> Void)?) {
            self.sent.withLock { $0.append(message) }
        }
        var chunkTexts: [String] {
            self.sent.withLock { $0 }.compactMap { if case .inferChunk(let c) = $0 { c.text } else { nil } }
        }
    }

    @Test func whileTheLinkPacesTextIsMergedIntoLaterChunksAndNothingIsLost() {
        let messenger = PacedRecorder()
        let now = Mutex<UInt64>(1_000)
        var limits = InferenceLimits(coalesceDelayMs: 0)
        limits.maxPacedHoldMs = 2_000
        // A sleep that never returns: only reads and the end move the stream, so the test sees each decision.
        let stream = InferenceStream(
            id: "p1", peer: testKey(2), channel: .sibling, messenger: messenger, limits: limits, keepAnswer: true,
            clock: ServiceClock(nowMs: { now.withLock { $0 } }, monotonicMs: { now.withLock { $0 } },
                                sleep: { _ in try await Task.sleep(for: .seconds(3600)) }),
            onEnd: { _ in }, onRequesterGone: {})
        func read(_ text: String, at ms: UInt64) {
            now.withLock { $0 = ms }
            stream.events([.text(text)])
        }
        read("a", at: 1_000)
        messenger.paced.withLock { $0 = true }
        read("b", at: 1_030)  // held: the link waits for the relay's rate
        read("c", at: 1_060)
        #expect(messenger.chunkTexts == ["a"])
        messenger.paced.withLock { $0 = false }
        read("d", at: 1_090)  // the link caught up: the held text goes with this read's, as one chunk
        #expect(messenger.chunkTexts == ["a", "bcd"])
        // Held no longer than maxPacedHoldMs: then it goes anyway, queued behind the rest, so no stream starves.
        messenger.paced.withLock { $0 = true }
        read("e", at: 1_100)
        read("f", at: 3_099)
        #expect(messenger.chunkTexts == ["a", "bcd"])
        read("g", at: 3_100)
        #expect(messenger.chunkTexts == ["a", "bcd", "efg"])
        // The end sends what is held at once, paced or not, before infer.done; seqs stay contiguous.
        read("h", at: 3_130)
        now.withLock { $0 = 3_160 }
        stream.events([.text("i"), .finished(.stop, nil)])
        #expect(messenger.chunkTexts == ["a", "bcd", "efg", "hi"])
        let kinds = messenger.sent.withLock { $0 }.map(\.type)
        #expect(kinds.last == "infer.done")
        let seqs = messenger.sent.withLock { $0 }.compactMap { if case .inferChunk(let c) = $0 { c.seq } else { nil } }
        #expect(seqs == [0, 1, 2, 3])
        guard case .done(let answer, _)? = stream.stop() else {
            Issue.record("the stream must have ended as done")
            return
        }
        #expect(answer == "abcdefghi")
    }
}
