import HomebaseCore

/// The answer of an `InferenceAuthorizer` for one request.
public enum InferenceAuthorization: Sendable, Equatable {
    /// Serve it (subject to validation, the runtime and admission control).
    case allow
    /// Answer `infer.error` with this code (for example `not_granted`, or `busy` for a per-guest limit).
    case deny(InferErrorCode)
    /// Answer nothing at all: an unknown key learns nothing (Protocol/messages.md §5).
    case ignore
}

/// What to serve for an authorised, valid request (`InferenceAuthorizer.prepare`).
public enum InferencePreparation: Sendable, Equatable {
    /// Serve these messages; `keepAnswer`: collect the answer's text for `ended` (conversation cache).
    case serve([ChatMessage], keepAnswer: Bool)
    /// Answer `infer.error` with this code and message (for example `cache_miss`).
    case refuse(InferErrorCode, String)
}

/// How an admitted request ended, for `InferenceAuthorizer.ended`.
public enum InferenceOutcome: Sendable, Equatable {
    /// `infer.done` was sent. `answer`: the whole text, when `prepare` asked to keep it (and it was not too long).
    case done(answer: String?, usage: Usage)
    /// `infer.error` was sent.
    case failed(InferErrorCode)
    /// Ended without a reply: cancelled by the host, or by the requester (or the requester went away) before
    /// any text was sent.
    case cancelled
    /// The requester cancelled, or went away, after text had been sent: `usage` counts the runtime's pieces
    /// streamed so far as completion tokens (Ollama sends one per token); the prompt is not known, so 0.
    case cut(usage: Usage)
}

/// Decides who may run a model, per (sender, channel, model). The inference server asks it first, before it
/// spends anything on the request. The contact channel plugs its grant check, per-guest limits, accounting
/// and conversation cache in here; the hooks after `authorize` have defaults that do nothing.
///
/// Every hook runs under the inference server's lock, on the thread that called the server (the relay link's
/// and the engine's I/O threads, mostly): it must be quick (a read, no synced commit, no waiting) and must not
/// call back into the server, whose lock is not reentrant.
public protocol InferenceAuthorizer: Sendable {
    func authorize(sender: PublicKey, channel: Channel, model: String) -> InferenceAuthorization
    /// After `authorize` allowed and the request passed validation: the messages to serve, or a refusal.
    func prepare(_ request: InferRequest, from sender: PublicKey, channel: Channel) -> InferencePreparation
    /// The request was admitted (accepted; streaming or queued). `request.messages` are the prepared ones.
    func admitted(_ request: InferRequest, from sender: PublicKey, channel: Channel)
    /// An admitted request ended; called exactly once per `admitted`.
    func ended(_ request: InferRequest, from sender: PublicKey, channel: Channel, outcome: InferenceOutcome)
}

extension InferenceAuthorizer {
    public func prepare(_ request: InferRequest, from sender: PublicKey, channel: Channel) -> InferencePreparation {
        .serve(request.messages, keepAnswer: false)
    }

    public func admitted(_ request: InferRequest, from sender: PublicKey, channel: Channel) {}

    public func ended(_ request: InferRequest, from sender: PublicKey, channel: Channel, outcome: InferenceOutcome) {}
}

/// Siblings may run any model; nobody else gets an answer (there are no contacts in this version).
public struct SiblingInferenceAuthorizer: InferenceAuthorizer {
    private let directory: PeerDirectory

    public init(directory: PeerDirectory) {
        self.directory = directory
    }

    public func authorize(sender: PublicKey, channel: Channel, model: String) -> InferenceAuthorization {
        channel == .sibling && self.directory.relation(of: sender).isSibling ? .allow : .ignore
    }
}
