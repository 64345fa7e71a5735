import Foundation
import HomebaseTransport

extension OllamaEmulator {
    /// `POST /api/chat`: NDJSON deltas, then `done:true` with `done_reason` and integer-nanosecond metrics
    /// (reference §3). Empty `messages` loads (or, with keep_alive 0, unloads) the model.
    func nativeChat(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        let received = ContinuousClock.now
        let body: [String: Any]
        switch Self.decodeBody(request.body) {
        case .success(let b): body = b
        case .failure(let e): return self.nativeError(writer, 400, e.message)
        }
        let messages = body["messages"] as? [[String: Any]] ?? []
        let options = body["options"] as? [String: Any]
        let plan: ChatPlan
        switch self.plan(request: request, body: body, messages: messages, limit: (options?["num_predict"] as? Int),
                         think: ThinkRequest.native(body["think"])) {
        case .success(let p): plan = p
        case .failure(let refusal): return self.nativeError(writer, refusal.status, refusal.message)
        }
        let stream = (body["stream"] as? Bool) ?? true
        let created = { Self.timestamp(self.configuration.now()) }
        self.markLoaded(plan.model, keepAlive: body["keep_alive"])

        if messages.isEmpty {
            let unload = (Self.keepAliveSeconds(body["keep_alive"]) ?? 1) == 0
            return self.respondJSON(writer, 200, .object([
                ("model", .string(plan.requestedModel)), ("created_at", .string(created())),
                ("message", .object([("role", .string("assistant")), ("content", .string(""))])),
                ("done_reason", .string(unload ? "unload" : "load")), ("done", .bool(true)),
            ]))
        }
        // A load needs no slot; a completion waits for one (`--parallel`), without a byte.
        guard let release = self.acquireSlot(plan.model, writer) else { return }
        defer { release() }

        func message(_ content: String, tool: Bool, thinking: String? = nil) -> JSONValue {
            var fields: [(String, JSONValue)] = [("role", .string("assistant")), ("content", .string(content))]
            if let thinking, !thinking.isEmpty { fields.append(("thinking", .string(thinking))) }
            if tool, let call = plan.toolCall {
                fields.append(("tool_calls", .array([.object([
                    ("id", .string(call.id)),
                    ("function", .object([
                        ("index", .int(0)), ("name", .string(call.name)), ("arguments", call.arguments),
                    ])),
                ])])))
            }
            return .object(fields)
        }
        let thought = plan.reasoning.count
        let items = thought + (plan.toolCall == nil ? plan.tokens.count : 1)
        var firstTokenAt: ContinuousClock.Instant?
        func final(content: String) -> JSONValue {
            let end = ContinuousClock.now
            let first = firstTokenAt ?? end
            let ns = { (d: Duration) in Int(d.components.seconds) * 1_000_000_000 + Int(d.components.attoseconds / 1_000_000_000) }
            let load = max(1, ns(first - received) / 2)
            return .object([
                ("model", .string(plan.requestedModel)), ("created_at", .string(created())),
                ("message", message(content, tool: !stream, thinking: stream ? nil : plan.reasoning.joined())),
                ("done", .bool(true)),
                ("done_reason", .string(plan.doneReason)),
                ("total_duration", .int(max(1, ns(end - received)))), ("load_duration", .int(load)),
                ("prompt_eval_count", .int(plan.promptTokens)),
                ("prompt_eval_duration", .int(max(1, ns(first - received) - load))),
                ("eval_count", .int(max(1, thought + plan.tokens.count))), ("eval_duration", .int(max(1, ns(end - first)))),
            ])
        }

        guard stream else {
            // Generation time passes before the single answer, as on a real server.
            let outcome = self.paced(items, plan: plan, writer: writer) { i in
                if i == 0 { firstTokenAt = .now }
                return true
            }
            guard case .completed = outcome else { return }
            return self.respondJSON(writer, 200, final(content: plan.tokens.joined()))
        }
        guard writer.startStream(status: 200, headers: [Self.ndjsonType], headWithFirstChunk: true) else { return }
        let outcome = self.paced(items, plan: plan, writer: writer) { i in
            if i == 0 { firstTokenAt = .now }
            let body: JSONValue
            if i < thought {
                body = message("", tool: false, thinking: plan.reasoning[i])
            } else {
                body = message(plan.toolCall == nil ? plan.tokens[i - thought] : "", tool: plan.toolCall != nil)
            }
            let chunk: JSONValue = .object([
                ("model", .string(plan.requestedModel)), ("created_at", .string(created())),
                ("message", body), ("done", .bool(false)),
            ])
            return writer.writeChunk(chunk.bytes + [UInt8(ascii: "\n")])
        }
        if case .failed = outcome {
            _ = writer.writeChunk(JSONValue.object([("error", .string("llama runner process has terminated: exit status 2"))]).bytes
                + [UInt8(ascii: "\n")])
            return writer.finish()
        }
        guard case .completed = outcome else { return }
        _ = writer.writeChunk(final(content: "").bytes + [UInt8(ascii: "\n")])
        writer.finish()
    }
}
