import Foundation
import HomebaseCore
import HomebaseEngines
import HomebaseRouter
import HomebaseTransport
import Testing

/// Faults on the inference path with shortened real watchdogs and the emulator's per-request fault markers.
/// Every chat ends with an answer; the reason names what went wrong.
@Suite("Inference faults end in an answer", .serialized, .timeLimit(.minutes(1)))
struct InferenceFaultTests {
    /// Accept 2 s (generous: the box is shared), first output 600 ms, stall 400 ms.
    static let watchdogs = InferenceClientStateMachine.Watchdogs(acceptMs: 2_000, firstOutputMs: 600, stallMs: 400)

    static func floorText(_ prompt: String) -> String {
        FloorProvider().answer(ChatRequest(messages: [.user(prompt)])).text
    }

    @Test("a slow load past the first-output rung falls back with first_output_timeout")
    func slowLoad() async throws {
        try await IntegrationSystem.with(watchdogs: Self.watchdogs) { system in
            let prompt = "[[fault:slow-load=5000]] Describe a garden"
            let start = ContinuousClock.now
            let (events, answer, _) = await system.handset.chat(prompt)
            let elapsed = ContinuousClock.now - start
            #expect(answer.result.providerKind == .onDevice)
            #expect(answer.result.fallback?.reason == .firstOutputTimeout)
            #expect(events.restartReasons.isEmpty, "no output came before the fallback, so no restart")
            #expect(answer.result.text == Self.floorText(prompt))
            #expect(elapsed < .milliseconds(2_500), "took \(elapsed)")
        }
    }

    @Test("a stall after 3 tokens shows partial output, then a restart and the fallback's whole answer")
    func stall() async throws {
        try await IntegrationSystem.with(watchdogs: Self.watchdogs) { system in
            let prompt = "[[fault:stall-after=3]] Describe a mountain"
            let (events, answer, _) = await system.handset.chat(prompt)
            let expected = IntegrationOllama.expectedText("Describe a mountain")
            let partial = events.textBeforeRestart.joined()
            #expect(!partial.isEmpty)
            #expect(expected.hasPrefix(partial), "partial '\(partial)' is not the emulator's beginning")
            #expect(partial != expected)
            #expect(events.restartReasons == ["stall"])
            #expect(events.textAfterRestart.joined() == Self.floorText(prompt))
            #expect(answer.result.text == Self.floorText(prompt))
            #expect(answer.result.fallback?.reason == .stall)
            #expect(answer.result.providerKind == .onDevice)
        }
    }

    @Test("HTTP 500 from the runtime arrives as infer.error host_error")
    func http500() async throws {
        try await IntegrationSystem.with(watchdogs: Self.watchdogs) { system in
            let prompt = "[[fault:http-500]] Describe a window"
            let (events, answer, _) = await system.handset.chat(prompt)
            #expect(answer.result.fallback?.reason == .error("host_error"))
            #expect(answer.result.providerKind == .onDevice)
            #expect(events.restartReasons.isEmpty)
            #expect(answer.result.text == Self.floorText(prompt))
        }
    }

    @Test("an unknown model at the runtime arrives as infer.error model_unavailable")
    func unknownModel() async throws {
        try await IntegrationSystem.with(watchdogs: Self.watchdogs) { system in
            let prompt = "[[fault:unknown-model]] Describe paper"
            let (_, answer, _) = await system.handset.chat(prompt)
            #expect(answer.result.fallback?.reason == .error("model_unavailable"))
            #expect(answer.result.providerKind == .onDevice)
        }
    }

    @Test("a dropped runtime connection mid-stream is an error to the client after partial output")
    func disconnectMidStream() async throws {
        try await IntegrationSystem.with(watchdogs: Self.watchdogs, tokensPerSecond: 100) { system in
            let prompt = "[[fault:disconnect-after=5]] Describe the network"
            let (events, answer, _) = await system.handset.chat(prompt)
            let expected = IntegrationOllama.expectedText("Describe the network")
            let partial = events.textBeforeRestart.joined()
            #expect(expected.hasPrefix(partial))
            #expect(answer.result.fallback?.reason == .error("host_error"))
            #expect(answer.result.text == Self.floorText(prompt))
            // Whether the 5 tokens were flushed before the error depends on the coalescer; if they were, the
            // caller must have seen a restart.
            if !partial.isEmpty { #expect(events.restartReasons == ["error:host_error"]) }
            // The runtime stays usable: the next request is served remotely.
            let next = await system.handset.chat("Describe the network again")
            #expect(next.answer.result.providerKind == .sibling)
        }
    }

    /// Issue 34: a `/v1` stream that fails after it started ends, on real Ollama, with an empty delta and no
    /// finish_reason or [DONE]: the Homebase says host_error, never a short answer passed off as whole.
    @Test("a /v1 stream failing mid-way (empty delta, no finish) is host_error, not a short answer")
    func runtimeErrorMidStream() async throws {
        try await IntegrationSystem.with(watchdogs: Self.watchdogs, tokensPerSecond: 100) { system in
            let prompt = "[[fault:error-after=5]] Describe the network"
            let (events, answer, _) = await system.handset.chat(prompt)
            let expected = IntegrationOllama.expectedText("Describe the network")
            #expect(expected.hasPrefix(events.textBeforeRestart.joined()))
            #expect(answer.result.fallback?.reason == .error("host_error"))
            #expect(answer.result.text == Self.floorText(prompt))
        }
    }

    @Test("Ollama killed mid-stream: error to the client, runtime marked down, re-verified when it returns")
    func ollamaKilledMidStream() async throws {
        try await IntegrationSystem.with(watchdogs: Self.watchdogs, tokensPerSecond: 20) { system in
            let log = EventLog()
            let prompt = "Describe a long river journey"
            let chat = Task {
                await system.handset.session.chat(ChatRequest(messages: [.user(prompt)])) { log.append($0) }
            }
            let streaming = await eventually(.seconds(10)) { !log.all.isEmpty }
            #expect(streaming, "no output before the kill")
            let killedAtMs = Posix.wallClockMs
            system.ollama.stop()
            let answer = await chat.value
            #expect(answer.result.providerKind == .onDevice)
            let reason = answer.result.fallback?.reason.rawValue ?? "none"
            #expect(reason == "error:host_error" || reason == "error:runtime_unavailable", "reason \(reason)")
            #expect(log.all.restartReasons == [reason])

            // The failure makes the monitor re-probe at once: the daemon's status (written on change) shows the
            // runtime down, still verified (a failed probe never forgets the endpoint), and no models.
            let down = await eventually(.seconds(8)) {
                guard let s = system.homebase.daemonStatus, s.updatedAtMs > killedAtMs else { return false }
                return !s.runtimeAvailable
            }
            #expect(down, "status never showed the runtime unavailable")
            let status = system.homebase.daemonStatus
            #expect(status?.runtimeVerified == true,
                    "a failed probe must not forget the endpoint: \(String(describing: status))")
            #expect(status?.models.isEmpty == true)
            #expect(status?.runtimeError != nil)

            // Ollama comes back on the same port: re-verified, advertised again, and serving.
            let again = try IntegrationOllama(tokensPerSecond: 400, port: system.ollama.port)
            defer { again.stop() }
            let restartedAtMs = Posix.wallClockMs
            let up = await eventually(.seconds(10)) {
                guard let s = system.homebase.daemonStatus, s.updatedAtMs > restartedAtMs else { return false }
                return s.runtimeAvailable
            }
            #expect(up, "status never showed the runtime available again")
            let served = await eventually(.seconds(10)) {
                await system.handset.refreshAdvert()
                return await system.handset.chat("Back again?").answer.result.providerKind == .sibling
            }
            #expect(served, "no remote answer after Ollama returned")
        }
    }
}
