import HomebaseService
import Testing

/// Issue 39: `config --pin` and `grant --models` warn about a model Ollama does not have, naming it.
@Suite struct MissingModelsTests {
    @Test func namesWhatOllamaLacksAsOllamaNamesIt() {
        let installed = ["qwen2.5:7b", "llama3.2:latest", "hf.co/org/Model-GGUF:Q4_K_M"]
        #expect(HomebaseSettings.missingModels(["qwen2.5:7b", "llama3.2", "nosuch:1b", "*"], installed: installed)
                == ["nosuch:1b"])
        #expect(HomebaseSettings.missingModels(["Qwen2.5:7B", "hf.co/org/model-gguf:q4_k_m"], installed: installed)
                == [], "case does not count, as in Ollama")
        #expect(HomebaseSettings.missingModels(["qwen2.5"], installed: installed) == ["qwen2.5"],
                "a bare name is :latest, not any tag")
        #expect(HomebaseSettings.missingModels([], installed: []) == [])
    }
}
