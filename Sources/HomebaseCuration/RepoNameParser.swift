/// A repo id parsed into the catalog's four levels (seed 002 §2): family → series → size → quant.
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

/// The heuristic repo-name parser (`MLXRepoParser` in the seed). Community names follow no grammar
/// (`Qwen2.5-1.5B-Instruct-4bit`, `gemma-3-4b-it-4bit`, `Meta-Llama-3.1-8B-Instruct-4bit`), so the parser
/// matches known family needles, then looks for a version just after the family, a size token, variant words
/// and a quantisation suffix. A name it cannot place returns `nil` — the "Other" family, which the browser drops:
/// a row you cannot name is worse than no row.
public enum RepoNameParser {
    /// Family needles and display names. Matching tries the longest needle first, so `codellama` wins over
    /// `llama` and `deepseek` over the `qwen` inside `DeepSeek-R1-Distill-Qwen`.
    static let families: [(needle: String, name: String)] = [
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
    ].sorted { $0.needle.count != $1.needle.count ? $0.needle.count > $1.needle.count : $0.needle < $1.needle }

    /// Size words used when the name carries no numeric size.
    static let sizeWords = ["nano", "tiny", "mini", "small", "medium", "large"]

    /// The name part of `owner/name` (the whole string when there is no slash).
    public static func name(of repoID: String) -> String {
        guard let slash = repoID.lastIndex(of: "/") else { return repoID }
        return String(repoID[repoID.index(after: slash)...])
    }

    /// The name split at `-`, `_` and spaces, lowercased by the caller.
    static func tokens(_ name: String) -> [Substring] {
        name.split(whereSeparator: { $0 == "-" || $0 == "_" || $0 == " " })
    }

    /// Parses a repo id (`mlx-community/Qwen2.5-1.5B-Instruct-4bit`); `nil` for "Other".
    public static func parse(_ repoID: String) -> ParsedRepoName? {
        let original = Self.name(of: repoID)
        let lower = original.lowercased()
        guard let (family, end) = Self.family(in: lower) else { return nil }
        let version = Self.version(in: lower, from: end)
        let tokens = Self.tokens(lower)
        guard let size = Self.size(in: tokens) else { return nil }
        var series = family
        if let version { series += " " + version }
        return ParsedRepoName(family: family, series: series, size: size,
                              variants: Self.variants(in: tokens, lower: lower, family: family),
                              quant: Self.quant(in: tokens))
    }

    /// The first family needle (longest first) found at a word start: the start of the name or just after a
    /// separator or a digit (`Meta-Llama`, `dolphin-2.9-llama3`). Returns the display name and where it ends.
    static func family(in lower: String) -> (String, String.Index)? {
        for (needle, name) in Self.families {
            var i = lower.startIndex
            while i < lower.endIndex {
                if lower[i...].hasPrefix(needle), i == lower.startIndex || !lower[lower.index(before: i)].isLetter {
                    return (name, lower.index(i, offsetBy: needle.count))
                }
                i = lower.index(after: i)
            }
        }
        return nil
    }

    /// A version right after the family token: one optional separator, an optional `v`/`r`, then digits with at
    /// most one dot, not followed by a size letter (`qwen-7b` has no version; `qwen2.5-7b` has 2.5). The `r`
    /// form keeps its letter (`DeepSeek R1`).
    static func version(in lower: String, from start: String.Index) -> String? {
        var i = start
        if i < lower.endIndex, lower[i] == "-" || lower[i] == "_" || lower[i] == " " { i = lower.index(after: i) }
        var prefix = ""
        if i < lower.endIndex, lower[i] == "v" || lower[i] == "r" {
            prefix = lower[i] == "r" ? "R" : ""
            i = lower.index(after: i)
        }
        var digits = ""
        var dots = 0
        while i < lower.endIndex {
            let c = lower[i]
            if c.isASCII && c.isNumber {
                digits.append(c)
            } else if c == ".", dots == 0, !digits.isEmpty {
                dots += 1
                digits.append(c)
            } else {
                break
            }
            i = lower.index(after: i)
        }
        if digits.hasSuffix(".") { digits.removeLast() }
        guard !digits.isEmpty else { return nil }
        if i < lower.endIndex, ["b", "m", "x", "k"].contains(lower[i]) { return nil }
        return prefix + digits
    }

    /// The first size token: `1.5b`, `70b`, `135m`, `8x7b`, `e2b` (Gemma 3n's effective sizes); else a size word.
    static func size(in tokens: [Substring]) -> String? {
        for token in tokens {
            if let size = Self.sizeToken(token) { return size }
        }
        for token in tokens where Self.sizeWords.contains(String(token)) { return String(token) }
        return nil
    }

    static func sizeToken(_ token: Substring) -> String? {
        var body = token
        var prefix = ""
        if body.first == "e", body.count > 2 {
            prefix = "E"
            body = body.dropFirst()
        }
        guard let unit = body.last, unit == "b" || unit == "m" else { return nil }
        let number = body.dropLast()
        let parts = number.split(separator: "x", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), parts.allSatisfy(Self.isDecimal) else { return nil }
        if parts.count == 2 && !prefix.isEmpty { return nil }
        return prefix + parts.joined(separator: "x") + unit.uppercased()
    }

    static func isDecimal(_ text: Substring) -> Bool {
        guard let first = text.first, first.isASCII, first.isNumber else { return false }
        var dots = 0
        for c in text {
            if c == "." { dots += 1 } else if !(c.isASCII && c.isNumber) { return false }
        }
        return dots <= 1 && text.last != "."
    }

    static func variants(in tokens: [Substring], lower: String, family: String) -> [String] {
        var found: [String] = []
        if lower.contains("coder") && family != "Code Llama" && family != "StarCoder" { found.append("Coder") }
        if lower.contains("math") { found.append("Math") }
        if tokens.contains("vl") || lower.contains("vision") { found.append("Vision") }
        if lower.contains("thinking") { found.append("Thinking") }
        return found
    }

    /// The quantisation suffix; a name without one is the unquantised original, read as BF16 (what mlx-community
    /// publishes unquantised builds in).
    static func quant(in tokens: [Substring]) -> QuantTier {
        var tier: QuantTier?
        for (i, token) in tokens.enumerated() {
            if token.hasSuffix("bit"), let bits = Int(token.dropLast(3)), (1...16).contains(bits) {
                var recipe: String?
                if i + 1 < tokens.count, ["dwq", "awq", "qat", "gptq"].contains(String(tokens[i + 1])) {
                    recipe = tokens[i + 1].uppercased()
                } else if i > 0, tokens[i - 1] == "qat" {
                    recipe = "QAT"
                }
                tier = QuantTier(bits: bits, recipe: recipe)
            } else if token == "mxfp4" {
                tier = QuantTier(bits: 4, recipe: "MXFP4")
            } else if token == "bf16" {
                tier = QuantTier(float: "BF16")
            } else if token == "fp16" || token == "f16" {
                tier = QuantTier(float: "FP16")
            } else if token == "fp32" || token == "f32" {
                tier = QuantTier(float: "FP32")
            }
        }
        return tier ?? QuantTier(float: "BF16")
    }
}
