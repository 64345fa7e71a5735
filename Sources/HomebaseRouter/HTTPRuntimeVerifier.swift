import Foundation
import HomebaseCore
import HomebaseEngines
import HomebaseTransport

/// Test-before-persist over HTTP for `handset endpoint verify URL` (design.md §R4): `GET /api/version`,
/// `GET /api/tags` (capabilities from the listing when the server includes them, else `POST /api/show` per
/// model), and a trial completion through the same engine `OllamaProvider` uses, capped at one token.
public struct HTTPRuntimeVerifier: RuntimeVerifier {
    public let http: HTTPClient
    /// Per probe request; the trial completion gets `trialIdleTimeout` of silence instead (a cold load).
    public let probeTimeout: Duration
    public let trialIdleTimeout: Duration

    public init(http: HTTPClient, probeTimeout: Duration = .seconds(10),
                trialIdleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout) {
        self.http = http
        self.probeTimeout = probeTimeout
        self.trialIdleTimeout = trialIdleTimeout
    }

    public func version(at url: String) async throws(RuntimeProbeError) -> String {
        let object = try await self.json(method: "GET", url: Self.root(url) + "/api/version", body: nil)
        guard let version = object["version"] as? String, !version.isEmpty else {
            throw RuntimeProbeError("/api/version answered without a version")
        }
        return version
    }

    public func models(at url: String) async throws(RuntimeProbeError) -> [RuntimeModel] {
        let root = Self.root(url)
        let object = try await self.json(method: "GET", url: root + "/api/tags", body: nil)
        guard let list = object["models"] as? [Any] else {
            // Go marshals an empty slice as [] here, but be lenient about null.
            if object["models"] is NSNull { return [] }
            throw RuntimeProbeError("/api/tags answered without a models list")
        }
        var models: [RuntimeModel] = []
        for entry in list {
            guard let entry = entry as? [String: Any],
                let tag = (entry["name"] as? String) ?? (entry["model"] as? String), !tag.isEmpty
            else { throw RuntimeProbeError("/api/tags has an entry without a name") }
            let cloud = !((entry["remote_host"] as? String) ?? "").isEmpty
            if let capabilities = entry["capabilities"] as? [String] {
                models.append(RuntimeModel(tag: tag, capabilities: capabilities, cloud: cloud))
            } else if cloud {
                // Its show is forwarded to the cloud: not asked.
                models.append(RuntimeModel(tag: tag, capabilities: [], cloud: true))
            } else {
                models.append(RuntimeModel(tag: tag, capabilities: await self.showCapabilities(root: root, tag: tag)))
            }
        }
        return models
    }

    public func trialCompletion(at url: String, model: String) async throws(RuntimeProbeError) {
        let engine = OpenAIChatEngine.ollama(http: self.http, url: url, connectTimeout: self.probeTimeout,
                                             idleTimeout: self.trialIdleTimeout)
        let request = ChatRequest(messages: [.user("Say OK.")], options: ChatOptions(maxTokens: 1))
        do {
            for try await event in engine.stream(model: model, request: request) {
                if case .finished = event { return }
            }
        } catch {
            throw RuntimeProbeError("trial completion on \(model) failed: "
                + ChatEngineRunner.providerError(error).detail)
        }
        throw RuntimeProbeError("trial completion on \(model) ended without an answer")
    }

    /// `POST /api/show`'s capabilities; empty (unknown, counted as capable) when the server cannot say.
    private func showCapabilities(root: String, tag: String) async -> [String] {
        let body = JSONText.bytes(["model": tag])
        guard let object = try? await self.json(method: "POST", url: root + "/api/show", body: body) else { return [] }
        return object["capabilities"] as? [String] ?? []
    }

    private func json(method: String, url: String, body: [UInt8]?) async throws(RuntimeProbeError) -> [String: Any] {
        let request = HTTPRequest(
            method: method, url: url, headers: body == nil ? [] : [("Content-Type", "application/json")], body: body,
            connectTimeout: self.probeTimeout, timeout: self.probeTimeout, maxResponseBytes: 4 * 1024 * 1024)
        let response: HTTPResponse
        do throws(ChatEngineError) {
            response = try await HTTPChatTransport.send(http: self.http, request: request)
        } catch {
            throw RuntimeProbeError(ChatEngineRunner.providerError(error).detail)
        }
        let path = URLComponents(string: url)?.path ?? url
        guard response.head.status == 200 else {
            throw RuntimeProbeError("\(path): HTTP \(response.head.status): "
                + HTTPChatTransport.errorMessage(response.body, status: response.head.status))
        }
        guard let object = JSONText.object(response.body) else {
            throw RuntimeProbeError("\(path) did not answer a JSON object")
        }
        return object
    }

    static func root(_ url: String) -> String {
        var root = url.trimmingCharacters(in: .whitespaces)
        while root.hasSuffix("/") { root.removeLast() }
        if root.hasSuffix("/v1") { root.removeLast(3) }
        return root
    }
}
