/// Gate one (design.md §C3): the architectures the on-device runtime can load.
///
/// The union of mlx-swift-lm's `LLMTypeRegistry` and `VLMTypeRegistry` keys. An architecture outside it would
/// fail at load time, after the whole download; filtering here makes it never appear.
public enum ModelTypes {
    /// `config.model_type` values the runtime has a factory for.
    public static let supported: Set<String> = [
        // LLM registry.
        "mistral", "llama", "phi", "phi3", "phimoe", "gemma", "gemma2", "gemma3_text", "gemma3n", "qwen2",
        "qwen3", "qwen3_moe", "qwen3_next", "starcoder2", "cohere", "openelm", "internlm2", "deepseek_v3",
        "granite", "granitemoehybrid", "mimo", "glm4", "glm4_moe", "bitnet", "smollm3", "ernie4_5", "lfm2",
        "baichuan_m1", "exaone4", "gpt_oss", "olmoe", "olmo2", "olmo3", "bailing_moe", "falcon_h1", "apertus",
        "minimax", "nemotron_h", "seed_oss", "afmoe", "hunyuan", "jamba", "lille-130m",
        // VLM registry (the dual-use ones load in both).
        "paligemma", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "idefics3", "gemma3", "gemma4", "smolvlm", "fastvlm",
        "llava_qwen2", "pixtral", "mistral3", "lfm2_vl", "glm4v", "qwen3_5",
    ]

    /// Architectures that only exist as vision models: the model_type alone says "takes images".
    ///
    /// `gemma3`, `gemma4`, `mistral3` and `qwen3_5` are left out on purpose: the same string loads as text in the
    /// LLM factory and as vision in the VLM factory, so only the pipeline tag can tell their builds apart.
    public static let visionOnly: Set<String> = [
        "paligemma", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "idefics3", "smolvlm", "fastvlm", "llava_qwen2",
        "pixtral", "lfm2_vl", "glm4v",
    ]

    /// Pipeline tags whose models take images.
    public static let visionPipelineTags: Set<String> = ["image-text-to-text", "any-to-any"]

    /// The three pipeline tags the catalog queries, one request each (§2): the vision models live under the
    /// last two, and querying only `text-generation` silently dropped every one of them.
    public static let queriedPipelineTags = ["text-generation", "image-text-to-text", "any-to-any"]

    /// Gate one: kept when the runtime can load it. A missing model_type is a metadata gap, not evidence of an
    /// exotic architecture, so it is kept (benefit of the doubt).
    public static func isLoadable(_ modelType: String?) -> Bool {
        guard let modelType else { return true }
        return Self.supported.contains(modelType)
    }
}
