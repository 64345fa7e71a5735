import HomebaseCore
import HomebaseEngines
import HomebaseNode

/// The cross-account shape of design.md §R4: a friend's Homebase over the sealed contact channel.
///
/// As `SiblingInferenceProvider`, plus the conversation cache (Protocol/messages.md §5): a follow-up sends
/// only the messages the host does not hold yet, with `conversation {id, base_count, base_digest}`. On
/// `infer.error cache_miss` it retries exactly once with the whole conversation and no `base_*` fields (a new
/// request id) before it fails with the reason (`FallbackProvider` answers then).
public struct CrossAccountInferenceProvider: LLMProvider {
    public let client: RelayInferenceClient
    /// Shared by every provider for the same messenger, so a chat session's next turn finds the last one.
    public let conversations: ConversationTracker

    /// - Precondition: `client.channel` is `.contact`.
    public init(client: RelayInferenceClient, conversations: ConversationTracker) {
        precondition(client.channel == .contact, "CrossAccountInferenceProvider runs on the contact channel")
        self.client = client
        self.conversations = conversations
    }

    public init(messenger: any PeerMessenger, responses: InferenceResponseRouter, host: PublicKey, model: String,
                conversations: ConversationTracker,
                watchdogs: InferenceClientStateMachine.Watchdogs = .init(),
                clock: MonotonicClock, logger: Logger = .discard()) {
        self.init(
            client: RelayInferenceClient(
                messenger: messenger, responses: responses, host: host, channel: .contact, model: model,
                watchdogs: watchdogs, clock: clock, logger: logger),
            conversations: conversations)
    }

    public var kind: ProviderKind { .crossAccount }

    public func complete(_ request: ChatRequest) async throws(ProviderError) -> ChatResult {
        try await self.client.complete(request, plan: self.plan(request))
    }

    public func stream(_ request: ChatRequest) -> AsyncStream<ChatStreamEvent> {
        self.client.stream(request, plan: self.plan(request))
    }

    /// The attempts for `request`; tool requests get a plan too, but the client never sends them.
    func plan(_ request: ChatRequest) -> RelayAttemptPlan {
        let host = self.client.host
        let tracker = self.conversations
        let plan = tracker.plan(host: host, messages: request.messages)
        let full = tracker.fullPlan(conversationID: plan.conversationID, messages: request.messages)
        let id = plan.conversationID
        return RelayAttemptPlan(
            first: RelayAttempt(messages: plan.messages, conversation: plan.conversation),
            cacheMissRetry: RelayAttempt(messages: full.messages, conversation: full.conversation),
            served: { _, result in
                tracker.recordServed(host: host, conversationID: id,
                                     held: request.messages + [.assistant(result.text)])
            },
            failed: { _ in
                // Whatever the host kept is unknown now; the next turn starts the conversation afresh.
                tracker.forget(host: host, conversationID: id)
            })
    }
}
