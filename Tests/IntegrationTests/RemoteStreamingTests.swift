import Foundation
import HomebaseCore
import HomebaseRouter
import Testing

/// Issue 3's "done when": a handset paired with a Homebase through a real relay receives a streamed completion
/// from the emulator, chunk by chunk, with exactly the text the emulator generates for that prompt.
@Suite("Remote streaming through the relay", .serialized, .timeLimit(.minutes(1)))
struct RemoteStreamingTests {
    @Test("a paired handset streams the emulator's completion incrementally")
    func streamsEmulatorCompletion() async throws {
        // 100 tokens/s: 12-48 tokens take 120-480 ms, long enough for the coalescer to send several chunks.
        try await IntegrationSystem.with(tokensPerSecond: 100) { system in
            let prompt = "Tell me about rivers and stones"
            let (events, answer, times) = await system.handset.chat(prompt)

            #expect(answer.result.providerKind == .sibling)
            #expect(answer.result.fallback == nil)
            #expect(answer.resolution.route == .external)
            #expect(answer.result.model == "qwen2.5:7b")
            let expected = IntegrationOllama.expectedText(prompt)
            #expect(answer.result.text == expected)
            let pieces = events.textBeforeRestart
            #expect(events.restartReasons.isEmpty)
            #expect(pieces.joined() == expected)
            // Incremental: more than one chunk, spread over time (not one buffered blob at the end).
            #expect(pieces.count > 1, "chunks: \(pieces.count)")
            let textTimes = zip(events, times).compactMap { event, t -> UInt64? in
                if case .text = event { t } else { nil }
            }
            if let first = textTimes.first, let last = textTimes.last {
                #expect(last - first >= 50, "all chunks arrived within \(last - first) ms")
            }
        }
    }
}
