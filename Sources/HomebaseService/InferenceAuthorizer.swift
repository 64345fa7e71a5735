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

/// Decides who may run a model, per (sender, channel, model). The inference server asks it first, before it
/// spends anything on the request. The contact channel plugs its grant check in here.
public protocol InferenceAuthorizer: Sendable {
    func authorize(sender: PublicKey, channel: Channel, model: String) -> InferenceAuthorization
}

/// Siblings may run any model; nobody else gets an answer (there are no contacts in this version).
public struct SiblingInferenceAuthorizer: InferenceAuthorizer {
    private let directory: PeerDirectory

    public init(directory: PeerDirectory) {
        self.directory = directory
    }

    public func authorize(sender: PublicKey, channel: Channel, model: String) -> InferenceAuthorization {
        channel == .syncDelta && self.directory.relation(of: sender).isSibling ? .allow : .ignore
    }
}
