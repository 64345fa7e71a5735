import Foundation
import HomebaseTransport

/// What one chat request will produce, decided before the first byte is sent.
struct ChatPlan {
    var requestedModel: String
    var model: EmulatedModel
    /// Reasoning tokens sent before the answer (a thinking model with thinking on), already cut to the budget.
    var reasoning: [String] = []
    /// Content tokens to send (already cut to max_tokens / num_predict, after the reasoning's share).
    var tokens: [String]
    /// `stop` or `length`.
    var doneReason: String
    var toolCall: ToolCallPlan?
    var promptTokens: Int
    var fault: EmulatorFault
    var seed: UInt64

    struct ToolCallPlan {
        var id: String
        var name: String
        /// Arguments as a JSON object (native) — `/v1` sends its serialisation as a string.
        var arguments: JSONValue
    }
}

/// How a token stream ended.
enum StreamOutcome {
    /// Every token was sent; the caller sends the final chunk(s).
    case completed
    /// The client left, a stall ended with the client leaving, or the connection was dropped on purpose.
    case cut
    /// `error-after`: the runner failed; the caller ends the stream the surface's way.
    case failed
}

/// What the request asked of a model's thinking: native `think` (bool or `low|medium|high`), `/v1`
/// `reasoning_effort` / `reasoning.effort` (`none` is off).
enum ThinkRequest: Equatable {
    case unset
    case off
    case on(level: String?)

    /// Native `think`; nil when the value is not one Ollama accepts.
    static func native(_ value: Any?) -> ThinkRequest? {
        switch value {
        case nil, is NSNull: return .unset
        case let b as Bool: return b ? .on(level: nil) : .off
        case let s as String where ["low", "medium", "high"].contains(s): return .on(level: s)
        case let s as String where s == "true" || s == "false": return s == "true" ? .on(level: nil) : .off
        default: return nil
        }
    }

    /// `/v1` `reasoning_effort`, else `reasoning.effort`; nil when invalid.
    static func openAI(_ body: [String: Any]) -> ThinkRequest? {
        let effort = body["reasoning_effort"] ?? (body["reasoning"] as? [String: Any])?["effort"]
        switch effort {
        case nil, is NSNull: return .unset
        case let s as String where s == "none": return .off
        case let s as String where ["low", "medium", "high"].contains(s): return .on(level: s)
        default: return nil
        }
    }
}

extension OllamaEmulator {
    /// Faults for one request: the flag, then the header, then markers in the prompt. Returns the prompt
    /// without markers.
    func fault(for request: HTTPServerRequest, prompt: String) -> EmulatorFault {
        self.faultAndPrompt(for: request, prompt: prompt).fault
    }

    func faultAndPrompt(for request: HTTPServerRequest, prompt: String) -> (fault: EmulatorFault, prompt: String) {
        var fault = self.configuration.fault
        if let header = request.header("X-Emulator-Fault"), let parsed = try? EmulatorFault(parsing: header) {
            fault = fault.overridden(by: parsed)
        }
        let (marked, cleaned) = EmulatorFault.extractMarkers(from: prompt)
        return (fault.overridden(by: marked), cleaned)
    }

    /// Text of a message's `content`: a string, or the text parts of an array (the /v1 form).
    static func text(of content: Any?) -> String {
        if let s = content as? String { return s }
        if let parts = content as? [[String: Any]] {
            return parts.compactMap { $0["type"] as? String == "text" ? $0["text"] as? String : nil }.joined(separator: " ")
        }
        return ""
    }

    /// Builds the plan, or returns the error (status, message) to answer before streaming.
    func plan(
        request: HTTPServerRequest, body: [String: Any], messages: [[String: Any]], limit: Int?, think: ThinkRequest?
    ) -> Result<ChatPlan, ChatRefusal> {
        guard let requested = body["model"] as? String, !requested.isEmpty else {
            return .failure(ChatRefusal(status: 400, message: "model is required"))
        }
        if let problem = Self.keepAliveError(body["keep_alive"]) {
            return .failure(ChatRefusal(status: 400, message: problem))
        }
        guard let think else {
            return .failure(ChatRefusal(status: 400, message: "invalid think value"))
        }
        let lastUser = messages.last { $0["role"] as? String == "user" }
        let (fault, prompt) = self.faultAndPrompt(for: request, prompt: Self.text(of: lastUser?["content"]))
        guard let model = self.models.withLock({ $0.find(requested) }), !fault.unknownModel else {
            return .failure(ChatRefusal(status: 404, message: "model '\(requested)' not found"))
        }
        guard model.canComplete else {
            return .failure(ChatRefusal(status: 400, message: "\"\(requested)\" does not support chat"))
        }
        if case .on = think, !model.canThink {
            return .failure(ChatRefusal(status: 400, message: "\"\(requested)\" does not support thinking"))
        }
        if let (status, message) = self.cloudRefusal(model) {
            return .failure(ChatRefusal(status: status, message: message))
        }
        if fault.http500 {
            return .failure(ChatRefusal(status: 500, message: "llama runner process has terminated: exit status 2"))
        }
        let generator = TextGenerator(prompt: prompt, minTokens: self.configuration.answerTokens.lowerBound,
                                      maxTokens: self.configuration.answerTokens.upperBound)
        var tokens = generator.tokens
        var doneReason = "stop"
        // A thinking model thinks unless told not to, and its reasoning spends the budget first.
        var reasoning: [String] = []
        if model.canThink, think != .off {
            let scale = switch think {
            case .on(level: "low"): 0.5
            case .on(level: "high"): 2.0
            default: 1.0
            }
            let count = max(1, Int(Double(self.configuration.reasoningTokens) * scale))
            reasoning = Array(TextGenerator(prompt: "think:" + prompt, minTokens: count, maxTokens: count).tokens)
        }
        if let limit, limit >= 0, limit < reasoning.count + tokens.count {
            reasoning = Array(reasoning.prefix(limit))
            tokens = Array(tokens.prefix(limit - reasoning.count))
            doneReason = "length"
        }
        // A prompt longer than the context served is cut silently (`truncate` defaults to true).
        let promptTokens = min(self.servedContext(model),
                               messages.reduce(0) { $0 + TextGenerator.estimateTokens(Self.text(of: $1["content"])) + 4 })
        var toolCall: ChatPlan.ToolCallPlan?
        if messages.last?["role"] as? String == "user", let tools = body["tools"] as? [[String: Any]] {
            toolCall = Self.toolCall(for: prompt, tools: tools, seed: generator.seed)
            if toolCall != nil { tokens = [] }
        }
        return .success(ChatPlan(
            requestedModel: requested, model: model, reasoning: reasoning, tokens: tokens, doneReason: doneReason, toolCall: toolCall,
            promptTokens: promptTokens, fault: fault, seed: generator.seed))
    }

    struct ChatRefusal: Error {
        let status: Int
        let message: String
    }

    /// A tool call when the prompt names one of the tools (`get_weather`, or `get weather`).
    static func toolCall(for prompt: String, tools: [[String: Any]], seed: UInt64) -> ChatPlan.ToolCallPlan? {
        let lower = prompt.lowercased()
        for tool in tools {
            guard let function = tool["function"] as? [String: Any], let name = function["name"] as? String,
                !name.isEmpty
            else { continue }
            let spaced = name.replacingOccurrences(of: "_", with: " ").lowercased()
            guard lower.contains(name.lowercased()) || lower.contains(spaced) else { continue }
            let parameters = function["parameters"] as? [String: Any]
            let properties = parameters?["properties"] as? [String: Any] ?? [:]
            let required = parameters?["required"] as? [String] ?? properties.keys.sorted()
            // A capitalised word after the first one ("weather in Tokyo") stands in for an extracted value.
            let words = prompt.split(whereSeparator: { !$0.isLetter && !$0.isNumber }).dropFirst()
            let proper = words.last { $0.first?.isUppercase == true }.map(String.init)
            var rng = SplitMix64(state: seed)
            var arguments: [(String, JSONValue)] = []
            for key in required.sorted() {
                let type = (properties[key] as? [String: Any])?["type"] as? String ?? "string"
                switch type {
                case "integer", "number": arguments.append((key, .int(Int(rng.next() % 100))))
                case "boolean": arguments.append((key, .bool(true)))
                default:
                    let fallback = TextGenerator.words[Int(rng.next() % UInt64(TextGenerator.words.count))]
                    arguments.append((key, .string(proper ?? fallback)))
                }
            }
            let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
            let id = "call_" + String((0..<8).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
            return ChatPlan.ToolCallPlan(id: id, name: name, arguments: .object(arguments))
        }
        return nil
    }

    /// Milliseconds between tokens.
    var tokenIntervalMs: Double { 1000.0 / max(0.001, self.configuration.tokensPerSecond) }

    /// Delay before the first token: `--first-token-ms` plus any `slow-load`.
    func firstDelayMs(_ plan: ChatPlan) -> Int {
        self.configuration.firstTokenMs + (plan.fault.slowLoadMs ?? 0)
    }

    /// Paces `count` sends at the configured rate, applying stall and disconnect faults. `send(i)` writes
    /// item `i` and returns false if the client is gone. Sleeps by polling the socket, never spins.
    func paced(_ count: Int, plan: ChatPlan, writer: HTTPResponseWriter, send: (Int) -> Bool) -> StreamOutcome {
        let start = ContinuousClock.now
        let firstDelay = Duration.milliseconds(self.firstDelayMs(plan))
        let interval = Duration.microseconds(Int64(self.tokenIntervalMs * 1000))
        for i in 0...count {
            if plan.fault.stallAfterTokens == i {
                // Keep the connection open and silent until the client gives up (or the server stops).
                while !writer.waitForDisconnect(timeoutMs: 60_000) {}
                return .cut
            }
            if plan.fault.disconnectAfterTokens == i {
                writer.abortConnection()
                return .cut
            }
            if plan.fault.errorAfterTokens == i { return .failed }
            if i == count { break }
            let due = start + firstDelay + interval * i
            let wait = ContinuousClock.now.duration(to: due)
            if wait > .zero {
                let ms = Int(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
                if writer.waitForDisconnect(timeoutMs: ms) { return .cut }
            }
            guard send(i) else { return .cut }
        }
        return .completed
    }
}
