import HomebaseCore
import HomebaseRouter
import Testing
@testable import HomebaseService

/// Issue 38, item 6: one capability rule. The handset's `RuntimeModel` and the Homebase's `RuntimeModelInfo`
/// disagreed on a model whose list was empty (capable to one, not to the other); every place now asks
/// `ModelCapabilities.canComplete`.
@Suite struct ModelCapabilitiesTests {
    static let cases: [([String], Bool)] = [
        ([], true),  // the runtime did not say: a trial decides
        (["completion"], true),
        (["completion", "tools", "thinking"], true),
        (["embedding"], false),
        (["vision"], false),
    ]

    @Test(arguments: cases) func everyModelTypeAppliesTheOneRule(capabilities: [String], capable: Bool) {
        #expect(ModelCapabilities.canComplete(capabilities) == capable)
        #expect(RuntimeModel(tag: "m", capabilities: capabilities).isCompletionCapable == capable)
        #expect(RuntimeModelInfo(tag: "m", family: "", parameterSize: "", quantization: "", capabilities: capabilities,
                                 contextLength: nil, loaded: false).canComplete == capable)
        #expect(OllamaModelInfo(capabilities: capabilities, contextLength: nil, architecture: nil).canComplete == capable)
    }

    /// Thinking is said, never assumed: `think` reaches only a model that lists it (the server and conformance's
    /// reasoning-apart check ask the same function).
    @Test func onlyAListedThinkingCapabilityThinks() {
        #expect(ModelCapabilities.canThink(["completion", "thinking"]))
        #expect(!ModelCapabilities.canThink([]))
        #expect(!ModelCapabilities.canThink(["completion", "tools"]))
    }
}
