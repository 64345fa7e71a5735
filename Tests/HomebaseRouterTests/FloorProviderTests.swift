import HomebaseCore
import HomebaseEngines
import Testing
@testable import HomebaseRouter

@Suite struct FloorProviderTests {
    @Test func theFloorAnswersDeterministicallyAndSaysItIsTheFloor() async throws {
        let floor = FloorProvider()
        let a = try await floor.complete(Fixture.request)
        let b = try await floor.complete(Fixture.request)
        #expect(a == b)
        #expect(a.providerKind == .onDevice)
        #expect(a.model == "floor")
        #expect(a.fallback == nil)
        #expect(a.text.contains("What should I bring to Ana's birthday?"))
        #expect(a.text.contains("floor model"))
    }

    @Test func differentPromptsGetDifferentAnswers() {
        let one = FloorProvider().answer(ChatRequest(messages: [.user("Plan a picnic")]))
        let two = FloorProvider().answer(ChatRequest(messages: [.user("Plan a party")]))
        #expect(one.text != two.text)
    }

    @Test(arguments: [[], [ChatMessage.system("be brief")], [.user("   \n ")]])
    func anEmptyPromptStillGetsAnAnswer(messages: [ChatMessage]) {
        let result = FloorProvider().answer(ChatRequest(messages: messages))
        #expect(result.text.hasPrefix("Hello."))
    }

    @Test func aHugePromptIsQuotedTruncated() {
        let prompt = String(repeating: "word ", count: 10_000)
        let result = FloorProvider().answer(ChatRequest(messages: [.user(prompt)]))
        #expect(result.text.count < 400)
        #expect(result.text.contains("…"))
    }

    @Test func toolsAreAcceptedAndNeverCalled() {
        let tools = [RawJSON(#"{"type":"function","function":{"name":"get_date","parameters":{}}}"#)]
        let result = FloorProvider().answer(ChatRequest(messages: [.user("What day is it?")], tools: tools))
        #expect(result.toolCalls.isEmpty)
        #expect(result.finishReason == .stop)
    }

    @Test func theStreamAddsUpToTheWholeAnswer() async {
        var text = ""
        var done: ChatResult?
        var chunks = 0
        for await event in FloorProvider().stream(Fixture.request) {
            switch event {
            case .text(let t): text += t; chunks += 1
            case .done(let r): done = r
            default: Issue.record("unexpected \(event)")
            }
        }
        #expect(chunks > 1)
        #expect(text == done?.text)
    }
}
