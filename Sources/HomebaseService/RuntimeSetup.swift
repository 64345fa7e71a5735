import Foundation
import HomebaseCore
import HomebaseNode
import HomebaseTransport

/// `homebase init --runtime K --endpoint URL` and `homebase config --runtime K --endpoint URL`: which runtime,
/// detected when not named, and test-before-persist (design.md §R4) before the caller stores anything.
public enum RuntimeSetup {
    /// The kind and endpoint to store, once verified. `kindArgument` `nil` or `auto` detects the kind.
    /// - Throws: `UsageError` for a bad argument, `CLIError` (one line saying what to do) when the runtime
    ///   cannot be reached, identified or verified.
    public static func verify(kindArgument: String?, endpoint: String?,
                              defaultEndpoint: String = HomebaseSettings.defaultOllamaURL,
                              http: HTTPClient = HTTPClient(maxIdleConnections: 0)) async throws -> (kind: RuntimeKind, endpoint: String) {
        var url = (endpoint ?? defaultEndpoint).trimmingCharacters(in: .whitespaces)
        while url.hasSuffix("/") { url.removeLast() }
        if url.hasSuffix("/v1") { url.removeLast(3) }
        guard OllamaRuntimeVerifier.isHTTPURL(url) else {
            throw UsageError("--endpoint takes an http:// URL such as http://127.0.0.1:8080, not '\(endpoint ?? "")'")
        }
        let kind: RuntimeKind
        switch kindArgument?.lowercased() {
        case nil, "auto":
            guard let detected = await RuntimeDetection.detect(endpoint: url, http: http) else {
                throw CLIError("nothing at \(url) answers as Ollama (/api/version) or as an OpenAI-compatible server"
                    + " (/v1/models); start it, or name it with --runtime ollama|openai-compatible")
            }
            kind = detected
        case let text?:
            guard let named = RuntimeKind(argument: text) else {
                throw UsageError("--runtime takes ollama, openai-compatible or auto, not '\(text)'")
            }
            kind = named
        }
        let status: RuntimeStatus
        do {
            switch kind {
            case .ollama:
                status = try await OllamaRuntimeVerifier(http: http).verify(endpoint: url)
            case .openAICompatible:
                status = try await OpenAICompatibleVerifier(client: OpenAICompatibleClient(endpoint: url, http: http)).verify()
            }
        } catch {
            throw CLIError("\(kind.rawValue) runtime at \(url) not verified, nothing stored: \(error)")
        }
        let models = status.models.map(\.tag).prefix(5).joined(separator: ", ")
        FileHandle.standardError.write(Data(("verified \(kind.rawValue) runtime at \(url)"
            + (status.version.map { " (\($0))" } ?? "") + ": \(status.models.count) model"
            + (status.models.count == 1 ? "" : "s") + (models.isEmpty ? "" : " (\(models))")
            + (status.knownParallelism.map { ", \($0) parallel slot\($0 == 1 ? "" : "s")" } ?? "") + "\n").utf8))
        return (kind, url)
    }
}
