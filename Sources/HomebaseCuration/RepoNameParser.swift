/// A repo id parsed into the catalog's four levels (design.md §C2): family → series → size → quant.
public struct ParsedRepoName: Sendable, Hashable, Codable {
    /// `Qwen`, `Llama`, `Gemma`, …
    public var family: String
    /// The family with its version: `Qwen 2.5`, `Llama 3.2`; the family alone when the name has no version.
    public var series: String
    /// The size token as written in labels: `1.5B`, `8x7B`, `E2B`, `mini`.
    public var size: String
    /// Meaningful variants, in a fixed order: `Coder`, `Math`, `Vision`, `Thinking`.
    public var variants: [String]
    /// The leaf.
    public var quant: QuantTier

    /// The size node's label: `1.5B · Coder`.
    public var sizeLabel: String {
        ([self.size] + self.variants).joined(separator: " · ")
    }
}

/// A repo name lowercased (ASCII) and split into tokens once, for the parser and the gates. Bytes, not
/// `String` indices: the catalog runs this over thousands of names and must stay within its CPU budget.
struct RepoNameScan {
    /// The name part of the id, ASCII-lowercased.
    let lower: [UInt8]
    /// Ranges of `lower` between `-`, `_` and spaces.
    let tokens: [Range<Int>]

    init(repoID: String) {
        var bytes = Array(repoID.utf8)
        if let slash = bytes.lastIndex(of: UInt8(ascii: "/")) { bytes.removeSubrange(...slash) }
        for i in bytes.indices where (65...90).contains(bytes[i]) { bytes[i] |= 0x20 }
        self.lower = bytes
        var tokens: [Range<Int>] = []
        var start = 0
        for (i, b) in bytes.enumerated() where Self.isSeparator(b) {
            if i > start { tokens.append(start..<i) }
            start = i + 1
        }
        if bytes.count > start { tokens.append(start..<bytes.count) }
        self.tokens = tokens
    }

    static func isSeparator(_ b: UInt8) -> Bool { b == 45 || b == 95 || b == 32 }  // - _ space
    static func isDigit(_ b: UInt8) -> Bool { (48...57).contains(b) }
    static func isLetter(_ b: UInt8) -> Bool { (97...122).contains(b) || b >= 128 }

    func token(_ r: Range<Int>) -> ArraySlice<UInt8> { self.lower[r] }

    func hasToken(_ word: [UInt8]) -> Bool { self.tokens.contains { self.lower[$0].elementsEqual(word) } }

    func contains(_ needle: [UInt8]) -> Bool { self.firstIndex(of: needle, from: 0) != nil }

    func firstIndex(of needle: [UInt8], from: Int) -> Int? {
        guard needle.count <= self.lower.count else { return nil }
        var i = from
        let first = needle[0]
        while i + needle.count <= self.lower.count {
            if self.lower[i] == first {
                var j = 1
                while j < needle.count && self.lower[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}

/// The heuristic repo-name parser (design.md §C2-C4). Community names follow no grammar
/// (`Qwen2.5-1.5B-Instruct-4bit`, `gemma-3-4b-it-4bit`, `Meta-Llama-3.1-8B-Instruct-4bit`), so the parser
/// matches known family needles, then looks for a version just after the family, a size token, variant words
/// and a quantisation suffix. A name it cannot place returns `nil` — the "Other" family, which the browser drops:
/// a row you cannot name is worse than no row.
public enum RepoNameParser {
    /// Family needles and display names. Matching tries the longest needle first, so `codellama` wins over
    /// `llama` and `deepseek` over the `qwen` inside `DeepSeek-R1-Distill-Qwen`.
    static let families: [(needle: [UInt8], name: String)] = [
        ("codellama", "Code Llama"), ("llama", "Llama"), ("llava", "LLaVA"),
        ("qwen", "Qwen"), ("qwq", "QwQ"),
        ("codegemma", "CodeGemma"), ("paligemma", "PaliGemma"), ("recurrentgemma", "RecurrentGemma"),
        ("gemma", "Gemma"),
        ("phi", "Phi"), ("mistral", "Mistral"), ("mixtral", "Mixtral"), ("ministral", "Ministral"),
        ("pixtral", "Pixtral"), ("codestral", "Codestral"), ("devstral", "Devstral"), ("magistral", "Magistral"),
        ("deepseek", "DeepSeek"), ("smollm", "SmolLM"), ("smolvlm", "SmolVLM"), ("granite", "Granite"),
        ("olmo", "OLMo"), ("olmoe", "OLMoE"), ("exaone", "EXAONE"), ("internlm", "InternLM"), ("glm", "GLM"),
        ("starcoder", "StarCoder"), ("stablelm", "StableLM"), ("openelm", "OpenELM"), ("falcon", "Falcon"),
        ("nemotron", "Nemotron"), ("hermes", "Hermes"), ("dolphin", "Dolphin"), ("c4ai-command", "Command"),
        ("aya", "Aya"), ("minicpm", "MiniCPM"), ("gpt-oss", "gpt-oss"), ("ernie", "ERNIE"), ("lfm", "LFM"),
        ("baichuan", "Baichuan"), ("hunyuan", "Hunyuan"), ("idefics", "Idefics"), ("fastvlm", "FastVLM"),
        ("kimi", "Kimi"), ("jamba", "Jamba"), ("bitnet", "BitNet"), ("mimo", "MiMo"), ("seed-oss", "Seed-OSS"),
    ].map { (Array($0.0.utf8), $0.1) }
        .sorted { $0.needle.count != $1.needle.count ? $0.needle.count > $1.needle.count : $0.needle.lexicographicallyPrecedes($1.needle) }

    /// Size words used when the name carries no numeric size.
    static let sizeWords = ["nano", "tiny", "mini", "small", "medium", "large"].map { Array($0.utf8) }

    /// The name part of `owner/name` (the whole string when there is no slash).
    public static func name(of repoID: String) -> String {
        guard let slash = repoID.lastIndex(of: "/") else { return repoID }
        return String(repoID[repoID.index(after: slash)...])
    }

    /// Parses a repo id (`mlx-community/Qwen2.5-1.5B-Instruct-4bit`); `nil` for "Other".
    public static func parse(_ repoID: String) -> ParsedRepoName? {
        Self.parse(RepoNameScan(repoID: repoID))
    }

    static func parse(_ scan: RepoNameScan) -> ParsedRepoName? {
        guard let (family, end) = Self.family(in: scan), let size = Self.size(in: scan) else { return nil }
        var series = family
        if let version = Self.version(in: scan.lower, from: end) { series += " " + version }
        return ParsedRepoName(family: family, series: series, size: size,
                              variants: Self.variants(in: scan, family: family), quant: Self.quant(in: scan))
    }

    /// The first family needle (longest first) found at a word start: the start of the name or just after a
    /// non-letter (`Meta-Llama`, `dolphin-2.9-llama3`). Returns the display name and where it ends.
    static func family(in scan: RepoNameScan) -> (String, Int)? {
        for (needle, name) in Self.families {
            var from = 0
            while let i = scan.firstIndex(of: needle, from: from) {
                if i == 0 || !RepoNameScan.isLetter(scan.lower[i - 1]) { return (name, i + needle.count) }
                from = i + 1
            }
        }
        return nil
    }

    /// A version right after the family token: one optional separator, an optional `v`/`r`, then digits with at
    /// most one dot, not followed by a size letter (`qwen-7b` has no version; `qwen2.5-7b` has 2.5). The `r`
    /// form keeps its letter (`DeepSeek R1`).
    static func version(in lower: [UInt8], from start: Int) -> String? {
        var i = start
        if i < lower.count, RepoNameScan.isSeparator(lower[i]) { i += 1 }
        var out: [UInt8] = []
        if i < lower.count, lower[i] == UInt8(ascii: "v") || lower[i] == UInt8(ascii: "r") {
            if lower[i] == UInt8(ascii: "r") { out.append(UInt8(ascii: "R")) }
            i += 1
        }
        let prefix = out.count
        var dots = 0
        while i < lower.count {
            let c = lower[i]
            if RepoNameScan.isDigit(c) {
                out.append(c)
            } else if c == UInt8(ascii: "."), dots == 0, out.count > prefix {
                dots += 1
                out.append(c)
            } else {
                break
            }
            i += 1
        }
        if out.last == UInt8(ascii: ".") { out.removeLast() }
        guard out.count > prefix else { return nil }
        if i < lower.count, [UInt8(ascii: "b"), UInt8(ascii: "m"), UInt8(ascii: "x"), UInt8(ascii: "k")].contains(lower[i]) {
            return nil
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The first size token: `1.5b`, `70b`, `135m`, `8x7b`, `e2b` (Gemma 3n's effective sizes); else a size word.
    static func size(in scan: RepoNameScan) -> String? {
        for r in scan.tokens {
            if let size = Self.sizeToken(scan.token(r)) { return size }
        }
        for r in scan.tokens {
            let t = scan.token(r)
            if Self.sizeWords.contains(where: { t.elementsEqual($0) }) { return String(decoding: t, as: UTF8.self) }
        }
        return nil
    }

    static func sizeToken(_ token: ArraySlice<UInt8>) -> String? {
        var body = token
        var prefix: [UInt8] = []
        if body.first == UInt8(ascii: "e"), body.count > 2 {
            prefix = [UInt8(ascii: "E")]
            body = body.dropFirst()
        }
        guard let unit = body.last, unit == UInt8(ascii: "b") || unit == UInt8(ascii: "m") else { return nil }
        let number = body.dropLast()
        let parts = number.split(separator: UInt8(ascii: "x"), omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), parts.allSatisfy(Self.isDecimal) else { return nil }
        if parts.count == 2 && !prefix.isEmpty { return nil }
        return String(decoding: prefix + number + [unit - 32], as: UTF8.self)
    }

    static func isDecimal(_ text: ArraySlice<UInt8>) -> Bool {
        guard let first = text.first, RepoNameScan.isDigit(first), text.last != UInt8(ascii: ".") else { return false }
        var dots = 0
        for c in text {
            if c == UInt8(ascii: ".") { dots += 1 } else if !RepoNameScan.isDigit(c) { return false }
        }
        return dots <= 1
    }

    static let coder = Array("coder".utf8), math = Array("math".utf8), vision = Array("vision".utf8),
        thinking = Array("thinking".utf8), vl = Array("vl".utf8)

    static func variants(in scan: RepoNameScan, family: String) -> [String] {
        var found: [String] = []
        if scan.contains(Self.coder) && family != "Code Llama" && family != "StarCoder" { found.append("Coder") }
        if scan.contains(Self.math) { found.append("Math") }
        if scan.hasToken(Self.vl) || scan.contains(Self.vision) { found.append("Vision") }
        if scan.contains(Self.thinking) { found.append("Thinking") }
        return found
    }

    static let recipes = ["dwq", "awq", "qat", "gptq"].map { Array($0.utf8) }

    /// The quantisation suffix; a name without one is the unquantised original, read as BF16 (what mlx-community
    /// publishes unquantised builds in).
    static func quant(in scan: RepoNameScan) -> QuantTier {
        var tier: QuantTier?
        for (i, r) in scan.tokens.enumerated() {
            let t = scan.token(r)
            if t.count > 3, t.suffix(3).elementsEqual("bit".utf8), let bits = Int(String(decoding: t.dropLast(3), as: UTF8.self)),
                (1...16).contains(bits) {
                var recipe: String?
                if i + 1 < scan.tokens.count, case let next = scan.token(scan.tokens[i + 1]),
                    Self.recipes.contains(where: { next.elementsEqual($0) }) {
                    recipe = String(decoding: next, as: UTF8.self).uppercased()
                } else if i > 0, scan.token(scan.tokens[i - 1]).elementsEqual("qat".utf8) {
                    recipe = "QAT"
                }
                tier = QuantTier(bits: bits, recipe: recipe)
            } else if t.elementsEqual("mxfp4".utf8) {
                tier = QuantTier(bits: 4, recipe: "MXFP4")
            } else if t.elementsEqual("bf16".utf8) {
                tier = QuantTier(float: "BF16")
            } else if t.elementsEqual("fp16".utf8) || t.elementsEqual("f16".utf8) {
                tier = QuantTier(float: "FP16")
            } else if t.elementsEqual("fp32".utf8) || t.elementsEqual("f32".utf8) {
                tier = QuantTier(float: "FP32")
            }
        }
        return tier ?? QuantTier(float: "BF16")
    }
}
