import Testing
@testable import HomebaseCuration

@Suite struct GateTests {
    @Test func aMissingModelTypeIsKeptAndAnUnknownOneIsNot() {
        #expect(ModelTypes.isLoadable(nil))
        #expect(ModelTypes.isLoadable("qwen2"))
        #expect(ModelTypes.isLoadable("qwen2_5_vl"))
        #expect(!ModelTypes.isLoadable("whisper"))
        #expect(!ModelTypes.isLoadable("bert"))
    }

    @Test func visionTrustsThePipelineTagFirst() {
        #expect(Capabilities.isVision(repoID: "o/Foo-7B-it", pipelineTag: "image-text-to-text", modelType: "gemma3"))
        #expect(Capabilities.isVision(repoID: "o/Foo-7B-it", pipelineTag: "any-to-any", modelType: nil))
    }

    @Test func dualUseTypesNeedTheTag() {
        // gemma3 loads as text and as vision: the type alone must not tag a text build as vision.
        for type in ["gemma3", "gemma4", "mistral3", "qwen3_5"] {
            #expect(!Capabilities.isVision(repoID: "o/gemma-3-1b-it-4bit", pipelineTag: "text-generation",
                                           modelType: type))
            #expect(!Capabilities.isVision(repoID: "o/gemma-3-1b-it-4bit", pipelineTag: nil, modelType: type))
        }
    }

    @Test func visionOnlyTypesCountWithoutATag() {
        #expect(Capabilities.isVision(repoID: "o/some-2B-4bit", pipelineTag: nil, modelType: "qwen2_vl"))
        #expect(Capabilities.isVision(repoID: "o/some-2B-4bit", pipelineTag: nil, modelType: "smolvlm"))
    }

    @Test func theNameSniffOnlyAppliesWithNeitherSignal() {
        #expect(Capabilities.isVision(repoID: "o/Qwen2-VL-2B-Instruct-4bit", pipelineTag: nil, modelType: nil))
        #expect(Capabilities.isVision(repoID: "o/Llama-3.2-11B-Vision-Instruct-4bit", pipelineTag: nil, modelType: nil))
        // A text tag is a signal: the name does not override it.
        #expect(!Capabilities.isVision(repoID: "o/Qwen2-VL-2B-Instruct-4bit", pipelineTag: "text-generation",
                                       modelType: nil))
        #expect(!Capabilities.isVision(repoID: "o/Qwen2.5-7B-Instruct-4bit", pipelineTag: nil, modelType: nil))
    }

    @Test(arguments: [("o/Qwen2.5-1.5B-Instruct-4bit", true), ("o/gemma-3-4b-it-4bit", true),
                      ("o/Qwen1.5-0.5B-Chat-4bit", true), ("o/Qwen3-4B-Thinking-2507-4bit", true),
                      ("o/Phi-4-mini-reasoning-4bit", true), ("o/Qwen2.5-1.5B-4bit", false),
                      ("o/gemma-3-4b-pt-4bit", false), ("o/Mistral-7B-v0.1-4bit", false),
                      ("o/Llama-3.2-3B-4bit", false)])
    func toolsFollowInstructionTunedNaming(id: String, expected: Bool) {
        #expect(Capabilities.supportsTools(repoID: id) == expected)
    }
}

@Suite struct QuantAndSizeTests {
    @Test func tiersSortNumericallyWithFloatsLast() {
        let names = ["o/Llama-7B-bf16", "o/Llama-7B-8bit", "o/Llama-7B-fp32", "o/Llama-7B-4bit", "o/Llama-7B-fp16", "o/Llama-7B-3bit",
                     "o/Llama-7B-6bit", "o/Llama-7B-4bit-DWQ"]
        let sorted = names.compactMap { RepoNameParser.parse($0)?.quant }.sorted().map(\.description)
        #expect(sorted == ["3-bit", "4-bit", "4-bit DWQ", "6-bit", "8-bit", "BF16", "FP16", "FP32"])
        // Numeric, not lexicographic: 10 after 8.
        #expect(QuantTier(bits: 8) < QuantTier(bits: 10))
    }

    @Test func theExactSizeComesFromDtypeCounts() {
        // Packed U32 elements count four bytes each: exactly what is on disk.
        let model = HubModel(id: "o/Qwen2.5-1.5B-Instruct-4bit", parameters: ["BF16": 100_000_000, "U32": 200_000_000])
        #expect(model.exactBytes == Int64(1_000_000_000))
        let size = ModelSize.of(model, parsed: RepoNameParser.parse(model.id)!)
        #expect(size == ModelSize(bytes: 1_000_000_000, source: .exact))
        #expect(size.label == "1.0 GB")
        #expect(HubModel(id: "o/x", parameters: ["WEIRD": 5]).exactBytes == nil)
    }

    @Test func theEstimateUsesTheCalibratedTable() throws {
        // Qwen 1.5B at 4-bit ≈ 837 MB (the seed's calibration): 0.56 bytes/parameter, not the naive 0.5.
        let qwen = ModelSize.of(HubModel(id: "o/Qwen2.5-1.5B-Instruct-4bit"),
                                parsed: try #require(RepoNameParser.parse("o/Qwen2.5-1.5B-Instruct-4bit")))
        #expect(qwen.source == .estimated)
        #expect(abs(Double(qwen.bytes) - 837e6) / 837e6 < 0.01)
        #expect(qwen.label == "~840 MB")
        let table: [(QuantTier, Double)] = [(QuantTier(bits: 2), 0.34), (QuantTier(bits: 3), 0.45),
                                            (QuantTier(bits: 4), 0.56), (QuantTier(bits: 6), 0.80),
                                            (QuantTier(bits: 8), 1.06), (QuantTier(float: "BF16"), 2.1),
                                            (QuantTier(float: "FP16"), 2.1), (QuantTier(float: "FP32"), 4.1)]
        for (tier, perParameter) in table {
            #expect(ModelSize.estimate(sizeToken: "1B", quant: tier).bytes == Int64((perParameter * 1e9).rounded()))
        }
        #expect(ModelSize.estimate(sizeToken: "mini", quant: QuantTier(bits: 4)).source == .unknown)
        #expect(ModelSize.parameterCount(sizeToken: "8x7B") == 56e9)
        #expect(ModelSize.parameterCount(sizeToken: "135M") == 135e6)
    }

    @Test func minimumRAMIsHeadroomPlusTheWeights() {
        #expect(ModelSize.minRAMGB(downloadBytes: 1_100_000_000) == 6)
        #expect(ModelSize.minRAMGB(downloadBytes: 3_200_000_000) == 8)
        #expect(ModelSize.minRAMGB(downloadBytes: 0) == 6)
        #expect(ModelSize.minRAMGB(downloadBytes: 17_000_000_000) == 22)
    }

    @Test func theCuratedShortlistIsFourFourBitModelsTwoPerModality() {
        #expect(CuratedModels.all.count == 4)
        #expect(CuratedModels.all.filter(\.isVision).count == 2)
        for model in CuratedModels.all {
            #expect(RepoNameParser.parse(model.id)?.quant == QuantTier(bits: 4))
            #expect((6...8).contains(model.minRAMGB))
            let size = model.size(in: nil)
            #expect(size.source == .estimated)
            #expect((0.8e9...3.2e9).contains(Double(size.bytes)))
        }
    }
}
