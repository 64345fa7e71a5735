import HomebaseTransport
import Testing
@testable import HomebaseService

@Suite struct OllamaErrorTests {
    @Test(arguments: [
        (OllamaError.unreachable("http://127.0.0.1:11434 (connection refused)"),
         "Ollama is not running at http://127.0.0.1:11434 (connection refused) — start it with `ollama serve`"),
        (.timedOut("http://127.0.0.1:11434 did not answer /api/tags within 10 s"),
         "Ollama at http://127.0.0.1:11434 did not answer /api/tags within 10 s — it may be loading a model or "
            + "overloaded; try again"),
        (.http(status: 404, message: "model 'x' not found"), "Ollama answered HTTP 404: model 'x' not found"),
        (.malformed("/api/tags answered with no `models` field"),
         "unexpected answer from Ollama: /api/tags answered with no `models` field — "
            + "is this endpoint really Ollama?"),
        (.pull(model: "x", message: "pull model manifest: file does not exist"),
         "model 'x' not found in the registry (pull model manifest: file does not exist)"),
        (.pull(model: "x", message: "max retries exceeded"), "pulling 'x' failed: max retries exceeded"),
    ] as [(OllamaError, String)])
    func descriptionIsOneActionableLine(error: OllamaError, text: String) {
        #expect(error.description == text)
        #expect(!text.contains("\n"))
    }

    @Test(arguments: [
        (HTTPClientError.connectFailed("Failed to connect to 127.0.0.1 port 1 after 0 ms: Couldn't connect to server"),
         OllamaError.unreachable("http://h:1 (connection refused)")),
        (.connectFailed("Could not resolve host: nosuchhost"), .unreachable("http://h:1 (host name not found)")),
        (.transport(code: 56, message: "Recv failure: Connection reset by peer"),
         .unreachable("http://h:1 (connection reset)")),
        (.timedOut, .timedOut("http://h:1 did not answer /api/ps within 1.5 s")),
        (.responseTooLarge, .malformed("/api/ps answered with more than 8 KiB")),
        (.invalidRequest("bad URL"), .unreachable("http://h:1 (not a usable URL: bad URL)")),
    ] as [(HTTPClientError, OllamaError)])
    func transportFailuresMapToOllamaErrors(failure: HTTPClientError, expected: OllamaError) {
        #expect(OllamaError.transport(failure, endpoint: "http://h:1", path: "/api/ps", limit: .milliseconds(1_500),
                                      maxBytes: 8 * 1024) == expected)
    }

    @Test func cancellationIsNotAnOllamaError() {
        #expect(OllamaError.transport(.cancelled, endpoint: "http://h:1", path: "/", limit: nil, maxBytes: 1) == nil)
    }
}
