import Foundation
import HomebaseCore
import HomebaseTransport
import Testing

@testable import HomebaseEngines

/// The Chat Completions request body, written with `JSONNode`: the same JSON JSONSerialization wrote.
@Suite struct OpenAIRequestBodyTests {
    let engine = OpenAIChatEngine(http: HTTPClient(), baseURL: "http://127.0.0.1:1/v1", apiKey: { nil },
                                  maxTokensField: .maxTokens)

    func parsed(_ bytes: [UInt8]) throws -> NSDictionary {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? NSDictionary)
    }

    @Test func fullRequestMatchesTheDictionaryForm() throws {
        let request = ChatRequest(
            messages: [ChatMessage(role: "system", content: "be \"brief\"\n"), ChatMessage(role: "user", content: "héllo 😀 </x>")],
            tools: [RawJSON(#"{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}"#)],
            options: ChatOptions(temperature: 0.2, topP: 1, maxTokens: 64, stop: ["\n\n", "END"], seed: 7))
        let body = try self.engine.requestBody(model: "qwen2.5:7b", request: request)
        let expected: NSDictionary = [
            "model": "qwen2.5:7b",
            "messages": [["role": "system", "content": "be \"brief\"\n"], ["role": "user", "content": "héllo 😀 </x>"]],
            "stream": true, "stream_options": ["include_usage": true],
            "tools": [["type": "function", "function": ["name": "f", "parameters": ["type": "object", "properties": [String: Any]()]]]],
            "temperature": 0.2, "top_p": 1, "max_tokens": 64, "stop": ["\n\n", "END"], "seed": 7,
        ]
        #expect(try self.parsed(body) == expected)
        // Keys sorted, as before: "max_tokens" < "messages" < "model" < "seed" < "stop" < …
        let text = String(decoding: body, as: UTF8.self)
        #expect(text.hasPrefix(#"{"max_tokens":64,"messages":[{"content":"be \"brief\"\n","role":"system"}"#))
        #expect(text.contains(#""temperature":0.2,"tools":["#))
    }

    /// Issue 34: `think` becomes `reasoning_effort` (`none` for off, as Ollama reads it); the default sends none.
    @Test(arguments: [(ThinkSetting.off, "none"), (.low, "low"), (.medium, "medium"), (.high, "high")])
    func thinkIsSentAsReasoningEffort(_ think: ThinkSetting, _ effort: String) throws {
        let request = ChatRequest(messages: [ChatMessage(role: "user", content: "hi")], options: ChatOptions(think: think))
        let body = try self.parsed(try self.engine.requestBody(model: "m", request: request))
        #expect(body["reasoning_effort"] as? String == effort)
        let plain = ChatRequest(messages: [ChatMessage(role: "user", content: "hi")], options: ChatOptions(think: .on))
        #expect(try self.parsed(try self.engine.requestBody(model: "m", request: plain))["reasoning_effort"] == nil)
    }

    @Test func minimalRequestHasNoOptionalFields() throws {
        let body = try self.engine.requestBody(model: "m", request: ChatRequest(messages: [ChatMessage(role: "user", content: "hi")]))
        #expect(String(decoding: body, as: UTF8.self)
            == #"{"messages":[{"content":"hi","role":"user"}],"model":"m","stream":true,"stream_options":{"include_usage":true}}"#)
    }

    @Test func nonFiniteOptionsAreLeftOut() throws {
        let request = ChatRequest(messages: [ChatMessage(role: "user", content: "hi")],
                                  options: ChatOptions(temperature: .nan, topP: .infinity))
        let body = try self.engine.requestBody(model: "m", request: request)
        #expect(try self.parsed(body)["temperature"] == nil)
        #expect(try self.parsed(body)["top_p"] == nil)
    }

    @Test(arguments: ["[1]", "not json", #"{"a":"#, "\"s\""])
    func toolThatIsNotAnObjectIsMalformed(_ tool: String) {
        let request = ChatRequest(messages: [ChatMessage(role: "user", content: "hi")], tools: [RawJSON(tool)])
        #expect(throws: ChatEngineError.self) { try self.engine.requestBody(model: "m", request: request) }
    }
}
