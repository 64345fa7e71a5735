import Testing
@testable import HomebaseCuration

@Suite struct CatalogBuildTests {
    static let text = [
        HubModel(id: "mlx-community/Qwen2.5-1.5B-Instruct-4bit", pipelineTag: "text-generation", modelType: "qwen2",
                 parameters: ["BF16": 233_000_000, "U32": 151_000_000]),
        HubModel(id: "mlx-community/gemma-3-4b-it-8bit", pipelineTag: "image-text-to-text", modelType: "gemma3"),
        HubModel(id: "mlx-community/whisper-large-v3-turbo", pipelineTag: "text-generation", modelType: "whisper"),
        HubModel(id: "mlx-community/mystery-model", pipelineTag: "text-generation", modelType: "llama"),
    ]
    static let vision = [
        HubModel(id: "mlx-community/gemma-3-4b-it-4bit", pipelineTag: "image-text-to-text", modelType: "gemma3"),
        HubModel(id: "mlx-community/gemma-3-4b-it-bf16", pipelineTag: "image-text-to-text", modelType: "gemma3"),
        HubModel(id: "mlx-community/gemma-3-4b-it-8bit", pipelineTag: "image-text-to-text", modelType: "gemma3",
                 parameters: ["BF16": 10]),
        HubModel(id: "mlx-community/Qwen2-VL-2B-Instruct-4bit", pipelineTag: "image-text-to-text", modelType: "qwen2_vl"),
        HubModel(id: "mlx-community/paligemma-3b-mix-448-8bit", pipelineTag: "image-text-to-text", modelType: "paligemma"),
    ]
    static let anyToAny = [
        HubModel(id: "mlx-community/gemma-3n-E2B-it-4bit", pipelineTag: "any-to-any", modelType: nil),
    ]

    @Test func theFunnelCountsEachGate() {
        let catalog = CatalogBuilder.build([Self.text, Self.vision, Self.anyToAny])
        // gemma-3-4b-it-8bit is listed twice: one repo.
        #expect(catalog.counts.fetched == 9)
        #expect(catalog.counts.loadable == 8)  // whisper dropped
        #expect(catalog.counts.nameable == 7)  // mystery-model has no size: Other
        #expect(catalog.counts.vision == 6)
        #expect(catalog.counts.tools == 6)     // paligemma "mix" is not instruction-tuned by name
        #expect(catalog.counts.shown == 5)
        #expect(catalog.all.count == 7)
        #expect(catalog.shown.count == 5)
        #expect(!catalog.shown.contains { $0.id.contains("Qwen2.5-1.5B") })  // text-only: not in the browser
    }

    @Test func mergeFillsGapsFromLaterListings() {
        let merged = CatalogBuilder.merge([[HubModel(id: "o/a")], [HubModel(id: "o/a", pipelineTag: "any-to-any",
                                                                            modelType: "qwen2_vl",
                                                                            parameters: ["F16": 1])]])
        #expect(merged == [HubModel(id: "o/a", pipelineTag: "any-to-any", modelType: "qwen2_vl", parameters: ["F16": 1])])
    }

    @Test func theTreeIsFamilySeriesSizeQuantWithTiersSorted() throws {
        let catalog = CatalogBuilder.build([Self.text, Self.vision, Self.anyToAny])
        #expect(catalog.families.map(\.name) == ["Gemma", "Qwen"])
        let gemma = try #require(catalog.families.first)
        #expect(gemma.series.map(\.name) == ["Gemma 3"])
        #expect(gemma.series[0].sizes.map(\.label) == ["E2B", "4B"])
        let tiers = gemma.series[0].sizes[1].entries.map { $0.parsed.quant.description }
        #expect(tiers == ["4-bit", "8-bit", "BF16"])
        // The 8-bit was listed first without sizes, then with dtype counts: merged, exact.
        #expect(gemma.series[0].sizes[1].entries[1].size.source == .exact)
        #expect(catalog.entry("mlx-community/Qwen2.5-1.5B-Instruct-4bit")?.size.bytes == Int64(1_070_000_000))
        #expect(catalog.entry("nobody/none") == nil)
    }

    @Test func aListingPageParsesAndGarbageIsAnError() throws {
        let page = #"[{"_id":"1","id":"mlx-community/Qwen3-4B-4bit","pipeline_tag":"text-generation","config":{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3"},"safetensors":{"parameters":{"BF16":388956160,"U32":503316480},"total":892272640}},{"_id":"2","id":"mlx-community/bare"},{"_id":"3"}]"#
        let models = try HubModel.parsePage(Array(page.utf8))
        #expect(models.count == 2)
        #expect(models[0] == HubModel(id: "mlx-community/Qwen3-4B-4bit", pipelineTag: "text-generation",
                                      modelType: "qwen3", parameters: ["BF16": 388_956_160, "U32": 503_316_480]))
        #expect(models[1] == HubModel(id: "mlx-community/bare"))
        #expect(throws: HubListingError.self) { try HubModel.parsePage(Array("<html>oops".utf8)) }
        #expect(throws: HubListingError.self) { try HubModel.parsePage(Array(#"{"error":"Internal Error"}"#.utf8)) }
        // A truncated page is not a shorter page.
        #expect(throws: HubListingError.self) { try HubModel.parsePage(Array(page.utf8.prefix(200))) }
    }
}

@Suite struct CatalogCacheTests {
    let day: UInt64 = 24 * 3600 * 1000

    @Test func sevenDayShelfLife() {
        let record = CatalogCacheRecord(org: "mlx-community", fetchedAtMs: 1000 * self.day, models: [])
        #expect(record.isFresh(nowMs: 1000 * self.day))
        #expect(record.isFresh(nowMs: 1007 * self.day - 1))
        #expect(!record.isFresh(nowMs: 1007 * self.day))
        #expect(!record.isFresh(nowMs: 999 * self.day))  // from the future
    }

    @Test func thePlan() {
        let record = CatalogCacheRecord(org: "mlx-community", fetchedAtMs: 10 * self.day, models: [])
        #expect(CatalogLoadPlan.plan(cached: nil, org: "mlx-community", nowMs: 0, refresh: false)
                == .fetch(fallbackToCache: false))
        #expect(CatalogLoadPlan.plan(cached: record, org: "mlx-community", nowMs: 11 * self.day, refresh: false)
                == .useCache)
        #expect(CatalogLoadPlan.plan(cached: record, org: "mlx-community", nowMs: 11 * self.day, refresh: true)
                == .fetch(fallbackToCache: true))
        #expect(CatalogLoadPlan.plan(cached: record, org: "mlx-community", nowMs: 18 * self.day, refresh: false)
                == .fetch(fallbackToCache: true))
        #expect(CatalogLoadPlan.plan(cached: record, org: "other-org", nowMs: 11 * self.day, refresh: false)
                == .fetch(fallbackToCache: false))
    }
}

@Suite struct HubWireTests {
    @Test func linkHeaderNext() {
        #expect(LinkHeader.next(#"<https://huggingface.co/api/models?author=x&cursor=eyJ>; rel="next""#)
                == "https://huggingface.co/api/models?author=x&cursor=eyJ")
        #expect(LinkHeader.next(#"<http://a/prev>; rel="prev", <http://a/next?x=1,2>; rel="next""#) == "http://a/next?x=1,2")
        #expect(LinkHeader.next(#"<http://a/last>; rel="last""#) == nil)
        #expect(LinkHeader.next(nil) == nil)
        #expect(LinkHeader.next("garbage <unclosed") == nil)
    }

    @Test func treeParsingAndPathSafety() throws {
        let sha = String(repeating: "ab", count: 32)
        let oid = String(repeating: "1f", count: 20)
        let json = #"[{"type":"file","oid":"\#(oid)","size":10,"path":"config.json"},{"type":"directory","oid":"\#(oid)","size":0,"path":"sub"},{"type":"file","oid":"\#(oid)","size":99,"path":"model.safetensors","lfs":{"oid":"\#(sha)","size":99,"pointerSize":134}}]"#
        let files = try HubTree.parse(Array(json.utf8))
        #expect(files.map(\.path) == ["config.json", "model.safetensors"])
        #expect(files[0].etag == oid)
        #expect(files[1].etag == sha)
        for bad in ["../evil", "/abs", "a//b", "a/./b", ""] {
            let hostile = #"[{"type":"file","oid":"\#(oid)","size":1,"path":"\#(bad)"}]"#
            #expect(throws: HubListingError.self) { try HubTree.parse(Array(hostile.utf8)) }
        }
        let badSha = #"[{"type":"file","oid":"\#(oid)","size":1,"path":"w","lfs":{"oid":"zz"}}]"#
        #expect(throws: HubListingError.self) { try HubTree.parse(Array(badSha.utf8)) }
    }

    @Test func cacheLayout() {
        let layout = HubCacheLayout(root: "/h/hub/")
        let id = "mlx-community/Qwen3-4B-4bit"
        #expect(layout.blob(id, etag: "e") == "/h/hub/models--mlx-community--Qwen3-4B-4bit/blobs/e")
        #expect(layout.lock(id, etag: "e") == "/h/hub/.locks/models--mlx-community--Qwen3-4B-4bit/e.lock")
        #expect(layout.ref(id) == "/h/hub/models--mlx-community--Qwen3-4B-4bit/refs/main")
        #expect(HubCacheLayout.symlinkTarget(path: "config.json", etag: "e") == "../../blobs/e")
        #expect(HubCacheLayout.symlinkTarget(path: "sub/dir/file", etag: "e") == "../../../../blobs/e")
        #expect(HubCacheLayout.root(environment: ["HF_HOME": "/x"], home: "/home/u") == "/x/hub")
        #expect(HubCacheLayout.root(environment: [:], home: "/home/u") == "/home/u/.cache/huggingface/hub")
    }

    @Test func gitBlobIDMatchesGit() {
        // `printf 'hello\n' | git hash-object --stdin`
        #expect(HubTree.gitBlobID(Array("hello\n".utf8)) == "ce013625030ba8dba906f756967f9e9ca394464a")
    }
}
