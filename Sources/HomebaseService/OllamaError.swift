import HomebaseTransport

/// Why a call to Ollama's management API (or the trial completion) failed. Each description is one line a
/// person can act on; `homebase status`, `homebase init` and `homebase pull` print it as it is.
public enum OllamaError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No connection: the payload names the endpoint and the reason, e.g.
    /// `http://127.0.0.1:11434 (connection refused)`.
    case unreachable(String)
    /// Connected, but no (complete) answer in time: the payload names the endpoint and the limit.
    case timedOut(String)
    /// Ollama answered with an error status; `message` is the body's error text (native `{"error":"..."}`,
    /// the `/v1` `{"error":{"message":...}}`, or the start of a plain-text body).
    case http(status: Int, message: String)
    /// The answer is not what Ollama sends (bad JSON, wrong types, missing fields, too large): the payload
    /// names the endpoint path and what was wrong.
    case malformed(String)
    /// A pull failed after it started (an in-band `{"error":...}` line after HTTP 200, or a stream that ended
    /// before `success`).
    case pull(model: String, message: String)

    public var description: String {
        switch self {
        case .unreachable(let what):
            return "Ollama is not running at \(what) — start it with `ollama serve`"
        case .timedOut(let what):
            return "Ollama at \(what) — it may be loading a model or overloaded; try again"
        case .http(let status, let message):
            return "Ollama answered HTTP \(status): \(message)"
        case .malformed(let what):
            return "unexpected answer from Ollama: \(what) — is this endpoint really Ollama?"
        case .pull(let model, let message):
            // The registry's answer for a name it does not know (reference §1, /api/pull errors).
            if message.contains("file does not exist") {
                return "model '\(model)' not found in the registry (\(message))"
            }
            return "pulling '\(model)' failed: \(message)"
        }
    }

    /// Maps a transport failure of a request to `url` (the endpoint base, for the message).
    /// - Returns: `nil` for a cancellation, which the caller rethrows as `CancellationError`.
    static func transport(_ error: HTTPClientError, endpoint: String, path: String, limit: Duration?,
                          maxBytes: Int) -> OllamaError? {
        switch error {
        case .connectFailed(let message):
            return .unreachable("\(endpoint) (\(Self.shortReason(message)))")
        case .timedOut:
            let after = limit.map { " within \(Self.seconds($0))" } ?? ""
            return .timedOut("\(endpoint) did not answer \(path)\(after)")
        case .cancelled:
            return nil
        case .responseTooLarge:
            return .malformed("\(path) answered with more than \(maxBytes / 1024) KiB")
        case .invalidRequest(let message):
            return .unreachable("\(endpoint) (not a usable URL: \(message))")
        case .transport(_, let message):
            return .unreachable("\(endpoint) (\(Self.shortReason(message)))")
        }
    }

    /// libcurl's messages are long ("Failed to connect to 127.0.0.1 port 1 after 0 ms: Couldn't connect to
    /// server"); a person wants the gist.
    static func shortReason(_ message: String) -> String {
        let lowered = message.lowercased()
        if lowered.contains("couldn't connect") || lowered.contains("connection refused") {
            return "connection refused"
        }
        if lowered.contains("resolve") { return "host name not found" }
        if lowered.contains("timed out") || lowered.contains("timeout") { return "connection timed out" }
        if lowered.contains("reset") || lowered.contains("recv failure") { return "connection reset" }
        return message
    }

    static func seconds(_ duration: Duration) -> String {
        let (s, attoseconds) = duration.components
        if attoseconds == 0 { return "\(s) s" }
        return "\(Double(s) + Double(attoseconds) / 1e18) s"
    }
}
