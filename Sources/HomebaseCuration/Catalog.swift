/// One downloadable model: a leaf of the tree (one leaf = one repo id = one download).
public struct CatalogEntry: Sendable, Hashable, Codable {
    public var id: String
    public var parsed: ParsedRepoName
    public var pipelineTag: String?
    public var modelType: String?
    public var isVision: Bool
    public var supportsTools: Bool
    public var size: ModelSize
    /// Minimum-RAM recommendation in GB (a recommendation for the download prompt, not a wall).
    public var minRAMGB: Int
}

/// A size node: one size of one series, with its quant tiers sorted (§5).
public struct CatalogSize: Sendable, Hashable, Codable {
    public var label: String
    public var entries: [CatalogEntry]
}

public struct CatalogSeries: Sendable, Hashable, Codable {
    public var name: String
    public var sizes: [CatalogSize]
}

public struct CatalogFamily: Sendable, Hashable, Codable {
    public var name: String
    public var series: [CatalogSeries]
}

/// How many repos each stage of the funnel (§4's diagram) let through.
public struct CatalogCounts: Sendable, Hashable, Codable {
    /// Distinct repo ids after merging the three listings.
    public var fetched = 0
    /// …whose model_type the runtime can load (gate one).
    public var loadable = 0
    /// …whose name the parser could place ("Other" dropped).
    public var nameable = 0
    /// …that take images.
    public var vision = 0
    /// …that are instruction-tuned (tool calling).
    public var tools = 0
    /// …both: what the browser shows.
    public var shown = 0

    public init() {}
}

/// The built catalog: the gated tree (what the browser shows), every nameable entry (`--all`), and the counts.
public struct Catalog: Sendable, Hashable, Codable {
    public var families: [CatalogFamily]
    /// Every loadable, nameable entry, gated or not, sorted by id.
    public var all: [CatalogEntry]
    public var counts: CatalogCounts

    /// The entries the browser shows (vision AND tools), in tree order.
    public var shown: [CatalogEntry] {
        self.families.flatMap { $0.series.flatMap { $0.sizes.flatMap(\.entries) } }
    }

    /// An entry by repo id, gated or not.
    public func entry(_ id: String) -> CatalogEntry? {
        var lo = 0
        var hi = self.all.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if self.all[mid].id < id { lo = mid + 1 } else { hi = mid }
        }
        return lo < self.all.count && self.all[lo].id == id ? self.all[lo] : nil
    }
}

/// The pure pipeline (§2–§5): merge and de-duplicate the listings, gate one, parse, gates two and three, sizes,
/// tree. No I/O: the shell fetches the pages and hands them here.
public enum CatalogBuilder {
    /// Merges listings by repo id, keeping the first occurrence but filling its missing fields from later ones
    /// (the same repo listed under two tags carries the same metadata; a page with a gap must not erase it).
    public static func merge(_ listings: [[HubModel]]) -> [HubModel] {
        var order: [String] = []
        var byID: [String: HubModel] = [:]
        for listing in listings {
            for model in listing {
                if var known = byID[model.id] {
                    known.pipelineTag = known.pipelineTag ?? model.pipelineTag
                    known.modelType = known.modelType ?? model.modelType
                    known.parameters = known.parameters ?? model.parameters
                    byID[model.id] = known
                } else {
                    byID[model.id] = model
                    order.append(model.id)
                }
            }
        }
        return order.map { byID[$0]! }
    }

    /// Builds the catalog from the three listings.
    public static func build(_ listings: [[HubModel]]) -> Catalog {
        let merged = Self.merge(listings)
        var counts = CatalogCounts()
        counts.fetched = merged.count
        var all: [CatalogEntry] = []
        all.reserveCapacity(merged.count)
        for model in merged {
            guard ModelTypes.isLoadable(model.modelType) else { continue }
            counts.loadable += 1
            let scan = RepoNameScan(repoID: model.id)
            guard let parsed = RepoNameParser.parse(scan) else { continue }
            counts.nameable += 1
            let vision = Capabilities.isVision(scan, pipelineTag: model.pipelineTag, modelType: model.modelType)
            let tools = Capabilities.supportsTools(scan)
            if vision { counts.vision += 1 }
            if tools { counts.tools += 1 }
            if vision && tools { counts.shown += 1 }
            let size = ModelSize.of(model, parsed: parsed)
            all.append(CatalogEntry(id: model.id, parsed: parsed, pipelineTag: model.pipelineTag,
                                    modelType: model.modelType, isVision: vision, supportsTools: tools, size: size,
                                    minRAMGB: ModelSize.minRAMGB(downloadBytes: size.bytes)))
        }
        all.sort { $0.id < $1.id }
        return Catalog(families: Self.tree(all.filter { $0.isVision && $0.supportsTools }), all: all, counts: counts)
    }

    /// Groups entries into family → series → size → quant, each level sorted for reading: families and series by
    /// name, sizes by parameter count, tiers by `QuantTier` order.
    public static func tree(_ entries: [CatalogEntry]) -> [CatalogFamily] {
        var grouped: [String: [String: [String: [CatalogEntry]]]] = [:]
        for e in entries {
            grouped[e.parsed.family, default: [:]][e.parsed.series, default: [:]][e.parsed.sizeLabel, default: []]
                .append(e)
        }
        return grouped.keys.sorted().map { family in
            let series = grouped[family]!
            return CatalogFamily(name: family, series: series.keys.sorted().map { name in
                let sizes = series[name]!
                let labels = sizes.map { ($0.key, ModelSize.parameterCount(sizeToken: $0.value[0].parsed.size) ?? 0) }
                    .sorted { $0.1 != $1.1 ? $0.1 < $1.1 : $0.0 < $1.0 }.map(\.0)
                return CatalogSeries(name: name, sizes: labels.map { label in
                    CatalogSize(label: label, entries: sizes[label]!.sorted {
                        $0.parsed.quant != $1.parsed.quant ? $0.parsed.quant < $1.parsed.quant : $0.id < $1.id
                    })
                })
            })
        }
    }
}
