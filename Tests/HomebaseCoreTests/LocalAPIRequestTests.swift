import HomebaseCore
import Testing

@Suite struct LocalAPIRequestTests {
    func openAI(_ text: String) throws(LocalAPIError) -> LocalChatRequest {
        try LocalAPIRequestDecoder.openAIChat(Array(text.utf8))
    }

    func ollama(_ text: String) throws(LocalAPIError) -> LocalChatRequest {
        try LocalAPIRequestDecoder.ollamaChat(Array(text.utf8))
    }

    func refusal(_ body: () throws(LocalAPIError) -> LocalChatRequest) -> LocalAPIError? {
        do { _ = try body(); return nil } catch { return error }
    }

    @Test func decodesAFullOpenAIRequest() throws {
        let r = try self.openAI("""
            {"model":"qwen2.5:7b","messages":[{"role":"developer","content":"be brief"},
             {"role":"user","content":[{"type":"text","text":"hel"},{"type":"text","text":"lo"}]},
             {"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","content":"42","tool_call_id":"c"}],
             "stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":64,"max_tokens":9,
             "temperature":0.5,"top_p":1,"seed":7,"stop":["\\n\\n"],"reasoning_effort":"high","n":1,"user":"x",
             "tools":[{"type":"function","function":{"name":"f","parameters":{}}}],
             "functions":[{"name":"g"}]}
            """)
        #expect(r.model == "qwen2.5:7b")
        #expect(r.messages == [ChatMessage(role: "system", content: "be brief"), ChatMessage(role: "user", content: "hello"),
                               ChatMessage(role: "assistant", content: ""), ChatMessage(role: "tool", content: "42")])
        #expect(r.stream && r.includeUsage)
        #expect(r.maxTokens == 64)
        #expect(r.temperature == 0.5 && r.topP == 1 && r.seed == 7 && r.stop == ["\n\n"] && r.think == .high)
        #expect(r.tools == [#"{"type":"function","function":{"name":"f","parameters":{}}}"#,
                            #"{"type":"function","function":{"name":"g"}}"#])
    }

    @Test func defaultsAndAuto() throws {
        let r = try self.openAI(#"{"model":"auto","messages":[{"role":"user","content":"hi"}],"max_tokens":5}"#)
        #expect(r.model == nil && !r.stream && !r.includeUsage && r.maxTokens == 5 && r.tools.isEmpty)
        #expect(try self.openAI(#"{"messages":[{"role":"user","content":"hi"}]}"#).model == nil)
        #expect(try self.openAI(#"{"model":" ","messages":[{"role":"user","content":"hi"}]}"#).model == nil)
        #expect(try self.openAI(#"{"model":null,"messages":[{"role":"user","content":"hi"}],"stream":null}"#).model == nil)
        let o = try self.ollama(#"{"model":"llama3.2:3b","messages":[{"role":"user","content":"hi","images":[]}]}"#)
        #expect(o.stream && o.model == "llama3.2:3b")
        #expect(try self.ollama(#"{"model":"m","messages":[],"stream":false}"#).stream == false)
    }

    @Test func decodesOllamaOptionsAndThink() throws {
        let r = try self.ollama("""
            {"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],"think":"low",
             "options":{"temperature":0.2,"top_p":0.9,"seed":3,"num_predict":12,"stop":["x"]},"keep_alive":"5m",
             "tools":[{"type":"function","function":{"name":"f"}}]}
            """)
        #expect(r.think == .low && r.temperature == 0.2 && r.topP == 0.9 && r.seed == 3 && r.maxTokens == 12)
        #expect(r.stop == ["x"] && r.tools.count == 1)
        #expect(try self.ollama(#"{"model":"m","messages":[],"think":false}"#).think == .off)
        #expect(try self.ollama(#"{"model":"m","options":{"num_predict":-1}}"#).maxTokens == nil)
        #expect(try LocalAPIRequestDecoder.ollamaShow(Array(#"{"model":"qwen2.5:7b"}"#.utf8)) == "qwen2.5:7b")
        #expect(try LocalAPIRequestDecoder.ollamaShow(Array(#"{"name":"old"}"#.utf8)) == "old")
    }

    @Test func refusesImagesAndOtherParts() {
        let image = self.refusal { () throws(LocalAPIError) in try self.openAI("""
            {"messages":[{"role":"user","content":[{"type":"text","text":"what is"},
             {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}
            """) }
        #expect(image?.status == 400 && image?.code == "unsupported_content" && image?.param == "messages[0].content[1]")
        #expect(image?.message.contains("image_url") == true)
        let audio = self.refusal { () throws(LocalAPIError) in
            try self.openAI(#"{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}"#)
        }
        #expect(audio?.code == "unsupported_content")
        let ollamaImage = self.refusal { () throws(LocalAPIError) in
            try self.ollama(#"{"model":"m","messages":[{"role":"user","content":"x","images":["AAAA"]}]}"#)
        }
        #expect(ollamaImage?.code == "unsupported_content" && ollamaImage?.param == "messages[0].images")
    }

    @Test(arguments: [
        ("", "invalid_json"), ("{", "invalid_json"), (#"{"messages":[{"role":"user","content":"x"}]"#, "invalid_json"),
        ("[]", "invalid_json"), ("null", "invalid_json"), ("\u{FF}", "invalid_json"),
        (#"{"messages":[{"role":"user","content":"x"}]} trailing"#, "invalid_json"),
        (String(repeating: "[", count: 100_000), "invalid_json"),
    ])
    func refusesMalformedAndTruncated(_ text: String, _ code: String) {
        let e = self.refusal { () throws(LocalAPIError) in try self.openAI(text) }
        #expect(e?.status == 400 && e?.code == code && e?.type == "invalid_request_error")
        let o = self.refusal { () throws(LocalAPIError) in try self.ollama(text) }
        #expect(o?.status == 400 && o?.code == code)
    }

    @Test(arguments: [
        (#"{}"#, "messages"), (#"{"messages":[]}"#, "messages"), (#"{"messages":"hi"}"#, "messages"),
        (#"{"messages":[1]}"#, "messages[0]"), (#"{"messages":[{"content":"x"}]}"#, "messages[0].role"),
        (#"{"messages":[{"role":"root","content":"x"}]}"#, "messages[0].role"),
        (#"{"messages":[{"role":"user"}]}"#, "messages[0].content"),
        (#"{"messages":[{"role":"user","content":7}]}"#, "messages[0].content"),
        (#"{"messages":[{"role":"user","content":[{"text":"x"}]}]}"#, "messages[0].content[0]"),
        (#"{"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}"#, "messages[0].content[0]"),
        (#"{"model":7,"messages":[{"role":"user","content":"x"}]}"#, "model"),
        (#"{"model":"a\u0001b","messages":[{"role":"user","content":"x"}]}"#, "model"),
        (#"{"stream":"yes","messages":[{"role":"user","content":"x"}]}"#, "stream"),
        (#"{"stream_options":[],"messages":[{"role":"user","content":"x"}]}"#, "stream_options"),
        (#"{"max_tokens":0,"messages":[{"role":"user","content":"x"}]}"#, "max_tokens"),
        (#"{"max_tokens":1.5,"messages":[{"role":"user","content":"x"}]}"#, "max_tokens"),
        (#"{"max_tokens":99999999999999999999999,"messages":[{"role":"user","content":"x"}]}"#, "max_tokens"),
        (#"{"max_completion_tokens":-3,"messages":[{"role":"user","content":"x"}]}"#, "max_completion_tokens"),
        (#"{"temperature":3,"messages":[{"role":"user","content":"x"}]}"#, "temperature"),
        (#"{"temperature":"hot","messages":[{"role":"user","content":"x"}]}"#, "temperature"),
        (#"{"temperature":-1,"messages":[{"role":"user","content":"x"}]}"#, "temperature"),
        (#"{"top_p":-0.1,"messages":[{"role":"user","content":"x"}]}"#, "top_p"),
        (#"{"stop":["a","b","c","d","e"],"messages":[{"role":"user","content":"x"}]}"#, "stop"),
        (#"{"stop":[1],"messages":[{"role":"user","content":"x"}]}"#, "stop"),
        (#"{"n":2,"messages":[{"role":"user","content":"x"}]}"#, "n"),
        (#"{"reasoning_effort":"max","messages":[{"role":"user","content":"x"}]}"#, "reasoning_effort"),
        (#"{"tools":{},"messages":[{"role":"user","content":"x"}]}"#, "tools"),
        (#"{"tools":[1],"messages":[{"role":"user","content":"x"}]}"#, "tools[0]"),
    ])
    func refusesWrongFieldsNamingThem(_ text: String, _ param: String) {
        let e = self.refusal { () throws(LocalAPIError) in try self.openAI(text) }
        #expect(e?.status == 400)
        #expect(e?.param == param)
    }

    @Test func boundsCountsAndSizes() {
        let limits = LocalAPILimits()
        let many = "{\"messages\":[" + Array(repeating: #"{"role":"user","content":"x"}"#, count: limits.maxMessages + 1)
            .joined(separator: ",") + "]}"
        #expect(self.refusal { () throws(LocalAPIError) in try self.openAI(many) }?.param == "messages")
        #expect(self.refusal { () throws(LocalAPIError) in try self.ollama(many) }?.param == "messages")
        let tools = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":["
            + Array(repeating: #"{"type":"function"}"#, count: limits.maxTools + 1).joined(separator: ",") + "]}"
        #expect(self.refusal { () throws(LocalAPIError) in try self.openAI(tools) }?.param == "tools")
        let longModel = "{\"model\":\"" + String(repeating: "m", count: limits.maxModelBytes + 1)
            + "\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}"
        #expect(self.refusal { () throws(LocalAPIError) in try self.openAI(longModel) }?.param == "model")
        // A hostile role is quoted back cut short, never whole.
        let role = String(repeating: "r", count: 10_000)
        let e = self.refusal { () throws(LocalAPIError) in
            try self.openAI("{\"messages\":[{\"role\":\"\(role)\",\"content\":\"x\"}]}")
        }
        #expect(e != nil && e!.message.utf8.count < 200)
    }

    @Test func ollamaRefusals() {
        #expect(self.refusal { () throws(LocalAPIError) in try self.ollama(#"{"messages":{}}"#) }?.param == "messages")
        #expect(self.refusal { () throws(LocalAPIError) in try self.ollama(#"{"messages":[{"role":"x"}]}"#) }?.param
            == "messages[0].role")
        #expect(self.refusal { () throws(LocalAPIError) in try self.ollama(#"{"think":"max"}"#) }?.param == "think")
        #expect(self.refusal { () throws(LocalAPIError) in try self.ollama(#"{"options":[]}"#) }?.param == "options")
        #expect(self.refusal { () throws(LocalAPIError) in try self.ollama(#"{"options":{"num_predict":"many"}}"#) }?.param
            == "options.num_predict")
        do {
            _ = try LocalAPIRequestDecoder.ollamaShow(Array("{}".utf8))
            Issue.record("show without a model decoded")
        } catch {
            #expect(error.param == "model")
        }
    }
}
