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
/// Reasoning: `delta.reasoning` (Ollama) and `delta.reasoning_content` (llama-server, vLLM) are `.reasoning`
/// events, before the chunk's text.
///
/// Finish reasons: `stop` → `.stop`, `length` → `.length`, `tool_calls` and the deprecated `function_call` →
/// `.toolCalls`, and `content_filter` → `.stop` (the text so far is the answer; a filtered answer is not a
/// failure to fall back from). A `stop` with tool calls becomes `.toolCalls`, as Ollama itself reports it.
///
/// Ending: `data: [DONE]` completes the answer. A body that ends after a `finish_reason` but before
/// `[DONE]` is accepted (the usage chunk may be missing); one that ends before any `finish_reason` is
/// `midStream("stream ended early")`. An `{"error":…}` chunk after the 200 is `midStream(message)`.
package struct OpenAIStreamDecoder: ChatStreamDecoder {
    private struct PartialCall {
        var id: String?
        var name: String = ""
        var arguments: String = ""
    }

    private var calls: [Int: PartialCall] = [:]
    private var finish: FinishReason?
    private var usage: Usage?
    private var callsEmitted = false
    package private(set) var isComplete = false
    /// Off only in tests and the fuzz harness, which check the fast path against the general one.
    package var usesFastPath = true
    /// The layout of the last plain text chunk read in full, for the next ones (`ChunkTemplate`).
    private var template = ChunkTemplate()
    /// Chunks read through `template` so far (tests check it is used).
    private(set) var templateReads = 0

    package init() {}

    package mutating func decode(_ event: SSEEvent) throws(ChatEngineError) -> [ChatEngineEvent] {
        // Hot path (one event per token): no NSString trimming unless there is whitespace to trim.
        let raw = event.data
        // A Character's Unicode properties are looked up only when an end byte may be whitespace.
        let mayTrim = { (byte: UInt8?) in byte.map(Self.mayBeWhitespace) ?? false }
        let data = (mayTrim(raw.utf8.first) || mayTrim(raw.utf8.last))
            && (raw.first?.isWhitespace == true || raw.last?.isWhitespace == true)
            ? raw.trimmingCharacters(in: .whitespaces) : raw
        if data == "[DONE]" { return try self.done() }
        if self.usesFastPath {
            var data = data
            var out: [ChatEngineEvent] = []
            if data.withUTF8({ self.decodeCommonChunk($0, into: &out) }) { return out }
        }
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
                // Reasoning comes before the answer's text when a chunk has both.
                for key in ["reasoning", "reasoning_content"] {
                    if let thought = try JSONText.string(delta[key], "delta.\(key)"), !thought.isEmpty {
                        out.append(.reasoning(thought))
                    }
                }
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

    /// `decode` of a nameless event's data, read in place: the per-token path (`SSEParser.takeSimpleEvents`).
    /// Data with nothing to trim that is `[DONE]` or a chunk of the common shape is read from the bytes; the
    /// rest goes through `decode` as a String, so the outcome is `decode`'s in every case.
    package mutating func decodeData(_ data: UnsafeBufferPointer<UInt8>, into events: inout [ChatEngineEvent])
        throws(ChatEngineError)
    {
        if self.usesFastPath, let first = data.first, let last = data.last,
            !Self.mayBeWhitespace(first), !Self.mayBeWhitespace(last)
        {
            if data.elementsEqual("[DONE]".utf8) {
                events += try self.done()
                return
            }
            if let text = self.template.text(of: data) {
                self.templateReads += 1
                if !text.isEmpty { events.append(.text(text)) }
                return
            }
            if self.decodeCommonChunk(data, into: &events) { return }
        }
        events += try self.decode(SSEEvent(event: nil, data: String(decoding: data, as: UTF8.self)))
    }

    /// The shape of nearly every chunk (text deltas, the finish chunk, the usage chunk), read in one pass with
    /// `JSONReader` (no tree, no dictionaries; the whole text is still checked), its events appended to
    /// `events`. False (nothing appended, no state changed) for anything else (tool calls, errors, unexpected
    /// types), which then takes the general path with its precise error reporting. Where a key repeats, the
    /// last one counts, as in the general path.
    private mutating func decodeCommonChunk(_ data: UnsafeBufferPointer<UInt8>, into events: inout [ChatEngineEvent]) -> Bool {
        let mark = events.count
        guard let (finish, usage, content) = self.readCommonChunk(data, into: &events) else {
            events.removeSubrange(mark...)
            return false
        }
        // Only now, when the whole chunk was understood, does it change the decoder's state. A finish read here
        // had no tool call pending (`readCommonChunk`): the general path's `emitCalls` would have emitted none
        // and closed the calls, and so does this one.
        if let finish {
            self.finish = finish
            self.callsEmitted = true
        }
        if let usage { self.usage = usage }
        // A chunk that only brings text: the next ones are likely the same bytes around other text. (A server
        // that varies other bytes per chunk, as OpenAI's `obfuscation` does, misses each time: the full read,
        // and a re-learning that reuses the storage.)
        if let content {
            self.template.learn(data, content: content)
        } else {
            self.template.forget()
        }
        return true
    }

    /// The text of choice 0 appended to `events`, and the chunk's finish reason and usage; nil (the caller
    /// takes back what was appended) when the chunk is not of the common shape. `content` is where the text's
    /// string (quotes included) sits when the chunk brings that text and nothing else (`ChunkTemplate`).
    private func readCommonChunk(
        _ data: UnsafeBufferPointer<UInt8>, into events: inout [ChatEngineEvent]
    ) -> (finish: FinishReason?, usage: Usage?, content: Range<Int>?)? {
        guard let scan = try? JSONReader.read(data, { (reader: inout JSONReader) throws(JSONReader.ParseError) in
            try CommonChunk.read(&reader)
        }), !scan.error else { return nil }
        var content: Range<Int>?
        if let choices = scan.choices, choices.count == 1, choices[0].index == 0, case .absent = choices[0].finish,
            case .absent = scan.usage
        {
            content = choices[0].contentRange
        }
        var finish: FinishReason?
        for choice in scan.choices ?? [] {
            guard let index = choice.index else { return nil }
            guard index == 0 else { continue }
            guard let delta = choice.delta else { return nil }
            if let text = delta, !text.isEmpty { events.append(.text(text)) }
            switch choice.finish {
            case .absent: break
            case .invalid: return nil
            case .reason(let text):
                // Joined tool calls are emitted (and checked) by the general path.
                guard self.calls.isEmpty else { return nil }
                finish = Self.reason(text)
            }
        }
        switch scan.usage {
        case .absent: return (finish, nil, content)
        case .usage(let usage): return (finish, usage, nil)
        case .invalid: return nil
        }
    }

    /// The terminator: the joined tool calls, then `finished`. A server that says DONE without a finish_reason
    /// still finished: a plain stop.
    private mutating func done() throws(ChatEngineError) -> [ChatEngineEvent] {
        self.isComplete = true
        return try self.emitCalls() + [.finished(self.finalReason(self.finish ?? .stop), self.usage)]
    }

    /// Whether `byte`, first or last in an event's data, may be whitespace `decode` trims: only a space, a tab
    /// or a non-ASCII byte (the start of a Unicode space) can be.
    private static func mayBeWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte >= 0x80 }

    package mutating func endOfStream() throws(ChatEngineError) -> [ChatEngineEvent] {
        guard !self.isComplete else { return [] }
        guard let finish = self.finish else { throw .midStream("stream ended early") }
        self.isComplete = true
        return try self.emitCalls() + [.finished(self.finalReason(finish), self.usage)]
    }

    private mutating func absorb(_ raw: Any, slot: Int) throws(ChatEngineError) {
        guard let call = raw as? [String: Any] else { throw .malformed("tool call delta is not an object") }
        // The calls were joined and emitted at finish_reason: a later piece of one could only be dropped, and a
        // tool call must not be lost silently.
        guard !self.callsEmitted else { throw .malformed("a tool call delta after finish_reason") }
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

/// What `decodeCommonChunk` needs from a chunk, read in one pass. A field that is present but not of the
/// common shape is recorded as such, and the chunk goes to the general path.
private struct CommonChunk {
    enum Finish {
        case absent
        case reason(String)
        case invalid
    }

    enum UsageField {
        case absent
        case usage(Usage)
        case invalid
    }

    struct Choice {
        /// The choice's index (its position when absent or null); nil when not an integer.
        var index: Int?
        /// The delta's text (`.some(nil)`: no text); nil when the delta is not of the common shape.
        var delta: String??
        var finish = Finish.absent
        /// Where the string of the text in `delta` sits, quotes included, when the delta has one.
        var contentRange: Range<Int>?
    }

    /// An `error` member that is not null.
    var error = false
    /// nil when `choices` is absent or null.
    var choices: [Choice]?
    var usage = UsageField.absent

    /// nil when the text is JSON but not an object, or its `choices` is not an array of objects.
    static func read(_ reader: inout JSONReader) throws(JSONReader.ParseError) -> CommonChunk? {
        var chunk = CommonChunk()
        var shapeOK = true
        let isObject = try reader.object { (key, reader) throws(JSONReader.ParseError) in
            if key.matches("error") {
                chunk.error = !(try reader.null())
                if chunk.error { try reader.skip() }
            } else if key.matches("choices") {
                if try reader.null() {
                    chunk.choices = nil
                    return
                }
                var choices: [Choice] = []
                let isArray = try reader.array { (position, reader) throws(JSONReader.ParseError) in
                    var choice = Choice(index: position, delta: .some(nil))
                    guard try reader.object({ (key, reader) throws(JSONReader.ParseError) in
                        if key.matches("index") {
                            choice.index = try Self.index(&reader, position: position)
                        } else if key.matches("delta") {
                            (choice.delta, choice.contentRange) = try Self.delta(&reader)
                        } else if key.matches("finish_reason") {
                            choice.finish = try Self.finish(&reader)
                        } else {
                            try reader.skip()
                        }
                    }) else {
                        shapeOK = false
                        return
                    }
                    choices.append(choice)
                }
                shapeOK = shapeOK && isArray
                chunk.choices = choices
            } else if key.matches("usage") {
                chunk.usage = try Self.usage(&reader)
            } else {
                try reader.skip()
            }
        }
        return isObject && shapeOK ? chunk : nil
    }

    private static func index(_ reader: inout JSONReader, position: Int) throws(JSONReader.ParseError) -> Int? {
        if try reader.null() { return position }
        return try reader.integerOrSkip()
    }

    private static func delta(
        _ reader: inout JSONReader
    ) throws(JSONReader.ParseError) -> (content: String??, range: Range<Int>?) {
        if try reader.null() { return (.some(nil), nil) }
        var content: String?? = .some(nil)
        var range: Range<Int>?
        var toolCallsOK = true
        var noReasoning = true
        let isObject = try reader.object { (key, reader) throws(JSONReader.ParseError) in
            if key.matches("content") {
                // Null is no text; another type is not the common shape (nil). Where a key repeats, the last
                // one counts: so does its range.
                let start = reader.offset
                range = nil
                if try reader.null() {
                    content = .some(nil)
                } else if let text = try reader.stringOrSkip() {
                    content = .some(text)
                    range = start..<reader.offset
                } else {
                    content = nil
                }
            } else if key.matches("reasoning") || key.matches("reasoning_content") {
                // Reasoning (Ollama's `reasoning`, llama-server's and vLLM's `reasoning_content`) takes the
                // general path; null or empty is the common shape.
                if try reader.null() {
                } else if let text = try reader.stringOrSkip(), text.isEmpty {
                } else {
                    noReasoning = false
                }
            } else if key.matches("tool_calls") {
                // Null or empty is the common shape; any call goes to the general path.
                if try reader.null() {
                    toolCallsOK = true
                } else {
                    var empty = true
                    let isArray = try reader.array { (_, reader) throws(JSONReader.ParseError) in
                        empty = false
                        try reader.skip()
                    }
                    toolCallsOK = isArray && empty
                }
            } else {
                try reader.skip()
            }
        }
        return isObject && toolCallsOK && noReasoning ? (content, range) : (nil, nil)
    }

    private static func finish(_ reader: inout JSONReader) throws(JSONReader.ParseError) -> Finish {
        if try reader.null() { return .absent }
        return try reader.stringOrSkip().map { .reason($0) } ?? .invalid
    }

    private static func usage(_ reader: inout JSONReader) throws(JSONReader.ParseError) -> UsageField {
        if try reader.null() { return .absent }
        var prompt: Int?
        var completion: Int?
        let isObject = try reader.object { (key, reader) throws(JSONReader.ParseError) in
            if key.matches("prompt_tokens") {
                prompt = try reader.integerOrSkip()
            } else if key.matches("completion_tokens") {
                completion = try reader.integerOrSkip()
            } else {
                try reader.skip()
            }
        }
        guard isObject, let prompt, let completion, prompt >= 0, completion >= 0 else { return .invalid }
        return .usage(Usage(promptTokens: prompt, completionTokens: completion))
    }
}

/// The bytes of a text-only chunk around its text, learnt from one read in full (`decodeCommonChunk`), so that
/// the next chunks of the stream, which a server writes alike but for the text (same id, time, model, keys in
/// the same order), are read by comparing bytes and reading one string.
///
/// A chunk that starts with `prefix` (up to the text's opening quote) and ends with `suffix` (from its closing
/// quote) is the learnt chunk with another string in the text's place: it decodes to that string's text and
/// nothing else, exactly as the full read would (the rest of it was checked when it was learnt, and where a
/// key repeats the learnt place is the one that counts). Anything else is read in full, and may be learnt.
struct ChunkTemplate {
    private var prefix: [UInt8] = []
    private var suffix: [UInt8] = []

    /// Learns `data`'s layout. - Parameter content: where the text's string sits in `data`, quotes included.
    mutating func learn(_ data: UnsafeBufferPointer<UInt8>, content: Range<Int>) {
        self.prefix.removeAll(keepingCapacity: true)
        self.prefix.append(contentsOf: data[..<(content.lowerBound + 1)])
        self.suffix.removeAll(keepingCapacity: true)
        self.suffix.append(contentsOf: data[(content.upperBound - 1)...])
    }

    /// Nothing learnt: every chunk is read in full until the next text-only one.
    mutating func forget() {
        self.prefix.removeAll(keepingCapacity: true)
        self.suffix.removeAll(keepingCapacity: true)
    }

    /// The text of `data` if it has the learnt layout; nil if not (or if the string in the text's place is not
    /// one string exactly: an early quote, a bad escape, bad UTF-8).
    func text(of data: UnsafeBufferPointer<UInt8>) -> String? {
        let count = data.count
        guard !self.prefix.isEmpty, !self.suffix.isEmpty, count >= self.prefix.count + self.suffix.count,
            let base = data.baseAddress
        else { return nil }
        let matches = self.prefix.withUnsafeBytes { p in
            self.suffix.withUnsafeBytes { s in
                memcmp(base, p.baseAddress!, p.count) == 0
                    && memcmp(base + (count - s.count), s.baseAddress!, s.count) == 0
            }
        }
        guard matches,
            let (text, end) = try? JSONReader.string(in: data, at: self.prefix.count - 1),
            end == count - self.suffix.count + 1  // the string closed on the suffix's quote
        else { return nil }
        return text
    }
}
