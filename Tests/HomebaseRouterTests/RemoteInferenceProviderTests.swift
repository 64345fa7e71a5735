import HomebaseCore
import HomebaseNode
import Testing
@testable import HomebaseRouter

/// The sibling-channel provider against a scripted host over the in-memory relay, with a 150 ms ladder.
@Suite(.timeLimit(.minutes(1))) struct RemoteInferenceProviderTests {
    static let slack: UInt64 = 1_000

    @Test func servedRemotelyIsWholeAndFromTheRemote() async throws {
        let rig = RelayRig { r, _ in ScriptedHost.serve(r, ["Bring ", "flowers."]) }
        defer { rig.stop() }
        let (result, _) = try await timedComplete(rig.remote())
        #expect(result.text == "Bring flowers.")
        #expect(result.providerKind == .remote)
        #expect(result.model == "qwen2.5:7b")
        #expect(result.fallback == nil)
        #expect(result.usage == Usage(promptTokens: 3, completionTokens: 2))
        let sent = try #require(rig.host.requests.first)
        #expect(sent.messages == Fixture.request.messages)
        #expect(sent.conversation == nil)
        #expect(rig.clientSent == [MessageType.inferRequest])
    }

    @Test func eachRequestGetsAFreshUUID() async throws {
        let rig = RelayRig { r, _ in ScriptedHost.serve(r, ["ok"]) }
        defer { rig.stop() }
        let provider = rig.remote()
        _ = try await provider.complete(Fixture.request)
        _ = try await provider.complete(Fixture.request)
        let ids = rig.host.requests.map(\.id)
        #expect(ids.count == 2)
        #expect(Set(ids).count == 2)
        #expect(ids.allSatisfy { $0.count == 36 })
    }

    @Test func acceptTimeoutWhenTheHostNeverAnswers() async throws {
        let rig = RelayRig { _, _ in [] }
        defer { rig.stop() }
        let (result, elapsed) = try await timedComplete(rig.remote())
        #expect(result.fallbackReason == "accept_timeout")
        #expect(result.fallback?.from == .remote)
        #expect(result.providerKind == .onDevice)
        #expect(result.text == "fallback answer")
        #expect(elapsed >= RelayRig.ladder.acceptMs && elapsed < RelayRig.ladder.acceptMs + Self.slack)
        #expect(await eventually { rig.host.cancels == rig.host.requests.map(\.id) })
    }

    @Test func acceptJustInsideTheWatchdogIsServed() async throws {
        let rig = RelayRig { r, _ in [.sleep(ms: 40)] + ScriptedHost.serve(r, ["late but fine"]) }
        defer { rig.stop() }
        let result = try await rig.remote().complete(Fixture.request)
        #expect(result.fallback == nil)
        #expect(result.text == "late but fine")
    }

    @Test func firstOutputTimeoutAfterAcceptThenNothing() async throws {
        let rig = RelayRig { r, _ in [ScriptedHost.accept(r)] }
        defer { rig.stop() }
        let (result, elapsed) = try await timedComplete(rig.remote())
        #expect(result.fallbackReason == "first_output_timeout")
        #expect(elapsed >= RelayRig.ladder.firstOutputMs && elapsed < RelayRig.ladder.firstOutputMs + Self.slack)
        #expect(await eventually { rig.host.cancels.count == 1 })
    }

    @Test func stallAfterChunksThenSilence() async throws {
        // Chunks 40 ms apart stay under the 150 ms stall; then silence trips it.
        let rig = RelayRig { r, _ in
            [ScriptedHost.accept(r), ScriptedHost.chunk(r, 0, "a"), .sleep(ms: 40), ScriptedHost.chunk(r, 1, "b")]
        }
        defer { rig.stop() }
        let (result, elapsed) = try await timedComplete(rig.remote())
        #expect(result.fallbackReason == "stall")
        #expect(result.text == "fallback answer")
        #expect(elapsed >= 40 + RelayRig.ladder.stallMs)
        #expect(await eventually { rig.host.cancels.count == 1 })
    }

    @Test func offlineReceiptFallsBackAtOnce() async throws {
        let rig = RelayRig { r, _ in ScriptedHost.serve(r, ["never"]) }
        defer { rig.stop() }
        rig.hub.disconnect(RelayRig.hostKey)
        let ladder = InferenceClientStateMachine.Watchdogs(acceptMs: 5_000, firstOutputMs: 5_000, stallMs: 5_000)
        let (result, elapsed) = try await timedComplete(rig.remote(ladder: ladder))
        #expect(result.fallbackReason == "offline")
        #expect(elapsed < 500)
        #expect(rig.host.requests.isEmpty)
    }

    @Test func inferErrorFallsBackWithItsCodeAndNoCancel() async throws {
        let rig = RelayRig { r, _ in [ScriptedHost.accept(r), ScriptedHost.error(r, .busy)] }
        defer { rig.stop() }
        let result = try await rig.remote().complete(Fixture.request)
        #expect(result.fallbackReason == "error:busy")
        #expect(!rig.clientSent.contains(MessageType.inferCancel))
    }

    @Test func seqGapFallsBackAndCancels() async throws {
        let rig = RelayRig { r, _ in
            [ScriptedHost.accept(r), ScriptedHost.chunk(r, 0, "a"), ScriptedHost.chunk(r, 2, "c"),
             ScriptedHost.done(r, chunks: 3)]
        }
        defer { rig.stop() }
        let result = try await rig.remote().complete(Fixture.request)
        #expect(result.fallbackReason == "seq_gap")
        #expect(result.text == "fallback answer")
        #expect(await eventually { rig.host.cancels.count == 1 })
    }

    @Test func countMismatchAtDoneFallsBack() async throws {
        let rig = RelayRig { r, _ in
            [ScriptedHost.accept(r), ScriptedHost.chunk(r, 0, "a"), ScriptedHost.done(r, chunks: 3)]
        }
        defer { rig.stop() }
        let result = try await rig.remote().complete(Fixture.request)
        #expect(result.fallbackReason == "count_mismatch")
    }

    @Test func relayDisconnectMidStreamIsRelayGone() async throws {
        let rig = RelayRig { r, _ in [ScriptedHost.accept(r), ScriptedHost.chunk(r, 0, "a"), .disconnectClient] }
        defer { rig.stop() }
        let ladder = InferenceClientStateMachine.Watchdogs(acceptMs: 5_000, firstOutputMs: 5_000, stallMs: 5_000)
        let (result, elapsed) = try await timedComplete(rig.remote(ladder: ladder))
        #expect(result.fallbackReason == "relay_gone")
        #expect(elapsed < 1_000)
    }

    @Test func toolsAreNeverSent() async throws {
        let rig = RelayRig { r, _ in ScriptedHost.serve(r, ["remote"]) }
        defer { rig.stop() }
        let request = ChatRequest(messages: [.user("list my files")], tools: [RawJSON(#"{"type":"function"}"#)])
        let result = try await rig.remote().complete(request)
        #expect(result.fallbackReason == "tools")
        #expect(result.fallback?.from == .remote)
        #expect(result.text == "fallback answer")
        #expect(rig.hub.sent.isEmpty)
    }

    @Test func streamingEmitsChunksAsTheyArrive() async throws {
        let rig = RelayRig { r, _ in ScriptedHost.serve(r, ["one ", "two"]) }
        defer { rig.stop() }
        let events = await collect(rig.remote().stream(Fixture.request))
        #expect(events.count == 3)
        #expect(events.prefix(2) == [.text("one "), .text("two")])
        guard case .done(let result) = events.last else { Issue.record("no .done"); return }
        #expect(result.text == "one two")
        #expect(result.providerKind == .remote)
    }

    @Test func streamingFailureAfterPartialOutputRestartsWithTheWholeFallback() async throws {
        let rig = RelayRig { r, _ in [ScriptedHost.accept(r), ScriptedHost.chunk(r, 0, "half an ")] }
        defer { rig.stop() }
        let events = await collect(rig.remote().stream(Fixture.request))
        let stall = FallbackReason(rawValue: "stall")
        // The restart, then who answers now (before its first output), then the fallback's whole answer.
        #expect(Array(events.prefix(5)) == [.text("half an "), .restart(stall),
                                            .fallingBack(Fallback(from: .remote, reason: stall), provider: .onDevice),
                                            .text("fallback "), .text("answer")])
        guard case .done(let result) = events.last else { Issue.record("no .done"); return }
        #expect(events.count == 6)
        #expect(result.text == "fallback answer")
        #expect(result.providerKind == .onDevice)
        #expect(result.fallback == Fallback(from: .remote, reason: stall))
    }

    @Test func streamingFailureBeforeOutputHasNoRestart() async throws {
        let rig = RelayRig { r, _ in [ScriptedHost.accept(r), ScriptedHost.error(r, .hostError)] }
        defer { rig.stop() }
        let events = await collect(rig.remote().stream(Fixture.request))
        #expect(!events.contains { if case .restart = $0 { true } else { false } })
        guard case .done(let result) = events.last else { Issue.record("no .done"); return }
        #expect(result.fallbackReason == "error:host_error")
    }

    @Test func lateFramesAfterAFailureAreDropped() async throws {
        // Accept, then the answer only after the first-output watchdog has already fired. Only that watchdog is
        // short, and the host waits four times its length: a loaded machine would have to hold the accept back for
        // 450 ms, not 150 ms as before, to change which rule ends the answer.
        let ladder = InferenceClientStateMachine.Watchdogs(acceptMs: 5_000, firstOutputMs: 150, stallMs: 5_000)
        let rig = RelayRig { r, _ in
            [ScriptedHost.accept(r), .sleep(ms: 600)] + Array(ScriptedHost.serve(r, ["too late"]).dropFirst())
        }
        defer { rig.stop() }
        let events = await collect(rig.remote(ladder: ladder).stream(Fixture.request))
        guard case .done(let result) = events.last else { Issue.record("no .done"); return }
        #expect(result.fallbackReason == "first_output_timeout")
        #expect(await eventually { rig.host.finishedScripts == 1 })
        #expect(await eventually { rig.responses.droppedFrames == 2 })
        #expect(!events.contains(.text("too late")))
    }

    @Test func answersFromAnotherSenderAreDropped() async throws {
        let rig = RelayRig { _, _ in [] }
        defer { rig.stop() }
        // The request goes to a silent host; the scripted host's key forges a whole answer for its id.
        let target = Fixture.otherFriend
        let silent = rig.hub.messenger(for: target) { _ in .sibling }
        let forger = Task {
            for await inbound in silent.inbound {
                guard case .inferRequest(let r) = inbound.message else { continue }
                for case .send(let message) in ScriptedHost.serve(r, ["forged"]) {
                    rig.host.messenger.send(message, to: RelayRig.clientKey, channel: .syncDelta, store: false)
                }
                return
            }
        }
        defer { forger.cancel() }
        let result = try await rig.remote(host: target).complete(Fixture.request)
        #expect(result.fallbackReason == "accept_timeout")
        #expect(result.text == "fallback answer")
        #expect(rig.responses.droppedFrames == 3)
    }
}
