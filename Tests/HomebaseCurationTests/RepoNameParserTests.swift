import Testing
@testable import HomebaseCuration

/// Real mlx-community names, the three naming grammars of the seed and the awkward ones.
@Suite struct RepoNameParserTests {
    struct Row: Sendable, CustomStringConvertible {
        let id: String
        let family: String
        let series: String
        let size: String
        let quant: String
        var description: String { self.id }
    }

    static let rows: [Row] = [
        Row(id: "mlx-community/Qwen2.5-1.5B-Instruct-4bit", family: "Qwen", series: "Qwen 2.5", size: "1.5B", quant: "4-bit"),
        Row(id: "mlx-community/gemma-3-4b-it-4bit", family: "Gemma", series: "Gemma 3", size: "4B", quant: "4-bit"),
        Row(id: "mlx-community/Llama-3.2-3B-Instruct-4bit", family: "Llama", series: "Llama 3.2", size: "3B", quant: "4-bit"),
        Row(id: "mlx-community/Meta-Llama-3.1-8B-Instruct-8bit", family: "Llama", series: "Llama 3.1", size: "8B", quant: "8-bit"),
        Row(id: "mlx-community/Mixtral-8x7B-Instruct-v0.1-4bit", family: "Mixtral", series: "Mixtral", size: "8x7B", quant: "4-bit"),
        Row(id: "mlx-community/Mistral-7B-Instruct-v0.3-4bit", family: "Mistral", series: "Mistral", size: "7B", quant: "4-bit"),
        Row(id: "mlx-community/CodeLlama-13b-Instruct-hf-4bit-MLX", family: "Code Llama", series: "Code Llama", size: "13B", quant: "4-bit"),
        Row(id: "mlx-community/Qwen2.5-Coder-7B-Instruct-8bit", family: "Qwen", series: "Qwen 2.5", size: "7B · Coder", quant: "8-bit"),
        Row(id: "mlx-community/Qwen2.5-Math-1.5B-Instruct-4bit", family: "Qwen", series: "Qwen 2.5", size: "1.5B · Math", quant: "4-bit"),
        Row(id: "mlx-community/Qwen2-VL-2B-Instruct-4bit", family: "Qwen", series: "Qwen 2", size: "2B · Vision", quant: "4-bit"),
        Row(id: "mlx-community/Qwen2.5-VL-7B-Instruct-bf16", family: "Qwen", series: "Qwen 2.5", size: "7B · Vision", quant: "BF16"),
        Row(id: "mlx-community/Qwen3-4B-Thinking-2507-4bit", family: "Qwen", series: "Qwen 3", size: "4B · Thinking", quant: "4-bit"),
        Row(id: "mlx-community/Qwen3-30B-A3B-4bit-DWQ", family: "Qwen", series: "Qwen 3", size: "30B", quant: "4-bit DWQ"),
        Row(id: "mlx-community/Llama-3.2-11B-Vision-Instruct-4bit", family: "Llama", series: "Llama 3.2", size: "11B · Vision", quant: "4-bit"),
        Row(id: "mlx-community/DeepSeek-R1-Distill-Qwen-1.5B-4bit", family: "DeepSeek", series: "DeepSeek R1", size: "1.5B", quant: "4-bit"),
        Row(id: "mlx-community/Phi-3.5-mini-instruct-4bit", family: "Phi", series: "Phi 3.5", size: "mini", quant: "4-bit"),
        Row(id: "mlx-community/gemma-3n-E2B-it-4bit", family: "Gemma", series: "Gemma 3", size: "E2B", quant: "4-bit"),
        Row(id: "mlx-community/SmolLM2-135M-Instruct", family: "SmolLM", series: "SmolLM 2", size: "135M", quant: "BF16"),
        Row(id: "mlx-community/SmolVLM2-2.2B-Instruct-mlx", family: "SmolVLM", series: "SmolVLM 2", size: "2.2B", quant: "BF16"),
        Row(id: "mlx-community/gpt-oss-20b-MXFP4-Q8", family: "gpt-oss", series: "gpt-oss", size: "20B", quant: "4-bit MXFP4"),
        Row(id: "mlx-community/Hermes-3-Llama-3.1-8B-4bit", family: "Hermes", series: "Hermes 3", size: "8B", quant: "4-bit"),
        Row(id: "mlx-community/dolphin-2.9-llama3-8b-4bit", family: "Dolphin", series: "Dolphin 2.9", size: "8B", quant: "4-bit"),
        Row(id: "mlx-community/gemma-3-27b-it-qat-4bit", family: "Gemma", series: "Gemma 3", size: "27B", quant: "4-bit QAT"),
        Row(id: "mlx-community/Qwen1.5-0.5B-Chat-4bit", family: "Qwen", series: "Qwen 1.5", size: "0.5B", quant: "4-bit"),
        Row(id: "mlx-community/QwQ-32B-4bit", family: "QwQ", series: "QwQ", size: "32B", quant: "4-bit"),
        Row(id: "mlx-community/Mistral-Small-3.1-24B-Instruct-2503-4bit", family: "Mistral", series: "Mistral", size: "24B", quant: "4-bit"),
        Row(id: "mlx-community/pixtral-12b-8bit", family: "Pixtral", series: "Pixtral", size: "12B", quant: "8-bit"),
        Row(id: "mlx-community/Llama-3.3-70B-Instruct-3bit", family: "Llama", series: "Llama 3.3", size: "70B", quant: "3-bit"),
        Row(id: "mlx-community/Qwen2.5-7B-Instruct-fp16", family: "Qwen", series: "Qwen 2.5", size: "7B", quant: "FP16"),
    ]

    @Test(arguments: rows)
    func parsesFamilySeriesSizeAndQuant(row: Row) throws {
        let parsed = try #require(RepoNameParser.parse(row.id))
        #expect(parsed.family == row.family)
        #expect(parsed.series == row.series)
        #expect(parsed.sizeLabel == row.size)
        #expect(parsed.quant.description == row.quant)
    }

    /// "Other" is dropped: names the parser cannot place return nil (no family, or no size).
    @Test(arguments: ["mlx-community/whisper-large-v3-turbo", "mlx-community/bge-small-en-v1.5-bf16",
                      "mlx-community/SmolVLM-Instruct-4bit", "mlx-community/Kokoro-82M-bf16", "nofamily",
                      "mlx-community/", ""])
    func unplaceableNamesAreOther(id: String) {
        #expect(RepoNameParser.parse(id) == nil)
    }

    @Test func theLongestFamilyNeedleWins() {
        // codellama before llama; deepseek before the qwen inside its name; dolphin before the phi inside it.
        #expect(RepoNameParser.parse("x/codellama-7b-4bit")?.family == "Code Llama")
        #expect(RepoNameParser.parse("x/DeepSeek-R1-Distill-Qwen-7B-4bit")?.family == "DeepSeek")
        #expect(RepoNameParser.parse("x/dolphin-7b-4bit")?.family == "Dolphin")
    }

    @Test func aNeedleInsideAWordDoesNotCount() {
        // "phi" sits inside "graphiti", "olmo" inside "holmo": no family at a word start, so Other.
        #expect(RepoNameParser.parse("x/graphiti-7b-4bit") == nil)
        #expect(RepoNameParser.parse("x/holmo-7b-4bit") == nil)
    }

    @Test func aSizeRightAfterTheFamilyIsNotAVersion() {
        let p = RepoNameParser.parse("mlx-community/Qwen-7B-Chat-4bit")
        #expect(p?.series == "Qwen")
        #expect(p?.size == "7B")
    }
}
