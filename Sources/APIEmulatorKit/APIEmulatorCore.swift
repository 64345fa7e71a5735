import Foundation
import HomebaseCore
import HomebaseTransport
import Synchronization

/// The parts the OpenAI and Anthropic emulators share: the server, the recorded requests and counters, the
/// current fault, deterministic answers and token pacing.
final class APIEmulatorCore: Sendable {
    struct State: Sendable {
        var stats = APIEmulatorStats()
        var fault: APIEmulatorFault?
        var server: SimpleHTTPServer?
    }

    let configuration: APIEmulatorConfiguration
    let state: Mutex<State>

    init(configuration: APIEmulatorConfiguration) {
        self.configuration = configuration
        self.state = Mutex(State(fault: configuration.fault))
    }

    func start(handler: @escaping SimpleHTTPServer.Handler) throws -> UInt16 {
        let server = SimpleHTTPServer { [self] request, writer in
            self.record(request)
            handler(request, writer)
        }
        let port = try server.start(host: "127.0.0.1", port: 0)
        self.state.withLock { $0.server = server }
        return port
    }

    func stop() {
        let server = self.state.withLock { s -> SimpleHTTPServer? in
            defer { s.server = nil }
            return s.server
        }
        server?.stop()
    }

    var stats: APIEmulatorStats { self.state.withLock { $0.stats } }
    var fault: APIEmulatorFault? { self.state.withLock { $0.fault } }
    func setFault(_ fault: APIEmulatorFault?) { self.state.withLock { $0.fault = fault } }
    func countCompletion() { self.state.withLock { $0.stats.completions += 1 } }
    func countModelListing() { self.state.withLock { $0.stats.modelListings += 1 } }

    private func record(_ request: HTTPServerRequest) {
        let headers = request.head.headers.map { ($0.name.lowercased(), $0.value) }
        let recorded = RecordedRequest(method: request.method, path: request.path, headers: headers, body: request.body)
        self.state.withLock { $0.stats.requests.append(recorded) }
    }

    /// How a paced stream ended.
    enum Outcome {
        case completed
        /// The fault asks for the API's in-stream error now.
        case error
        /// The client left, or the fault dropped or stalled the connection.
        case cut
    }

    /// Sends `count` items through `send`, applying the token delay and the stream faults. Sleeps by
    /// polling the socket, never spins; notes a departed client in the stats.
    func paced(_ count: Int, fault: APIEmulatorFault?, writer: HTTPResponseWriter, send: (Int) -> Bool) -> Outcome {
        for i in 0...count {
            switch fault {
            case .midStreamError(let n)? where n == i:
                return .error
            case .stall(let n)? where n == i:
                while !writer.waitForDisconnect(timeoutMs: 60_000) {}
                self.noteGone()
                return .cut
            case .disconnect(let n)? where n == i:
                writer.abortConnection()
                return .cut
            default:
                break
            }
            if i == count { break }
            if self.configuration.tokenDelayMs > 0, writer.waitForDisconnect(timeoutMs: self.configuration.tokenDelayMs) {
                self.noteGone()
                return .cut
            }
            guard send(i) else {
                self.noteGone()
                return .cut
            }
        }
        return .completed
    }

    func noteGone() { self.state.withLock { $0.stats.clientsGone += 1 } }

    /// Answers the raw-stream fault: 200 SSE with exactly `text`, then the end of the body.
    func sendRaw(_ text: String, writer: HTTPResponseWriter) {
        guard writer.startStream(status: 200, headers: Self.sseHeaders) else { return }
        _ = writer.writeChunk(Array(text.utf8))
        writer.finish()
    }

    static let sseHeaders = [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache")]
    static let jsonType = ("Content-Type", "application/json")
}

/// Deterministic model output: a hash of the prompt picks the words, so the same prompt always gets the same
/// answer and a test can predict it.
public enum EmulatorText {
    /// The answer's tokens for `prompt`: words, each after the first with a leading space.
    public static func tokens(for prompt: String) -> [String] {
        var state = self.hash(prompt)
        func next() -> UInt64 {
            state = state &+ 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let count = 6 + Int(next() % 10)
        return (0..<count).map { i in
            var word = self.words[Int(next() % UInt64(self.words.count))]
            if i == 0 { word = word.prefix(1).uppercased() + word.dropFirst() }
            if i == count - 1 { word += "." }
            return i == 0 ? word : " " + word
        }
    }

    /// The whole answer for `prompt`.
    public static func answer(for prompt: String) -> String { self.tokens(for: prompt).joined() }

    /// A rough token count of `text` for usage figures.
    static func estimateTokens(_ text: String) -> Int {
        max(1, text.split(whereSeparator: { $0 == " " || $0 == "\n" }).count)
    }

    static func hash(_ text: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in text.utf8 {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01B3
        }
        return h
    }

    /// The tool a prompt names (`get_weather` or `get weather`), from tool names.
    static func namedTool(in prompt: String, names: [String]) -> String? {
        let lower = prompt.lowercased()
        return names.first { name in
            !name.isEmpty
                && (lower.contains(name.lowercased()) || lower.contains(name.replacingOccurrences(of: "_", with: " ").lowercased()))
        }
    }

    /// Arguments for a tool call: each required (else each) property of `schema`; a string gets the prompt's
    /// last capitalised word after the first ("weather in Paris" → "Paris"), else "Paris".
    static func arguments(prompt: String, schema: [String: Any]?) -> EmulatorJSON {
        let properties = schema?["properties"] as? [String: Any] ?? [:]
        let required = schema?["required"] as? [String] ?? properties.keys.sorted()
        let words = prompt.split(whereSeparator: { !$0.isLetter && !$0.isNumber }).dropFirst()
        let proper = words.last { $0.first?.isUppercase == true }.map(String.init) ?? "Paris"
        return .object(required.sorted().map { key in
            switch (properties[key] as? [String: Any])?["type"] as? String {
            case "integer", "number": return (key, .int(Int(self.hash(prompt + key) % 100)))
            case "boolean": return (key, .bool(true))
            default: return (key, .string(proper))
            }
        })
    }

    /// Splits `text` into pieces of at most `size` characters (fragmented tool-call arguments).
    static func pieces(_ text: String, size: Int) -> [String] {
        var out: [String] = []
        var rest = Substring(text)
        while !rest.isEmpty {
            out.append(String(rest.prefix(size)))
            rest = rest.dropFirst(size)
        }
        return out
    }

    static let words = [
        "the", "model", "answers", "quietly", "from", "home", "over", "a", "relay", "that", "sees", "only",
        "ciphertext", "and", "every", "token", "arrives", "in", "order", "while", "phone", "waits", "river",
        "stone", "signal", "garden", "window", "bright", "steady", "clear", "simple", "answer", "network",
    ]

    /// The text of a message's `content`: a string, or the text parts of an array of blocks/parts.
    static func text(of content: Any?) -> String {
        if let string = content as? String { return string }
        if let parts = content as? [[String: Any]] {
            return parts.compactMap { $0["text"] as? String }.joined(separator: " ")
        }
        return ""
    }
}
