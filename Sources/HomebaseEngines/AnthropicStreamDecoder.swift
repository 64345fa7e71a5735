import Foundation
import HomebaseCore

/// Decodes an Anthropic Messages SSE stream (reference/model-apis.md §5).
///
/// `message_start` brings the input tokens; text blocks stream `text_delta`s; a `tool_use` block's
/// `input_json_delta.partial_json` pieces are joined per `index` and parsed at `content_block_stop` (nothing
/// joined reads as `{}`), then re-serialised compactly as `ToolCall.arguments`. `message_delta` carries the
/// stop reason and the cumulative output tokens (the last one wins); `message_stop` completes the answer.
/// `ping`, thinking/signature/citation deltas and unknown event types are ignored; an `error` event is
/// `midStream(message)`; a body that ends before `message_stop` is `midStream("stream ended early")`.
///
/// Stop reasons: `end_turn`, `stop_sequence`, `pause_turn`, `refusal` → `.stop`; `max_tokens` and
/// `model_context_window_exceeded` → `.length`; `tool_use` → `.toolCalls`.
package struct AnthropicStreamDecoder: ChatStreamDecoder {
    private enum Block {
        case text
        case toolUse(id: String, name: String, json: String)
        case other
    }

    private var blocks: [Int: Block] = [:]
    private var inputTokens = 0
    private var outputTokens = 0
    private var stopReason: FinishReason?
    private var started = false
    package private(set) var isComplete = false

    package init() {}

    package mutating func decode(_ event: SSEEvent) throws(ChatEngineError) -> [ChatEngineEvent] {
        guard let object = JSONText.object(event.data) else { throw .malformed("event data is not a JSON object") }
        let type = try JSONText.string(object["type"], "type") ?? event.event ?? ""
        switch type {
        case "message_start":
            guard let message = try JSONText.dict(object["message"], "message") else {
                throw .malformed("message_start has no message")
            }
            self.started = true
            if let usage = try JSONText.dict(message["usage"], "message.usage") {
                self.inputTokens = try JSONText.int(usage["input_tokens"], "usage.input_tokens") ?? 0
                self.outputTokens = try JSONText.int(usage["output_tokens"], "usage.output_tokens") ?? 0
            }
            return []
        case "content_block_start":
            let index = try Self.index(object)
            guard let block = try JSONText.dict(object["content_block"], "content_block") else {
                throw .malformed("content_block_start has no content_block")
            }
            switch try JSONText.string(block["type"], "content_block.type") {
            case "text":
                self.blocks[index] = .text
                let text = try JSONText.string(block["text"], "content_block.text") ?? ""
                return text.isEmpty ? [] : [.text(text)]
            case "tool_use":
                guard let id = try JSONText.string(block["id"], "tool_use.id"),
                    let name = try JSONText.string(block["name"], "tool_use.name"), !name.isEmpty
                else { throw .malformed("tool_use block without id or name") }
                self.blocks[index] = .toolUse(id: id, name: name, json: "")
            default:
                self.blocks[index] = .other
            }
            return []
        case "content_block_delta":
            let index = try Self.index(object)
            guard let delta = try JSONText.dict(object["delta"], "delta") else {
                throw .malformed("content_block_delta has no delta")
            }
            switch try JSONText.string(delta["type"], "delta.type") {
            case "text_delta":
                let text = try JSONText.string(delta["text"], "delta.text") ?? ""
                return text.isEmpty ? [] : [.text(text)]
            case "input_json_delta":
                guard case .toolUse(let id, let name, let json)? = self.blocks[index] else {
                    throw .malformed("input_json_delta for block \(index), which is not a tool_use")
                }
                let piece = try JSONText.string(delta["partial_json"], "delta.partial_json") ?? ""
                self.blocks[index] = .toolUse(id: id, name: name, json: json + piece)
                return []
            default:
                return []
            }
        case "content_block_stop":
            let index = try Self.index(object)
            guard case .toolUse(let id, let name, let json)? = self.blocks[index] else { return [] }
            self.blocks[index] = .other
            return [.toolCall(ToolCall(id: id, name: name, arguments: RawJSON(try Self.arguments(json, name: name))))]
        case "message_delta":
            if let delta = try JSONText.dict(object["delta"], "delta"),
                let reason = try JSONText.string(delta["stop_reason"], "delta.stop_reason")
            {
                self.stopReason = Self.reason(reason)
            }
            if let usage = try JSONText.dict(object["usage"], "usage") {
                if let output = try JSONText.int(usage["output_tokens"], "usage.output_tokens") {
                    self.outputTokens = output
                }
                if let input = try JSONText.int(usage["input_tokens"], "usage.input_tokens") {
                    self.inputTokens = input
                }
            }
            return []
        case "message_stop":
            guard self.started else { throw .malformed("message_stop before message_start") }
            self.isComplete = true
            return [.finished(self.stopReason ?? .stop,
                              Usage(promptTokens: self.inputTokens, completionTokens: self.outputTokens))]
        case "error":
            throw .midStream(JSONText.errorMessage(object["error"]) ?? "error event")
        default:
            return []  // ping, and event types newer than this client
        }
    }

    package mutating func endOfStream() throws(ChatEngineError) -> [ChatEngineEvent] {
        guard self.isComplete else { throw .midStream("stream ended early") }
        return []
    }

    private static func index(_ object: [String: Any]) throws(ChatEngineError) -> Int {
        guard let index = try JSONText.int(object["index"], "index"), index >= 0 else {
            throw .malformed("content block event without index")
        }
        return index
    }

    /// Joined `partial_json` → compact object text; empty → `{}`.
    static func arguments(_ json: String, name: String) throws(ChatEngineError) -> String {
        let text = json.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return "{}" }
        guard let object = JSONText.object(text), let compact = JSONText.serialize(object) else {
            throw .malformed("tool_use \(name) input is not a JSON object")
        }
        return compact
    }

    static func reason(_ text: String) -> FinishReason {
        switch text {
        case "max_tokens", "model_context_window_exceeded": return .length
        case "tool_use": return .toolCalls
        default: return .stop
        }
    }
}
