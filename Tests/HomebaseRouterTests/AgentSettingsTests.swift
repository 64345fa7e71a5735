import HomebaseCore
import Testing
@testable import HomebaseRouter

@Suite struct AgentSettingsTests {
    let backend = InMemorySettingsBackend()
    var settings: AgentSettings { AgentSettings(backend: self.backend) }

    @Test func theRadioIsNilUntilSet() throws {
        #expect(self.settings.modelSource == nil)
        try self.settings.setModelSource(.community)
        #expect(self.settings.modelSource == .community)
    }

    @Test(arguments: [("apple", ModelSource.apple), ("community", .community), ("external", .external),
                      ("openai", .legacyOpenAI), ("Apple", .apple), ("", .apple)])
    func storedRadioValues(stored: String, expected: ModelSource) throws {
        try self.backend.set(stored, forKey: AgentSettings.Key.modelSource)
        #expect(self.settings.modelSource == expected)
    }

    @Test(arguments: [(String?.none, ExternalRuntime.ollama), ("ollama", .ollama), ("openai", .openai),
                      ("claude", .claude), ("gemini", .ollama)])
    func theDropdownDefaultsToOllama(stored: String?, expected: ExternalRuntime) throws {
        if let stored { try self.backend.set(stored, forKey: AgentSettings.Key.externalRuntime) }
        #expect(self.settings.externalRuntime == expected)
    }

    @Test(arguments: [
        (String?.none, ExternalHost.own),
        ("own", .own),
        (String(repeating: "b2", count: 32), .joined(Fixture.friend)),
        (String(repeating: "B2", count: 32), .joined(Fixture.friend)),
        (String(repeating: "b2", count: 31), .own),
        (String(repeating: "b2", count: 33), .own),
        (String(repeating: "zz", count: 32), .own),
        (" " + String(repeating: "b2", count: 32), .own),
    ])
    func aCorruptHostReadsAsOwn(stored: String?, expected: ExternalHost) throws {
        try self.backend.set("qwen2.5:7b", forKey: AgentSettings.Key.externalModel)
        if let stored { try self.backend.set(stored, forKey: AgentSettings.Key.externalHost) }
        #expect(self.settings.externalSelection == ExternalSelection(tag: "qwen2.5:7b", host: expected))
    }

    @Test func selectionRoundTripsAndBlankTagsAreNoSelection() throws {
        try self.settings.setExternalSelection(ExternalSelection(tag: " llama3.1:70b ", host: .joined(Fixture.friend)))
        #expect(self.settings.externalSelection == ExternalSelection(tag: "llama3.1:70b", host: .joined(Fixture.friend)))
        #expect(self.backend.string(forKey: AgentSettings.Key.externalHost) == Fixture.friend.hex)
        try self.backend.set("   ", forKey: AgentSettings.Key.externalModel)
        #expect(self.settings.externalSelection == nil)
        try self.settings.setExternalSelection(nil)
        #expect(self.backend.snapshot.isEmpty)
    }

    @Test func settersNeverTouchTheRadio() throws {
        try self.settings.setExternalRuntime(.claude)
        try self.settings.setExternalSelection(ExternalSelection(tag: "x"))
        try self.settings.setOpenAIModel("gpt-4.1")
        try self.settings.setLocalModelPreference("phi3")
        try self.settings.setDeviceModel(DeviceModel(url: "http://127.0.0.1:1", tag: "t"))
        _ = try self.settings.choose(local: ModelChoice(modelID: "m", vision: true, origin: "o"))
        try self.settings.apply(remote: ModelChoice(modelID: "n", vision: false, origin: "p"))
        #expect(self.settings.modelSource == nil)
    }

    @Test func choosingLocallyReturnsTheMessageToFanOut() throws {
        let choice = ModelChoice(modelID: "qwen2.5:1.5b", vision: true, origin: "a1a1a1a1")
        let message = try self.settings.choose(local: choice)
        #expect(message == ModelChoiceMessage(choice: choice))
        #expect(ModelChoiceMessage.type == "settings.model_choice")
        #expect(self.settings.modelChoice == choice)
        #expect(self.backend.string(forKey: "settings.model_choice")
            == #"{"model_id":"qwen2.5:1.5b","origin":"a1a1a1a1","vision":true}"#)
    }

    @Test func applyingARemoteChoiceStoresItWithoutAMessage() throws {
        let choice = ModelChoice(modelID: "qwen2.5:3b", vision: false, origin: "sibling")
        // `apply(remote:)` returns Void: there is nothing to send, so no echo loop can form.
        let nothing: Void = try self.settings.apply(remote: choice)
        _ = nothing
        #expect(self.settings.modelChoice == choice)
    }

    @Test func theSyncedChoiceSelectsTheDeviceModelTag() throws {
        #expect(self.settings.effectiveDeviceModel == nil)
        try self.settings.apply(remote: ModelChoice(modelID: "qwen2.5:3b", vision: false, origin: "s"))
        #expect(self.settings.effectiveDeviceModel == nil)
        try self.settings.setDeviceModel(DeviceModel(url: "http://127.0.0.1:11500", tag: "qwen2.5:0.5b"))
        #expect(self.settings.effectiveDeviceModel == DeviceModel(url: "http://127.0.0.1:11500", tag: "qwen2.5:3b"))
    }

    @Test(arguments: ["not json", #"{"url":"","tag":"x"}"#, #"{"url":"http://h","tag":"  "}"#, #"{"url":1}"#])
    func aDamagedDeviceModelReadsAsNone(stored: String) throws {
        try self.backend.set(stored, forKey: AgentSettings.Key.deviceModel)
        #expect(self.settings.deviceModel == nil)
    }

    @Test func cloudModelsDefaultAndOverride() throws {
        #expect(self.settings.openAIModel == AgentSettings.defaultOpenAIModel)
        #expect(self.settings.claudeModel == AgentSettings.defaultClaudeModel)
        try self.settings.setClaudeModel("claude-opus-4-1")
        #expect(self.settings.claudeModel == "claude-opus-4-1")
        try self.settings.setClaudeModel("  ")
        #expect(self.settings.claudeModel == AgentSettings.defaultClaudeModel)
    }
}
