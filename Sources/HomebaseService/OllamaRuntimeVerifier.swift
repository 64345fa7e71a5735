import HomebaseCore
import HomebaseTransport

/// Why an endpoint did not pass test-before-persist. Each description is one line for `homebase init`.
public enum RuntimeVerificationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The endpoint is not an `http://` or `https://` URL.
    case invalidEndpoint(String)
    /// The version probe, the model list, `show` or `ps` failed.
    case probe(OllamaError)
    /// The runtime lists a completion-capable model but could not complete with it.
    case trialCompletion(model: String, OllamaError)

    public var description: String {
        switch self {
        case .invalidEndpoint(let text):
            return "'\(text)' is not an Ollama URL (expected http://HOST:PORT, e.g. http://127.0.0.1:11434)"
        case .probe(let error):
            return error.description
        case .trialCompletion(let model, let error):
            return "Ollama lists '\(model)' but a trial completion with it failed: \(error)"
        }
    }
}

/// Test-before-persist (design.md §R4): an endpoint may be stored only after it answered a version probe,
/// listed its installed models and — when any installed model can complete — served a one-token trial
/// completion. A URL that never proved it can do inference never becomes a route.
///
/// The verifier stores nothing: the caller persists the returned status's endpoint, and only on success.
public struct OllamaRuntimeVerifier: Sendable {
    private let http: HTTPClient
    private let clientConfiguration: OllamaManagementClient.Configuration
    private let clock: ServiceClock

    public init(http: HTTPClient, clientConfiguration: OllamaManagementClient.Configuration = .init(),
                clock: ServiceClock = .system) {
        self.http = http
        self.clientConfiguration = clientConfiguration
        self.clock = clock
    }

    /// Verifies `endpoint` and returns the status to persist: `verified` and `available`, with the models.
    ///
    /// The trial uses a completion-capable local model that is already loaded, else the smallest one on disk (the
    /// quickest cold load); cloud stubs are never tried. A runtime with only embedding models passes without a trial: nothing could be
    /// asked of it.
    /// - Throws: `RuntimeVerificationError`; `CancellationError` when the task is cancelled.
    public func verify(endpoint: String) async throws -> RuntimeStatus {
        let client = OllamaManagementClient(endpoint: endpoint, http: self.http,
                                            configuration: self.clientConfiguration)
        guard Self.isHTTPURL(client.endpoint) else {
            throw RuntimeVerificationError.invalidEndpoint(endpoint)
        }
        let probe = RuntimeProbe(client: client)
        var cache = RuntimeProbe.ShowCache()
        var snapshot: RuntimeProbe.Snapshot
        do {
            snapshot = try await probe.snapshot(cache: &cache)
        } catch let error as OllamaError {
            throw RuntimeVerificationError.probe(error)
        }
        if let trial = Self.trialModel(snapshot) {
            do {
                try await client.trialCompletion(trial)
            } catch let error as OllamaError {
                throw RuntimeVerificationError.trialCompletion(model: trial, error)
            }
            // The trial loaded a model; report that rather than the state from before it. Losing this
            // refresh only costs a stale flag until the monitor's next probe.
            if let loaded = try? await probe.loaded() {
                RuntimeProbe.apply(loaded: loaded, to: &snapshot.models)
            }
        }
        return RuntimeStatus(endpoint: client.endpoint, verified: true, available: true, version: snapshot.version,
                             models: snapshot.models, checkedAtMs: self.clock.nowMs())
    }

    /// The model for the trial completion, or `nil` when none can complete. Never a cloud stub: its few hundred
    /// bytes make it the "smallest", but its answer (or its 502 offline) says nothing about the local runtime.
    static func trialModel(_ snapshot: RuntimeProbe.Snapshot) -> String? {
        let candidates = snapshot.models.filter { $0.canComplete && !$0.cloud }
        if let loaded = candidates.first(where: \.loaded) { return loaded.tag }
        return candidates.min { (snapshot.sizes[$0.tag] ?? .max) < (snapshot.sizes[$1.tag] ?? .max) }?.tag
    }

    /// `http://` or `https://` followed by a host.
    public static func isHTTPURL(_ text: String) -> Bool {
        let lowered = text.lowercased()
        for scheme in ["http://", "https://"] where lowered.hasPrefix(scheme) {
            let rest = lowered.dropFirst(scheme.count)
            return !rest.isEmpty && !rest.hasPrefix("/") && !rest.contains(where: { $0 == " " })
        }
        return false
    }
}
