import HomebaseCore
import Testing

@Suite struct LocalAPIEncoderTests {
    let origin = LocalAPIOrigin(route: "external", provider: "remote", model: "qwen2.5:7b")
    let fellBack = LocalAPIOrigin(route: "external", provider: "on-device", model: "floor", fallbackFrom: "remote",
                                  fallbackReason: "offline")

    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// The JSON of one SSE event (`data: …\n\n`).
    func event(_ bytes: [UInt8]) throws -> JSONNode {
        let s = self.text(bytes)
        #expect(s.hasPrefix("data: ") && s.hasSuffix("\n\n"))
        return try JSONNode.parse(String(s.dropFirst(6).dropLast(2)))
    }

    @Test func sseChunksAreOpenAIChunks() throws {
        let role = try self.event(OpenAIEncoder.chunk(id: "c1", created: 1700, model: "m", delta: .role))
        #expect(role["object"] == .string("chat.completion.chunk") && role["id"] == .string("c1"))
        #expect(role["created"] == .number("1700") && role["model"] == .string("m"))
        let choice = role["choices"]?.arrayValue?.first
        #expect(choice?["delta"]?["role"] == .string("assistant") && choice?["finish_reason"] == .null)
        let content = try self.event(OpenAIEncoder.chunk(id: "c1", created: 1700, model: "m",
                                                         delta: .content("a \"quote\"\n\u{1}é")))
        #expect(content["choices"]?.arrayValue?.first?["delta"]?["content"] == .string("a \"quote\"\n\u{1}é"))
        let thought = try self.event(OpenAIEncoder.chunk(id: "c1", created: 1, model: "m", delta: .reasoning("hm")))
        #expect(thought["choices"]?.arrayValue?.first?["delta"]?["reasoning_content"] == .string("hm"))
        let call = try self.event(OpenAIEncoder.chunk(id: "c1", created: 1, model: "m", delta: .toolCall(
            index: 2, LocalAPIToolCall(id: "t", name: "f", arguments: #"{"a":1}"#))))
        let t = call["choices"]?.arrayValue?.first?["delta"]?["tool_calls"]?.arrayValue?.first
        #expect(t?["index"] == .number("2") && t?["function"]?["arguments"] == .string(#"{"a":1}"#))
    }

    @Test func lastChunkCarriesTheHomebaseObjectThenUsageThenDone() throws {
        let last = try self.event(OpenAIEncoder.finalChunk(id: "c", created: 1, model: "m", finishReason: "stop",
                                                           origin: self.fellBack))
        #expect(last["choices"]?.arrayValue?.first?["finish_reason"] == .string("stop"))
        #expect(last["homebase"] == (try JSONNode.parse(
            #"{"route":"external","provider":"on-device","model":"floor","fallback":{"from":"remote","reason":"offline"}}"#)))
        let plain = try self.event(OpenAIEncoder.finalChunk(id: "c", created: 1, model: "m", finishReason: "length",
                                                            origin: self.origin))
        #expect(plain["homebase"]?["fallback"] == .null)
        let usage = try self.event(OpenAIEncoder.usageChunk(id: "c", created: 1, model: "m",
                                                            usage: Usage(promptTokens: 3, completionTokens: 4)))
        #expect(usage["choices"] == .array([]))
        #expect(usage["usage"]?["total_tokens"] == .number("7"))
        #expect(self.text(OpenAIEncoder.done) == "data: [DONE]\n\n")
    }

    @Test func nonStreamedBody() throws {
        let answer = LocalAPIAnswer(text: "hi", reasoning: "think", finishReason: "stop",
                                    usage: Usage(promptTokens: 1, completionTokens: 2), origin: self.origin)
        let body = try JSONNode.parse(self.text(OpenAIEncoder.completion(id: "x", created: 5, model: "m", answer: answer)))
        #expect(body["object"] == .string("chat.completion"))
        let message = body["choices"]?.arrayValue?.first?["message"]
        #expect(message?["content"] == .string("hi") && message?["reasoning_content"] == .string("think"))
        #expect(body["usage"]?["prompt_tokens"] == .number("1") && body["homebase"]?["provider"] == .string("remote"))
        var tools = answer
        tools.text = ""
        tools.toolCalls = [LocalAPIToolCall(id: "t1", name: "f", arguments: "{}")]
        tools.finishReason = "tool_calls"
        let t = try JSONNode.parse(self.text(OpenAIEncoder.completion(id: "x", created: 5, model: "m", answer: tools)))
        #expect(t["choices"]?.arrayValue?.first?["message"]?["content"] == .null)
        #expect(t["choices"]?.arrayValue?.first?["message"]?["tool_calls"]?.arrayValue?.count == 1)
    }

    @Test func errorsAndModels() throws {
        let e = try JSONNode.parse(self.text(OpenAIEncoder.error(LocalAPIError(
            status: 401, message: "no", param: nil, code: "invalid_api_key"))))
        #expect(e == (try JSONNode.parse(
            #"{"error":{"message":"no","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#)))
        let list = try JSONNode.parse(self.text(OpenAIEncoder.models(
            [LocalAPIModel(id: "qwen2.5:7b", ownedBy: "homebase"), LocalAPIModel(id: "floor", ownedBy: "device")],
            created: 9)))
        #expect(list["object"] == .string("list"))
        #expect(list["data"]?.arrayValue?.map { $0["owned_by"] } == [.string("homebase"), .string("device")])
        #expect(list["data"]?.arrayValue?.first?["object"] == .string("model"))
    }

    @Test func ollamaLines() throws {
        let line = self.text(OllamaEncoder.chatLine(model: "m", createdAt: "t", content: "a\nb", thinking: "x"))
        #expect(line.hasSuffix("}\n") && line.filter { $0 == "\n" }.count == 1)
        let node = try JSONNode.parse(String(line.dropLast()))
        #expect(node["done"] == .bool(false) && node["message"]?["content"] == .string("a\nb"))
        #expect(node["message"]?["thinking"] == .string("x"))
        let answer = LocalAPIAnswer(text: "all", reasoning: "r", toolCalls: [LocalAPIToolCall(id: "1", name: "f", arguments: #"{"q":1}"#)],
                                    finishReason: "length", usage: Usage(promptTokens: 2, completionTokens: 3),
                                    origin: self.fellBack)
        let last = try JSONNode.parse(self.text(OllamaEncoder.chatDone(
            model: "m", createdAt: "t", answer: answer, includeMessage: false, totalNs: 10, evalNs: 5, newline: false)))
        #expect(last["done"] == .bool(true) && last["done_reason"] == .string("length"))
        #expect(last["message"]?["content"] == .string("") && last["eval_count"] == .number("3"))
        #expect(last["homebase"]?["fallback"]?["reason"] == .string("offline"))
        #expect(last["message"]?["tool_calls"]?.arrayValue?.first?["function"]?["arguments"]?["q"] == .number("1"))
        let whole = try JSONNode.parse(self.text(OllamaEncoder.chatDone(
            model: "m", createdAt: "t", answer: answer, includeMessage: true, totalNs: 1, evalNs: 1, newline: false)))
        #expect(whole["message"]?["content"] == .string("all") && whole["message"]?["thinking"] == .string("r"))
        var bad = answer
        bad.toolCalls = [LocalAPIToolCall(id: "1", name: "f", arguments: "not json")]
        let b = try JSONNode.parse(self.text(OllamaEncoder.chatDone(
            model: "m", createdAt: "t", answer: bad, includeMessage: true, totalNs: 1, evalNs: 1, newline: false)))
        #expect(b["message"]?["tool_calls"]?.arrayValue?.first?["function"]?["arguments"] == .object([]))
    }

    @Test func ollamaListings() throws {
        let models = [LocalAPIModel(id: "qwen2.5:7b", ownedBy: "homebase", family: "qwen2", parameterSize: "7.6B",
                                    quantization: "Q4_K_M", contextLength: 32768, loaded: true),
                      LocalAPIModel(id: "floor", ownedBy: "device")]
        let tags = try JSONNode.parse(self.text(OllamaEncoder.tags(models, modifiedAt: "t")))
        #expect(tags["models"]?.arrayValue?.map { $0["name"] } == [.string("qwen2.5:7b"), .string("floor")])
        #expect(tags["models"]?.arrayValue?.first?["details"]?["quantization_level"] == .string("Q4_K_M"))
        let ps = try JSONNode.parse(self.text(OllamaEncoder.ps(models, expiresAt: "e")))
        #expect(ps["models"]?.arrayValue?.count == 1 && ps["models"]?.arrayValue?.first?["context_length"] == .number("32768"))
        let show = try JSONNode.parse(self.text(OllamaEncoder.show(models[0], modifiedAt: "t")))
        #expect(show["model_info"]?["qwen2.context_length"] == .number("32768"))
        #expect(show["capabilities"] == .array([.string("completion")]))
        #expect(try JSONNode.parse(self.text(OllamaEncoder.version("0.12.0")))["version"] == .string("0.12.0"))
        #expect(try JSONNode.parse(self.text(OllamaEncoder.error("boom")))["error"] == .string("boom"))
    }

    @Test(arguments: [
        (UInt64(0), "1970-01-01T00:00:00.000Z"), (UInt64(951_782_400_123), "2000-02-29T00:00:00.123Z"),
        (UInt64(1_796_655_895_189), "2026-12-07T15:04:55.189Z"), (UInt64(4_102_444_799_999), "2099-12-31T23:59:59.999Z"),
    ])
    func timestamps(_ ms: UInt64, _ text: String) {
        #expect(OllamaEncoder.timestamp(unixMs: ms) == text)
        #expect(RFC3339.milliseconds(text) == ms)
    }
}
