import Foundation
import HomebaseTransport

extension OllamaEmulator {
    /// One `/v1/models` entry: `created` is `modified_at` in Unix seconds, `owned_by` the namespace.
    func openAIModelObject(_ model: EmulatedModel, _ modifiedAt: Date) -> JSONValue {
        let parts = model.name.split(separator: "/")
        let owner = parts.count >= 2 ? String(parts[parts.count - 2]) : "library"
        return .object([
            ("id", .string(model.name)), ("object", .string("model")),
            ("created", .int(Int(modifiedAt.timeIntervalSince1970))), ("owned_by", .string(owner)),
        ])
    }

    /// `GET /v1/models`; `data` is `null` with no models, as Go marshals a nil slice.
    func openAIModels(_ writer: HTTPResponseWriter) {
        let installed = self.models.withLock { $0.installed }
        let data: JSONValue = installed.isEmpty
            ? .null : .array(installed.map { self.openAIModelObject($0.model, $0.modifiedAt) })
        self.respondJSON(writer, 200, .object([("object", .string("list")), ("data", data)]))
    }

    /// `GET /v1/models/{model}`.
    func openAIModel(_ name: String, _ writer: HTTPResponseWriter) {
        let found = self.models.withLock { s in s.installed.first { $0.model.name == EmulatedModel.normalize(name) } }
        guard let found else { return self.openAIError(writer, 404, "model '\(name)' not found") }
        self.respondJSON(writer, 200, self.openAIModelObject(found.model, found.modifiedAt))
    }

    /// `POST /v1/chat/completions`: SSE chunks as v0.32.6+ (or the legacy shape), `data: [DONE]`, the usage
    /// chunk only with `stream_options.include_usage`; or one `chat.completion` object (reference §2).
    func openAIChat(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        let body: [String: Any]
        switch Self.decodeBody(request.body) {
        case .success(let b): body = b
        case .failure(let e): return self.openAIError(writer, 400, e.message)
        }
        guard let messages = body["messages"] as? [[String: Any]], !messages.isEmpty else {
            return self.openAIError(writer, 400, "[] is too short - 'messages'")
        }
        let plan: ChatPlan
        let limit = (body["max_completion_tokens"] as? Int) ?? (body["max_tokens"] as? Int)
        switch self.plan(request: request, body: body, messages: messages, limit: limit, think: ThinkRequest.openAI(body)) {
        case .success(let p): plan = p
        case .failure(let refusal): return self.openAIError(writer, refusal.status, refusal.message)
        }
        // One request at a time per model (`--parallel`): the rest wait here, without a byte.
        guard let release = self.acquireSlot(plan.model, writer) else { return }
        defer { release() }
        self.markLoaded(plan.model, keepAlive: body["keep_alive"])
        let id = "chatcmpl-\(plan.seed % 999)"
        let created = Int(self.configuration.now().timeIntervalSince1970)
        let finishReason = plan.doneReason == "length" ? "length" : (plan.toolCall != nil ? "tool_calls" : "stop")
        let generated = plan.reasoning.count + plan.tokens.count
        let usage: JSONValue = .object([
            ("prompt_tokens", .int(plan.promptTokens)), ("completion_tokens", .int(generated)),
            ("total_tokens", .int(plan.promptTokens + generated)),
        ])
        let toolCalls: JSONValue? = plan.toolCall.map { call in
            .array([.object([
                ("id", .string(call.id)), ("index", .int(0)), ("type", .string("function")),
                ("function", .object([("name", .string(call.name)), ("arguments", .string(call.arguments.serialized()))])),
            ])])
        }
        let thought = plan.reasoning.count
        let items = thought + (plan.toolCall == nil ? plan.tokens.count : 1)

        guard (body["stream"] as? Bool) == true else {
            let outcome = self.paced(items, plan: plan, writer: writer) { _ in true }
            guard case .completed = outcome else { return }
            var message: [(String, JSONValue)] = [
                ("role", .string("assistant")), ("content", .string(plan.tokens.joined())),
            ]
            if thought > 0 { message.append(("reasoning", .string(plan.reasoning.joined()))) }
            if let toolCalls { message.append(("tool_calls", toolCalls)) }
            return self.respondJSON(writer, 200, .object([
                ("id", .string(id)), ("object", .string("chat.completion")), ("created", .int(created)),
                ("model", .string(plan.requestedModel)), ("system_fingerprint", .string("fp_ollama")),
                ("choices", .array([.object([
                    ("index", .int(0)), ("message", .object(message)), ("finish_reason", .string(finishReason)),
                ])])),
                ("usage", usage),
            ]))
        }

        let includeUsage = ((body["stream_options"] as? [String: Any])?["include_usage"] as? Bool) == true
        let legacy = self.configuration.legacyChunks
        func chunk(_ choices: [JSONValue], usage: JSONValue? = nil) -> [UInt8] {
            var fields: [(String, JSONValue)] = [
                ("id", .string(id)), ("object", .string("chat.completion.chunk")), ("created", .int(created)),
                ("model", .string(plan.requestedModel)), ("system_fingerprint", .string("fp_ollama")),
                ("choices", .array(choices)),
            ]
            if let usage { fields.append(("usage", usage)) }
            return Array("data: ".utf8) + JSONValue.object(fields).bytes + Array("\n\n".utf8)
        }
        func choice(_ delta: [(String, JSONValue)], finish: String?) -> JSONValue {
            .object([("index", .int(0)), ("delta", .object(delta)), ("finish_reason", finish.map { .string($0) } ?? .null)])
        }
        guard writer.startStream(status: 200, headers: [Self.sseType], headWithFirstChunk: true) else { return }
        let outcome = self.paced(items, plan: plan, writer: writer) { i in
            var delta: [(String, JSONValue)] = []
            if i == 0 || legacy { delta.append(("role", .string("assistant"))) }
            if i < thought {
                // Reasoning streams with an empty content until the answer starts.
                delta.append(("content", .string("")))
                delta.append(("reasoning", .string(plan.reasoning[i])))
            } else if let toolCalls {
                delta.append(("content", .string("")))
                delta.append(("tool_calls", toolCalls))
            } else {
                delta.append(("content", .string(plan.tokens[i - thought])))
            }
            return writer.writeChunk(chunk([choice(delta, finish: nil)]))
        }
        if case .failed = outcome {
            // A stream that fails after it started: an empty delta, no finish_reason, no [DONE].
            _ = writer.writeChunk(chunk([choice([], finish: nil)]))
            return writer.finish()
        }
        guard case .completed = outcome else { return }
        if legacy {
            _ = writer.writeChunk(chunk([choice(
                [("role", .string("assistant")), ("content", .string(""))], finish: finishReason)]))
        } else {
            _ = writer.writeChunk(chunk([choice([], finish: finishReason)]))
        }
        if includeUsage { _ = writer.writeChunk(chunk([], usage: usage)) }
        _ = writer.writeChunk(Array("data: [DONE]\n\n".utf8))
        writer.finish()
    }
}
