import HomebaseRouter
import HomebaseTransport
import Testing
@testable import HomebaseEngines
@testable import HomebaseService

/// Issue 38, item 8: the daemon's Ollama engine and the handset's `OllamaProvider` come from one builder
/// (`OpenAIChatEngine.ollama`), so for the same runtime URL they send the same request to the same place.
@Suite struct OllamaEngineTests {
    @Test(arguments: ["http://127.0.0.1:11434", "http://127.0.0.1:11434/", "http://127.0.0.1:11434/v1"])
    func theDaemonAndTheHandsetBuildTheSameEngine(url: String) throws {
        let daemon = try #require(HomebaseRunner.Options().makeEngine(url, nil) as? OpenAIChatEngine)
        let handset = OllamaProvider(http: HTTPClient(), url: url, model: "m").engine
        #expect(daemon.baseURL == "http://127.0.0.1:11434/v1")
        #expect(handset.baseURL == daemon.baseURL)
        #expect(daemon.maxTokensField == .maxTokens)
        #expect(handset.maxTokensField == daemon.maxTokensField)
        #expect(daemon.apiKey() == "ollama")
        #expect(handset.apiKey() == daemon.apiKey())
        #expect(handset.connectTimeout == daemon.connectTimeout)
        #expect(handset.idleTimeout == daemon.idleTimeout)
        let request = ChatRequest(messages: [.user("hi")], options: ChatOptions(maxTokens: 7, think: nil))
        #expect(try handset.requestBody(model: "m", request: request) == daemon.requestBody(model: "m", request: request))
    }
}
