import HomebaseCore
import HomebaseCrypto
import HomebaseEngines
import HomebaseNode
import Synchronization
import Testing
@testable import HomebaseRouter

/// The contact-channel provider: the conversation cache, the one `cache_miss` retry, and host liveness.
@Suite(.timeLimit(.minutes(1))) struct CrossAccountInferenceProviderTests {
    static let firstTurn: [ChatMessage] = [.system("Be brief."), .user("Plan a picnic.")]

    @Test func servedFromAFriendIsCrossAccount() async throws {
        let rig = RelayRig { r, _ in ScriptedHost.serve(r, ["Sandwiches."]) }
        defer { rig.stop() }
        let result = try await rig.crossAccount(conversations: ConversationTracker())
            .complete(ChatRequest(messages: Self.firstTurn))
        #expect(result.providerKind == .crossAccount)
        #expect(result.model == "llama3.1:70b")
        #expect(result.fallback == nil)
        let sent = try #require(rig.host.requests.first)
        #expect(sent.messages == Self.firstTurn)
        #expect(sent.conversation?.baseCount == nil && sent.conversation?.baseDigest == nil)
        #expect(rig.hub.sent.allSatisfy { $0.type != MessageType.inferCancel })
    }

    @Test func followUpSendsOnlyNewMessagesWithTheDigestOfThePrefix() async throws {
        let rig = RelayRig { r, _ in ScriptedHost.serve(r, ["Sandwiches."]) }
        defer { rig.stop() }
        let provider = rig.crossAccount(conversations: ConversationTracker())
        _ = try await provider.complete(ChatRequest(messages: Self.firstTurn))
        let secondTurn = Self.firstTurn + [.assistant("Sandwiches."), .user("And drinks?")]
        let result = try await provider.complete(ChatRequest(messages: secondTurn))
        #expect(result.fallback == nil)
        let requests = rig.host.requests
        try #require(requests.count == 2)
        #expect(requests[1].messages == [.user("And drinks?")])
        let conversation = try #require(requests[1].conversation)
        #expect(conversation.id == requests[0].conversation?.id)
        #expect(conversation.baseCount == 3)
        let prefix = secondTurn.prefix(3).map { (role: $0.role, content: $0.content) }
        #expect(conversation.baseDigest == ConversationDigest.compute(messages: prefix))
    }

    @Test func cacheMissRetriesOnceWithTheWholeConversationAndIsServed() async throws {
        let rig = RelayRig { r, _ in
            r.conversation?.baseCount != nil ? [ScriptedHost.error(r, .cacheMiss)] : ScriptedHost.serve(r, ["ok"])
        }
        defer { rig.stop() }
        let provider = rig.crossAccount(conversations: ConversationTracker())
        _ = try await provider.complete(ChatRequest(messages: Self.firstTurn))
        let secondTurn = Self.firstTurn + [.assistant("ok"), .user("More?")]
        let result = try await provider.complete(ChatRequest(messages: secondTurn))
        #expect(result.fallback == nil)
        #expect(result.providerKind == .crossAccount)
        let requests = rig.host.requests
        try #require(requests.count == 3)
        #expect(requests[1].conversation?.baseCount == 3)
        #expect(requests[2].messages == secondTurn)
        #expect(requests[2].conversation?.baseCount == nil && requests[2].conversation?.baseDigest == nil)
        #expect(requests[2].id != requests[1].id)
    }

    @Test func cacheMissTwiceFallsBack() async throws {
        let rig = RelayRig { r, _ in [ScriptedHost.error(r, .cacheMiss)] }
        defer { rig.stop() }
        let result = try await rig.crossAccount(conversations: ConversationTracker())
            .complete(ChatRequest(messages: Self.firstTurn))
        #expect(result.fallback == Fallback(from: .crossAccount, reason: .error("cache_miss")))
        #expect(result.text == "fallback answer")
        #expect(rig.host.requests.count == 2)
    }

    @Test func otherErrorsAreNotRetried() async throws {
        let rig = RelayRig { r, _ in [ScriptedHost.error(r, .notGranted)] }
        defer { rig.stop() }
        let result = try await rig.crossAccount(conversations: ConversationTracker())
            .complete(ChatRequest(messages: Self.firstTurn))
        #expect(result.fallbackReason == "error:not_granted")
        #expect(rig.host.requests.count == 1)
    }

    @Test func aFailedTurnForgetsTheConversation() async throws {
        let rig = RelayRig { r, n in n == 1 ? [ScriptedHost.error(r, .busy)] : ScriptedHost.serve(r, ["ok"]) }
        defer { rig.stop() }
        let provider = rig.crossAccount(conversations: ConversationTracker())
        _ = try await provider.complete(ChatRequest(messages: Self.firstTurn))
        let second = Self.firstTurn + [.assistant("ok"), .user("Again?")]
        #expect(try await provider.complete(ChatRequest(messages: second)).fallbackReason == "error:busy")
        let third = second + [.assistant("fallback answer"), .user("And now?")]
        _ = try await provider.complete(ChatRequest(messages: third))
        let requests = rig.host.requests
        try #require(requests.count == 3)
        #expect(requests[2].messages == third)
        #expect(requests[2].conversation?.baseCount == nil)
    }

    @Test func everyInboundFrameFromTheHostRefreshesLastHeard() async throws {
        let rig = RelayRig { r, _ in ScriptedHost.serve(r, ["ok"]) }
        defer { rig.stop() }
        let joined = InMemoryJoinedHomebaseStore([Fixture.joined(RelayRig.hostKey, lastHeardMs: 1)])
        let factory = RelayInferenceProviderFactory(
            responses: rig.responses, http: .unavailable, joined: joined, watchdogs: RelayRig.ladder,
            wallClock: WallClock { 1_000 + monotonicMs() }, timers: MonotonicClock { monotonicMs() })
        let provider = factory.makeCrossAccount(host: RelayRig.hostKey, model: "llama3.1:70b")
        let result = try await provider.complete(ChatRequest(messages: Self.firstTurn))
        #expect(result.providerKind == .crossAccount)
        #expect(try #require(joined.record(for: RelayRig.hostKey)).lastHeardMs > 1)

        // A non-inference frame (an advert request echo) refreshes it too, and still reaches the node.
        let before = try #require(joined.record(for: RelayRig.hostKey)).lastHeardMs
        let forwarded = Counter()
        rig.responses.setOtherMessagesHandler { _ in forwarded.increment() }
        try await Task.sleep(for: .milliseconds(5))
        rig.host.messenger.send(.advertRequest, to: RelayRig.clientKey, channel: .contact, store: false)
        #expect(await eventually { forwarded.value == 1 })
        #expect(try #require(joined.record(for: RelayRig.hostKey)).lastHeardMs > before)
    }
}

extension HTTPProviderMakers {
    /// HTTP providers that always fail, for tests of the relay half.
    static let unavailable = HTTPProviderMakers(
        ollama: { _, model in FakeProvider(kind: .ollama, model: model, failure: ProviderError(.noEndpoint)) },
        openAI: { model, _ in FakeProvider(kind: .openai, model: model, failure: ProviderError(.noKey)) },
        anthropic: { model, _ in FakeProvider(kind: .anthropic, model: model, failure: ProviderError(.noKey)) })
}

/// A thread-safe counter for handlers.
final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { self.count.withLock { $0 += 1 } }
    var value: Int { self.count.withLock { $0 } }
}
