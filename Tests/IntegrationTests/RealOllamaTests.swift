import Foundation
import HomebaseCore
import HomebaseEngines
import HomebaseNode
import HomebaseDevice
import HomebaseRouter
import HomebaseService
import HomebaseTransport
import OllamaEmulatorKit
import Testing

/// Issue 34's "done when", against the emulator behaving as real Ollama does: cloud stubs, thinking models and
/// one request at a time.
@Suite("Ollama as it really is", .serialized, .timeLimit(.minutes(2)))
struct RealOllamaTests {
    /// A cloud stub (offline: its forwarded requests fail 502) beside a local model: the runtime verifies, the
    /// local model is advertised, the stub is listed as cloud and not shared.
    @Test("a cloud stub beside a local model, offline: verified, local model advertised, stub not shared")
    func cloudStubOffline() async throws {
        try await IntegrationSystem.with(ollama: { c in
            c.models = ["gpt-oss:120b-cloud", "qwen2.5:7b"]
            c.cloud = .offline
        }) { system in
            let status = try #require(system.homebase.daemonStatus)
            #expect(status.runtimeVerified && status.runtimeAvailable)
            #expect(status.models.map(\.tag) == ["gpt-oss:120b-cloud", "qwen2.5:7b"])
            #expect(status.models.map(\.cloud) == [true, false])
            let advert = try #require(system.handset.session.adverts.freshAdvert(nowMs: Posix.wallClockMs))
            #expect(advert.models.map(\.tag) == ["qwen2.5:7b"])
            let answer = await system.handset.chat("Hello there").answer
            #expect(answer.result.providerKind == .sibling && answer.result.fallback == nil)
        }
    }

    /// A thinking model whose reasoning outlasts the requester's first-output watchdog is answered remotely,
    /// the reasoning shown apart from the answer, on the handset and on a guest.
    @Test("a long think is answered remotely, reasoning apart, on the handset and a guest")
    func thinkingModel() async throws {
        var watchdogs = InferenceClientStateMachine.Watchdogs()
        watchdogs.firstOutputMs = 1_000
        // 40 reasoning tokens at 25 tokens/s: 1.6 s of thinking before the answer's first token.
        try await IntegrationSystem.with(watchdogs: watchdogs, tokensPerSecond: 25, ollama: { c in
            c.models = ["qwen3:8b", "qwen2.5:7b"]
            c.reasoningTokens = 40
        }, model: "qwen3:8b") { system in
            let prompt = "Why is the sky blue"
            let reasoning = TextGenerator(prompt: "think:" + prompt, minTokens: 40, maxTokens: 40).tokens.joined()
            let (events, answer, _) = await system.handset.chat(prompt)
            #expect(answer.result.providerKind == .sibling)
            #expect(answer.result.fallback == nil)
            #expect(answer.result.reasoning == reasoning)
            #expect(answer.result.text == IntegrationOllama.expectedText(prompt))
            #expect(!answer.result.text.contains(reasoning.prefix(20)))
            let streamed = events.compactMap { if case .reasoning(let r) = $0 { r } else { nil } }
            #expect(streamed.count > 1 && streamed.joined() == reasoning)
            #expect((answer.json["reasoning"] as? String) == reasoning)
            // think: false reaches the runtime (reasoning_effort none): no reasoning, the same answer.
            let quiet = await system.handset.session.chat(
                ChatRequest(messages: [.user(prompt)], options: ChatOptions(think: .off)))
            #expect(quiet.result.fallback == nil && quiet.result.reasoning == nil)
            #expect(quiet.result.text == IntegrationOllama.expectedText(prompt))
            // A budget spent reasoning (3 tokens of a 40-token think) is a named failure, not an empty answer.
            let starved = await system.handset.session.chat(
                ChatRequest(messages: [.user(prompt)], options: ChatOptions(maxTokens: 3)))
            #expect(starved.result.fallback?.reason.rawValue == "error:reasoning_budget")

            // The same through a friend's device (contact channel).
            let dir = StateDirectory(explicit: temporaryDirectory("guest"), tool: "guest")
            _ = try DeviceSession.initialize(directory: dir, relayURL: system.relay.url, name: "integ-guest")
            var options = DeviceSession.Options()
            options.watchdogs = watchdogs
            let guest = try DeviceSession(directory: dir, tool: "guest", http: .unavailable, options: options)
            defer { guest.stop() }
            #expect(await guest.connect(timeout: .seconds(5)))
            let host = system.homebase.publicKey
            _ = try await guest.guest.join(host: host, name: "integ-guest", messenger: guest.messenger)
            let registry = try GuestRegistry(state: system.homebase.state)
            #expect(await eventually(.seconds(5)) { (try? registry.currentRecord(for: guest.publicKey)) != nil })
            try registry.grant(guest: guest.publicKey, models: .all, expiresAt: nil, nowMs: Posix.wallClockMs)
            // Joined, with the host's advert (its first model, as `guest config` would pick without a name).
            #expect(await eventually(.seconds(5)) { guest.guest.model(on: host, requested: nil) != nil })
            try guest.settings.setModelSource(.external)
            try guest.settings.setExternalRuntime(.ollama)
            let model = try #require(guest.guest.model(on: host, requested: "qwen3:8b"))
            try guest.settings.setExternalSelection(ExternalSelection(tag: model, host: .joined(host)))
            let guestAnswer = await guest.chat(ChatRequest(messages: [.user(prompt)])) { _ in }
            #expect(guestAnswer.result.providerKind == .crossAccount && guestAnswer.result.fallback == nil,
                    "guest fell back: \(String(describing: guestAnswer.result.fallback))")
            #expect(guestAnswer.result.reasoning == reasoning)
            #expect(guestAnswer.result.text == IntegrationOllama.expectedText(prompt))
        }
    }

    /// Four requesters of 60-token answers at once against a runtime that serves one at a time: every answer is
    /// whole or a prompt `busy` fallback (under 1 s), none falls back by a watchdog. Round 1 has no history
    /// (all admitted and queued); round 2 is judged against the answers' time (those that could not start
    /// within the first-output window are refused at once).
    @Test("four requesters at one request at a time: whole or a prompt busy, never a watchdog")
    func fourRequestersOneAtATime() async throws {
        var watchdogs = InferenceClientStateMachine.Watchdogs()
        watchdogs.firstOutputMs = 2_500
        // 60 tokens at 60 tokens/s: an answer takes about 1 s; the 4th in line waits about 3 s.
        try await IntegrationSystem.with(watchdogs: watchdogs, tokensPerSecond: 60, ollama: { c in
            c.parallel = 1
            c.answerTokens = 60...60
        }, homebase: { o in
            // The Homebase judges the queue against the requesters' window.
            o.daemon.limits.queueWaitBudgetMs = 2_500
        }) { system in
            var figures: [String] = []
            for round in 1...2 {
                let outcomes = await withTaskGroup(of: (String, ChatAnswer, Double).self) { group in
                    for i in 1...4 {
                        let prompt = "Round \(round) requester \(i): tell me about rivers"
                        group.addTask {
                            let start = ContinuousClock.now
                            let answer = await system.handset.chat(prompt).answer
                            let d = ContinuousClock.now - start
                            let ms = Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
                            return (prompt, answer, ms)
                        }
                    }
                    var all: [(String, ChatAnswer, Double)] = []
                    for await outcome in group { all.append(outcome) }
                    return all
                }
                var whole = 0
                var busy = 0
                for (prompt, answer, ms) in outcomes {
                    if let fallback = answer.result.fallback {
                        #expect(fallback.reason.rawValue == "error:busy", "\(prompt): fell back by \(fallback.reason)")
                        #expect(ms < 1_000, "\(prompt): busy fallback took \(Int(ms)) ms")
                        busy += 1
                        figures.append("round \(round): busy fallback in \(Int(ms)) ms")
                    } else {
                        let expected = TextGenerator(prompt: prompt, minTokens: 60, maxTokens: 60).tokens.joined()
                        #expect(answer.result.text == expected, "\(prompt): not whole")
                        whole += 1
                        figures.append("round \(round): whole in \(Int(ms)) ms")
                    }
                }
                #expect(whole + busy == 4)
                #expect(whole >= 1)
                if round == 1 { #expect(whole == 4, "no history yet: every request is admitted") }
            }
            print("four requesters at parallel 1:\n  " + figures.joined(separator: "\n  "))
        }
    }
}
