// catalog-bench: CPU time of the pure catalog pipeline (tools/bench-catalog). Reads a listing file (a JSON array
// of /api/models entries), splits it into the three pipeline-tag listings the client would fetch, and times
// parsing and CatalogBuilder.build — merge, gate one, name parser, gates two and three, sizes, tree — over
// several runs. Prints one JSON object.
import Foundation
import HomebaseCuration

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func cpuMs() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) * 1000 + Double(ts.tv_nsec) / 1e6
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let path = arguments.first, let data = FileManager.default.contents(atPath: path) else {
    FileHandle.standardError.write(Data("usage: catalog-bench LISTING.json [RUNS]\n".utf8))
    exit(64)
}
let runs = arguments.count > 1 ? max(1, Int(arguments[1]) ?? 20) : 20
let bytes = Array(data)

var parseMs: [Double] = []
var models: [HubModel] = []
for _ in 0..<runs {
    let t = cpuMs()
    models = (try? HubModel.parsePage(bytes)) ?? []
    parseMs.append(cpuMs() - t)
}
let listings = ModelTypes.queriedPipelineTags.map { tag in models.filter { $0.pipelineTag == tag } }
var buildMs: [Double] = []
var catalog = CatalogBuilder.build(listings)
for _ in 0..<runs {
    let t = cpuMs()
    catalog = CatalogBuilder.build(listings)
    buildMs.append(cpuMs() - t)
}
func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
let c = catalog.counts
let out: [String: Any] = [
    "repos_in_file": models.count, "runs": runs,
    "parse_ms_median": median(parseMs), "pipeline_ms_median": median(buildMs), "pipeline_ms_min": buildMs.min()!,
    "counts": ["fetched": c.fetched, "loadable": c.loadable, "nameable": c.nameable, "vision": c.vision,
               "tools": c.tools, "shown": c.shown],
]
let json = try JSONSerialization.data(withJSONObject: out, options: [.sortedKeys])
print(String(decoding: json, as: UTF8.self))
