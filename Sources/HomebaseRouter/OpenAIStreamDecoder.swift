import Foundation
import HomebaseCore

/// Decodes a Chat Completions SSE stream (OpenAI, and Ollama's `/v1`; reference/model-apis.md §2, §4).
///
/// Accepts both chunk shapes: the current one (role only in the first delta, `finish_reason` on its own
/// chunk with an empty delta) and Ollama ≤ v0.32.5's (role in every delta, `finish_reason` on the last
/// content chunk). Tool-call deltas are joined per `index`: the first fragment brings `id` and
/// `function.name`, later ones only `arguments` pieces; Ollama's whole-in-one-chunk calls are the same path
/// with one fragment. Unknown fields (`obfuscation`, `system_fingerprint`, …) are ignored, and so are
/// choices other than index 0 (the engine never asks for `n > 1`).
///
/// Finish reasons: `stop` → `.stop`, `length` → `.length`, `tool_calls` and the deprecated `function_call` →
/// `.toolCalls`, and `content_filter` → `.stop` (the text so far is the answer; a filtered answer is not a
/// failure to fall back from). A `stop` with tool calls becomes `.toolCalls`, as Ollama itself reports it.
///
/// Ending: `data: [DONE]` completes the answer. A body that ends after a `finish_reason` but before
/// `[DONE]` is accepted (the usage chunk may be missing); one that ends before any `finish_reason` is
/// `midStream("stream ended early")`. An `{"error":…}` chunk after the 200 is `midStream(message)`.
struct OpenAIStreamDecoder: ChatStreamDecoder {
    private struct PartialCall {
        var id: String?
        var name: String = ""
        var arguments: String = ""
    }

    private var calls: [Int: PartialCall] = [:]
    private var finish: FinishReason?
    private var usage: Usage?
    private var callsEmitted = false
    private(set) var isComplete = false

    mutating func decode(_ event: SSEEvent) throws(ChatEngineError) -> [ChatEngineEvent] {
        // Hot path (one event per token): no NSString trimming unless there is whitespace to trim.
        let raw = event.data
        let data = raw.first?.isWhitespace == true || raw.last?.isWhitespace == true
            ? raw.trimmingCharacters(in: .whitespaces) : raw
        if data == "[DONE]" {
            self.isComplete = true
            // A server that says DONE without a finish_reason still finished: treat it as a plain stop.
            return try self.emitCalls() + [.finished(self.finalReason(self.finish ?? .stop), self.usage)]
        }
        if let fast = self.decodeCommonChunk(data) { return fast }
        guard let chunk = JSONText.object(data) else { throw .malformed("chunk is not a JSON object") }
        if let error = chunk["error"], !(error is NSNull) {
            throw .midStream(JSONText.errorMessage(error) ?? "error event")
        }
        if let usage = try JSONText.dict(chunk["usage"], "usage") {
            self.usage = try Self.usage(usage)
        }
        var out: [ChatEngineEvent] = []
        for (position, raw) in (try JSONText.array(chunk["choices"], "choices") ?? []).enumerated() {
            guard let choice = raw as? [String: Any] else { throw .malformed("choice is not an object") }
            guard (try JSONText.int(choice["index"], "choices.index") ?? position) == 0 else { continue }
            if let delta = try JSONText.dict(choice["delta"], "delta") {
                if let content = try JSONText.string(delta["content"], "delta.content"), !content.isEmpty {
                    out.append(.text(content))
                }
                for (slot, rawCall) in (try JSONText.array(delta["tool_calls"], "delta.tool_calls") ?? []).enumerated() {
                    try self.absorb(rawCall, slot: slot)
                }
            }
            if let reason = try JSONText.string(choice["finish_reason"], "finish_reason") {
                self.finish = Self.reason(reason)
                out += try self.emitCalls()
            }
        }
        return out
    }

    /// The shape of nearly every chunk (text deltas, the finish chunk, the usage chunk), read with the small
    /// `JSONNode` parser instead of `JSONSerialization`'s dictionaries. Returns nil for anything else (tool
    /// calls, errors, unexpected types), which then takes the general path with its precise error reporting.
    private mutating func decodeCommonChunk(_ data: String) -> [ChatEngineEvent]? {
        guard let chunk = try? JSONNode.parse(data), chunk.isObject else { return nil }
        if let error = chunk["error"], !error.isNull { return nil }
        var out: [ChatEngineEvent] = []
        var finish: FinishReason?
        if let choices = chunk["choices"], !choices.isNull {
            guard let items = choices.arrayValue else { return nil }
            for (position, choice) in items.enumerated() {
                guard choice.isObject else { return nil }
                var index = position
                if let value = choice["index"], !value.isNull {
                    guard let int = value.intValue else { return nil }
                    index = int
                }
                guard index == 0 else { continue }
                if let delta = choice["delta"], !delta.isNull {
                    guard delta.isObject else { return nil }
                    if let calls = delta["tool_calls"], !calls.isNull {
                        guard let items = calls.arrayValue, items.isEmpty else { return nil }
                    }
                    if let content = delta["content"], !content.isNull {
                        guard let text = content.stringValue else { return nil }
                        if !text.isEmpty { out.append(.text(text)) }
                    }
                }
                if let reason = choice["finish_reason"], !reason.isNull {
                    // Joined tool calls are emitted (and checked) by the general path.
                    guard let text = reason.stringValue, self.calls.isEmpty else { return nil }
                    finish = Self.reason(text)
                }
            }
        }
        var usage: Usage?
        if let object = chunk["usage"], !object.isNull {
            guard let prompt = object["prompt_tokens"]?.intValue, let completion = object["completion_tokens"]?.intValue,
                prompt >= 0, completion >= 0
            else { return nil }
            usage = Usage(promptTokens: prompt, completionTokens: completion)
        }
        // Only now, when the whole chunk was understood, does it change the decoder's state.
        if let finish { self.finish = finish }
        if let usage { self.usage = usage }
        return out
    }

    mutating func endOfStream() throws(ChatEngineError) -> [ChatEngineEvent] {
        guard !self.isComplete else { return [] }
        guard let finish = self.finish else { throw .midStream("stream ended early") }
        self.isComplete = true
        return try self.emitCalls() + [.finished(self.finalReason(finish), self.usage)]
    }

    private mutating func absorb(_ raw: Any, slot: Int) throws(ChatEngineError) {
        guard let call = raw as? [String: Any] else { throw .malformed("tool call delta is not an object") }
        let index = try JSONText.int(call["index"], "tool_calls.index") ?? slot
        var partial = self.calls[index] ?? PartialCall()
        if let id = try JSONText.string(call["id"], "tool_calls.id"), !id.isEmpty, partial.id == nil {
            partial.id = id
        }
        if let function = try JSONText.dict(call["function"], "tool_calls.function") {
            if let name = try JSONText.string(function["name"], "function.name"), !name.isEmpty {
                partial.name = name
            }
            if let piece = try JSONText.string(function["arguments"], "function.arguments") {
                partial.arguments += piece
            } else if let object = try JSONText.dict(function["arguments"], "function.arguments") {
                // Not OpenAI's shape (a string), but some servers send the object: accept it whole.
                partial.arguments += JSONText.serialize(object) ?? "{}"
            }
        }
        self.calls[index] = partial
    }

    /// The joined tool calls, once; arguments must be a JSON object (the API warns they may be invalid).
    private mutating func emitCalls() throws(ChatEngineError) -> [ChatEngineEvent] {
        guard !self.callsEmitted else { return [] }
        self.callsEmitted = true
        var out: [ChatEngineEvent] = []
        for (index, call) in self.calls.sorted(by: { $0.key < $1.key }) {
            guard !call.name.isEmpty else { throw .malformed("tool call \(index) has no name") }
            let text = call.arguments.trimmingCharacters(in: .whitespacesAndNewlines)
            let arguments = text.isEmpty ? "{}" : text
            guard JSONText.object(arguments) != nil else {
                throw .malformed("tool call \(call.name) arguments are not a JSON object")
            }
            out.append(.toolCall(ToolCall(id: call.id ?? "call_\(index)", name: call.name,
                                          arguments: RawJSON(arguments))))
        }
        return out
    }

    private func finalReason(_ reason: FinishReason) -> FinishReason {
        reason == .stop && !self.calls.isEmpty ? .toolCalls : reason
    }

    static func reason(_ text: String) -> FinishReason {
        switch text {
        case "length": return .length
        case "tool_calls", "function_call": return .toolCalls
        default: return .stop  // stop, content_filter, and anything newer
        }
    }

    static func usage(_ object: [String: Any]) throws(ChatEngineError) -> Usage {
        Usage(promptTokens: try JSONText.int(object["prompt_tokens"], "usage.prompt_tokens") ?? 0,
              completionTokens: try JSONText.int(object["completion_tokens"], "usage.completion_tokens") ?? 0)
    }
}
