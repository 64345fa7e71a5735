import HomebaseTransport

extension OpenAIChatEngine {
    /// Sent to Ollama as the Bearer token: client SDKs need one, the server ignores it.
    public static let ollamaKey = "ollama"

    /// The one builder of an engine for an Ollama runtime (design.md §R4), used by the Homebase's inference
    /// server and the handset's `OllamaProvider` alike, so both send the same requests: the runtime's `/v1`
    /// (the OpenAI-compatible surface; `/api/*` is management only), `max_tokens` (Ollama ignores
    /// `max_completion_tokens` silently) and the dummy key.
    ///
    /// - Parameters:
    ///   - url: the runtime's base URL, e.g. `http://127.0.0.1:11434`; a trailing `/` or `/v1` is accepted.
    ///   - connectTimeout: for the TCP connection.
    ///   - idleTimeout: silence allowed before giving up; the default tolerates a cold model load.
    ///   - readCadence: paced reads for a server that batches anyway (the Homebase); nil reads as bytes come.
    public static func ollama(http: HTTPClient, url: String, connectTimeout: Duration = .seconds(10),
                              idleTimeout: Duration = OpenAIChatEngine.defaultIdleTimeout,
                              readCadence: HTTPReadCadence? = nil) -> OpenAIChatEngine {
        OpenAIChatEngine(http: http, baseURL: Self.ollamaBase(url), apiKey: { Self.ollamaKey },
                         maxTokensField: .maxTokens, connectTimeout: connectTimeout, idleTimeout: idleTimeout,
                         readCadence: readCadence)
    }

    /// `http://host:11434` → `http://host:11434/v1` (a URL already ending in `/v1` is kept).
    package static func ollamaBase(_ url: String) -> String {
        var root = url.trimmingCharacters(in: .whitespaces)
        while root.hasSuffix("/") { root.removeLast() }
        return root.hasSuffix("/v1") ? root : root + "/v1"
    }
}
