import Foundation
import HomebaseCore

/// A model installed on a runtime, as its probe listed it.
public struct RuntimeModel: Sendable, Hashable, Codable {
    public var tag: String
    /// Ollama's capability names (`completion`, `tools`, `vision`, `embedding`, …); empty when unknown.
    public var capabilities: [String]
    /// A cloud stub (`remote_host` in `/api/tags`): the runtime forwards it to a third party. Never the trial
    /// model: its answer, or its failure offline, says nothing about the runtime at hand.
    public var cloud: Bool

    public init(tag: String, capabilities: [String], cloud: Bool = false) {
        self.tag = tag
        self.capabilities = capabilities
        self.cloud = cloud
    }

    enum CodingKeys: String, CodingKey { case tag, capabilities, cloud }

    /// Endpoints stored before `cloud` existed read as local models.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.tag = try c.decode(String.self, forKey: .tag)
        self.capabilities = try c.decode([String].self, forKey: .capabilities)
        self.cloud = try c.decodeIfPresent(Bool.self, forKey: .cloud) ?? false
    }

    /// Whether a trial completion may be asked of this model (`ModelCapabilities.canComplete`).
    public var isCompletionCapable: Bool { ModelCapabilities.canComplete(self.capabilities) }
}

/// An endpoint that passed test-before-persist: the configured fact.
public struct VerifiedEndpoint: Sendable, Hashable, Codable {
    /// Base URL, e.g. `http://127.0.0.1:11434`.
    public var url: String
    public var verifiedAtMs: UInt64
    /// The runtime's version string from the probe.
    public var version: String
    public var models: [RuntimeModel]

    public init(url: String, verifiedAtMs: UInt64, version: String, models: [RuntimeModel]) {
        self.url = url
        self.verifiedAtMs = verifiedAtMs
        self.version = version
        self.models = models
    }

    enum CodingKeys: String, CodingKey {
        case url, version, models
        case verifiedAtMs = "verified_at_ms"
    }
}

/// The last probe's result: the availability fact, kept apart from configuration.
public struct RuntimeAvailability: Sendable, Hashable, Codable {
    public var url: String
    public var available: Bool
    public var checkedAtMs: UInt64
    /// Why the probe failed (`version`, `models`, `trial`, with the verifier's detail), when it did.
    public var reason: String?

    public init(url: String, available: Bool, checkedAtMs: UInt64, reason: String? = nil) {
        self.url = url
        self.available = available
        self.checkedAtMs = checkedAtMs
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey {
        case url, available, reason
        case checkedAtMs = "checked_at_ms"
    }
}

/// Why a probe step failed; the detail is for a person (one line).
public struct RuntimeProbeError: Error, Sendable, Hashable {
    public var detail: String
    public init(_ detail: String) { self.detail = detail }
}

/// The probes of test-before-persist, implemented over HTTP against Ollama's `/api/version`,
/// `/api/tags` (+ `/api/show` for capabilities) and `/v1/chat/completions` by the transport layer.
public protocol RuntimeVerifier: Sendable {
    /// `GET /api/version`: the runtime's version.
    func version(at url: String) async throws(RuntimeProbeError) -> String
    /// The installed models with their capabilities.
    func models(at url: String) async throws(RuntimeProbeError) -> [RuntimeModel]
    /// A tiny real completion on `model`; returns only if the runtime actually answered.
    func trialCompletion(at url: String, model: String) async throws(RuntimeProbeError)
}

/// The step of test-before-persist that failed.
public enum VerificationStep: String, Sendable, Hashable {
    case version
    case models
    case trial
}

/// What `verifyAndRecord` did.
public enum VerificationOutcome: Sendable, Hashable {
    /// Every probe passed and the endpoint is now the configured one.
    case verified(VerifiedEndpoint)
    /// A probe failed; nothing new was persisted as configuration.
    case failed(step: VerificationStep, detail: String)
}

/// Where this device's own Ollama runtime lives (design.md §R4). Device-only: never synced, because the
/// default endpoint is loopback and means a different machine on every device.
///
/// Configuration (`configured`) and availability (`availability`) are separate facts: an endpoint
/// becomes configured only through test-before-persist, and a later failed probe marks it unavailable
/// without forgetting it.
public struct ExternalRuntimeStore: Sendable {
    public enum Key {
        public static let endpoint = "runtime.endpoint"
        public static let availability = "runtime.available"
    }

    public let backend: any SettingsBackend

    /// - Parameter backend: a device-only backend (the secrets instance or another unsynced one).
    public init(backend: any SettingsBackend) {
        self.backend = backend
    }

    /// The verified endpoint, if one ever passed verification.
    public var configured: VerifiedEndpoint? {
        self.backend.decodedJSON(VerifiedEndpoint.self, forKey: Key.endpoint)
    }

    /// Whether an endpoint is configured. Routing reads this, not availability: the in-call fallback
    /// covers a runtime that is down right now (design.md §R4, "not forgotten").
    public var hasVerifiedEndpoint: Bool { self.configured != nil }

    /// The last probe's result, if any probe ran.
    public var availability: RuntimeAvailability? {
        self.backend.decodedJSON(RuntimeAvailability.self, forKey: Key.availability)
    }

    /// Persists an endpoint. Call only after every probe passed; `verifyAndRecord` is the one caller
    /// outside tests.
    public func recordVerified(_ endpoint: VerifiedEndpoint) throws {
        try self.backend.setJSON(endpoint, forKey: Key.endpoint)
        try self.recordAvailability(
            RuntimeAvailability(url: endpoint.url, available: true, checkedAtMs: endpoint.verifiedAtMs))
    }

    /// Records a probe result without touching the configured endpoint.
    public func recordAvailability(_ availability: RuntimeAvailability) throws {
        try self.backend.setJSON(availability, forKey: Key.availability)
    }

    /// Forgets the endpoint: only on the user's explicit request.
    public func forget() throws {
        try self.backend.removeValue(forKey: Key.endpoint)
        try self.backend.removeValue(forKey: Key.availability)
    }

    /// Test-before-persist (design.md §R4): version probe, model list, and a trial completion when any
    /// completion-capable model is installed; the endpoint is stored only when all of them pass.
    ///
    /// A failure never forgets a configured endpoint; it is recorded as availability when the failing
    /// URL is the configured one.
    /// - Parameters:
    ///   - preferredModel: the model to try first for the trial (the selection), when installed and capable.
    ///   - nowMs: the time to stamp, from the caller's clock.
    public func verifyAndRecord(
        url: String, verifier: any RuntimeVerifier, preferredModel: String? = nil, nowMs: UInt64
    ) async -> VerificationOutcome {
        let url = url.trimmed
        let version: String
        do {
            version = try await verifier.version(at: url)
        } catch {
            return self.failed(url: url, step: .version, detail: error.detail, nowMs: nowMs)
        }
        let models: [RuntimeModel]
        do {
            models = try await verifier.models(at: url)
        } catch {
            return self.failed(url: url, step: .models, detail: error.detail, nowMs: nowMs)
        }
        let capable = models.filter { $0.isCompletionCapable && !$0.cloud }
        let trialModel = capable.first { $0.tag == preferredModel } ?? capable.first
        if let trialModel {
            do {
                try await verifier.trialCompletion(at: url, model: trialModel.tag)
            } catch {
                return self.failed(url: url, step: .trial, detail: error.detail, nowMs: nowMs)
            }
        }
        let endpoint = VerifiedEndpoint(url: url, verifiedAtMs: nowMs, version: version, models: models)
        do {
            try self.recordVerified(endpoint)
        } catch {
            return .failed(step: .trial, detail: "could not save the endpoint: \(error)")
        }
        return .verified(endpoint)
    }

    /// Re-probes the configured endpoint's version and records availability only.
    ///
    /// - Returns: whether it answered; `false` when nothing is configured.
    @discardableResult
    public func probe(verifier: any RuntimeVerifier, nowMs: UInt64) async -> Bool {
        guard let endpoint = self.configured else { return false }
        do {
            _ = try await verifier.version(at: endpoint.url)
            try? self.recordAvailability(RuntimeAvailability(url: endpoint.url, available: true, checkedAtMs: nowMs))
            return true
        } catch {
            _ = self.failed(url: endpoint.url, step: .version, detail: error.detail, nowMs: nowMs)
            return false
        }
    }

    private func failed(url: String, step: VerificationStep, detail: String, nowMs: UInt64) -> VerificationOutcome {
        if self.configured?.url == url {
            // Availability only: the configured endpoint stays (a sleeping runtime is not a wrong one).
            try? self.recordAvailability(
                RuntimeAvailability(url: url, available: false, checkedAtMs: nowMs, reason: "\(step.rawValue): \(detail)"))
        }
        return .failed(step: step, detail: detail)
    }
}
