/// The hand-vetted shortlist (§6, `OnDeviceModelCatalog.curated`): four 4-bit models for one-tap download, two
/// for text and two for vision. They bypass the browser's gates (they were vetted by hand) and funnel into the
/// same download machinery.
public struct CuratedModel: Sendable, Hashable, Codable {
    public var id: String
    public var title: String
    public var isVision: Bool
    /// Parameters, for the size estimate when the catalog has not been loaded.
    public var parameters: Double
    public var minRAMGB: Int

    /// The size: the catalog's (exact when the Hub reported dtype counts) when it lists the model, else the
    /// calibrated estimate.
    public func size(in catalog: Catalog?) -> ModelSize {
        if let entry = catalog?.entry(self.id) { return entry.size }
        return ModelSize(bytes: Int64((self.parameters * QuantTier(bits: 4).bytesPerParameter).rounded()),
                         source: .estimated)
    }
}

public enum CuratedModels {
    public static let all: [CuratedModel] = [
        CuratedModel(id: "mlx-community/Qwen2.5-1.5B-Instruct-4bit", title: "Qwen2.5 1.5B", isVision: false,
                     parameters: 1.5e9, minRAMGB: 6),
        CuratedModel(id: "mlx-community/Llama-3.2-3B-Instruct-4bit", title: "Llama 3.2 3B", isVision: false,
                     parameters: 3.2e9, minRAMGB: 6),
        CuratedModel(id: "mlx-community/Qwen2-VL-2B-Instruct-4bit", title: "Qwen2-VL 2B", isVision: true,
                     parameters: 2.2e9, minRAMGB: 6),
        CuratedModel(id: "mlx-community/gemma-3-4b-it-4bit", title: "Gemma 3 4B", isVision: true,
                     parameters: 4.3e9, minRAMGB: 8),
    ]

    public static func model(_ id: String) -> CuratedModel? {
        Self.all.first { $0.id == id }
    }
}
