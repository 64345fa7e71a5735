/// One leaf level of the catalog tree: how the weights are stored (design.md §C5).
///
/// Quantised tiers sort numerically by bits (2-bit before 4-bit before 8-bit), float formats after them
/// (BF16, FP16, FP32), so the sensible choice for a handset is the first one listed.
public struct QuantTier: Sendable, Hashable, Comparable, CustomStringConvertible, Codable {
    /// Bits per weight for quantised tiers (`mxfp4` counts as 4); `nil` for float formats.
    public var bits: Int?
    /// The float format (`BF16`, `FP16`, `FP32`) when `bits` is `nil`.
    public var float: String?
    /// A recipe suffix kept in the label (`DWQ`, `MXFP4`, `QAT`), so two 4-bit builds stay two leaves.
    public var recipe: String?

    public init(bits: Int, recipe: String? = nil) {
        self.bits = bits
        self.float = nil
        self.recipe = recipe
    }

    public init(float: String) {
        self.bits = nil
        self.float = float
        self.recipe = nil
    }

    /// Float formats in their listed order, after every quantised tier.
    static let floatOrder = ["BF16", "FP16", "FP32"]

    public var description: String {
        if let bits {
            return "\(bits)-bit" + (self.recipe.map { " \($0)" } ?? "")
        }
        return self.float ?? "?"
    }

    /// Sort key: quantised by bits, then recipe-less first; floats after all of them in `floatOrder`.
    var sortKey: (Int, Int, String) {
        if let bits { return (0, bits, self.recipe ?? "") }
        return (1, Self.floatOrder.firstIndex(of: self.float ?? "") ?? Self.floatOrder.count, self.float ?? "")
    }

    public static func < (lhs: QuantTier, rhs: QuantTier) -> Bool {
        lhs.sortKey < rhs.sortKey
    }

    /// Calibrated bytes per parameter (design.md §C5), for sizes the Hub did not report. Real quantised checkpoints
    /// carry unquantised embeddings, per-block scales and metadata, so 4-bit is 0.56, not the naive 0.5. 5-bit
    /// has no calibrated value: it is the midpoint of its 4- and 6-bit neighbours.
    public var bytesPerParameter: Double {
        switch self.bits {
        case 2: return 0.34
        case 3: return 0.45
        case 4: return 0.56
        case 5: return 0.68
        case 6: return 0.80
        case 8: return 1.06
        case let b?: return Double(b) / 8 * 1.06
        case nil: return self.float == "FP32" ? 4.1 : 2.1
        }
    }
}
