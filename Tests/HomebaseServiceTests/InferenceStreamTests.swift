import HomebaseCore
import HomebaseNode
import HomebaseRouter
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
        return InferenceStream(id: "s1", peer: testKey(2), channel: .syncDelta, messenger: host,
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
}
