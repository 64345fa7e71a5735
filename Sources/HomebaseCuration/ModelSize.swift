/// A download size and where it came from (§5): exact from the Hub's safetensors dtype counts, or estimated
/// from the parameter count in the name and the calibrated bytes-per-parameter table. Labels say which.
public struct ModelSize: Sendable, Hashable, Codable {
    public enum Source: String, Sendable, Codable {
        case exact
        case estimated
        case unknown
    }

    public var bytes: Int64
    public var source: Source

    public init(bytes: Int64, source: Source) {
        self.bytes = bytes
        self.source = source
    }

    /// `837 MB`, `~1.8 GB` (estimates carry a tilde), or `?`.
    public var label: String {
        guard self.source != .unknown else { return "?" }
        return (self.source == .estimated ? "~" : "") + Self.format(self.bytes)
    }

    /// Decimal units, as the Hub and download prompts use.
    public static func format(_ bytes: Int64) -> String {
        let b = Double(bytes)
        if b >= 1e9 { return Self.oneDecimal(b / 1e9) + " GB" }
        if b >= 1e6 { return String(Int((b / 1e6).rounded())) + " MB" }
        if b >= 1e3 { return String(Int((b / 1e3).rounded())) + " kB" }
        return "\(bytes) B"
    }

    static func oneDecimal(_ x: Double) -> String {
        let tenths = Int((x * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// The size of a listed model: exact when the dtype counts are there, else the estimate.
    public static func of(_ model: HubModel, parsed: ParsedRepoName) -> ModelSize {
        if let exact = model.exactBytes { return ModelSize(bytes: exact, source: .exact) }
        return Self.estimate(sizeToken: parsed.size, quant: parsed.quant)
    }

    /// The calibrated estimate: parameters (from the size token) × bytes per parameter of the tier. Qwen 1.5B at
    /// 4-bit: 1.5e9 × 0.56 ≈ 840 MB, what the real download costs.
    public static func estimate(sizeToken: String, quant: QuantTier) -> ModelSize {
        guard let parameters = Self.parameterCount(sizeToken: sizeToken) else { return ModelSize(bytes: 0, source: .unknown) }
        return ModelSize(bytes: Int64((parameters * quant.bytesPerParameter).rounded()), source: .estimated)
    }

    /// Parameters named by a size token: `1.5B` → 1.5e9, `135M` → 1.35e8, `8x7B` → 5.6e10 (every expert counted;
    /// shared layers make the real figure smaller, which only makes the estimate err on the safe side), `E2B` →
    /// 2e9. Size words have no number: `nil`.
    public static func parameterCount(sizeToken: String) -> Double? {
        var token = Substring(sizeToken)
        if token.first == "E" { token = token.dropFirst() }
        guard let unit = token.last else { return nil }
        let scale: Double
        switch unit {
        case "B": scale = 1e9
        case "M": scale = 1e6
        default: return nil
        }
        let factors = token.dropLast().split(separator: "x").compactMap { Double($0) }
        guard !factors.isEmpty else { return nil }
        return factors.reduce(1, *) * scale
    }

    /// The minimum-RAM recommendation: 4 GB for the OS and the app, plus the weights rounded up to the next 2 GB.
    /// The shortlist lands at 6–8 GB (design.md §C6-C7). Unknown sizes get the smallest recommendation.
    public static func minRAMGB(downloadBytes: Int64) -> Int {
        let gb = Double(max(downloadBytes, 1)) / 1e9
        return 4 + 2 * Int((gb / 2).rounded(.up))
    }
}
