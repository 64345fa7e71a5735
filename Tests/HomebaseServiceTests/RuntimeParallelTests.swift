import Testing
@testable import HomebaseService

/// How many requests the Homebase lets the runtime run at once per model: the runtime's own word (llama-server's
/// slots) when it gives one, else the owner's `--runtime-parallel` (Ollama says nothing).
@Suite struct RuntimeParallelTests {
    @Test func theRuntimesSlotsWinWhenItTellsThem() {
        var settings = HomebaseSettings(relayURL: "ws://127.0.0.1:1/v1/relay")
        #expect(settings.effectiveRuntimeParallel(known: nil) == 1, "Ollama's default")
        settings.runtimeParallel = 3
        #expect(settings.effectiveRuntimeParallel(known: nil) == 3)
        #expect(settings.effectiveRuntimeParallel(known: 2) == 2, "llama-server --parallel 2")
        #expect(settings.effectiveRuntimeParallel(known: 0) == 3, "a nonsense count is not taken")
        #expect(settings.effectiveRuntimeParallel(known: 10_000) == HomebaseSettings.runtimeParallelCeiling)
    }
}
