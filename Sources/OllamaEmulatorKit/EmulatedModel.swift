/// One model the emulator can list, show, load and chat with. Every field is derived from the name alone, so
/// the same name always gives the same digest, size and details.
public struct EmulatedModel: Sendable, Equatable {
    /// Full `name:tag`.
    public let name: String
    /// `general.architecture`, which also names the context-length key (`<arch>.context_length`).
    public let architecture: String
    public let family: String
    /// Display string, e.g. `"7.6B"`.
    public let parameterSize: String
    public let parameterCount: Int
    public let quantizationLevel: String
    /// `["completion","tools"]` for chat models, `["embedding"]` for embedding models.
    public let capabilities: [String]
    public let contextLength: Int
    public let embeddingLength: Int
    /// 64 lowercase hex characters, no `sha256:` prefix.
    public let digest: String
    /// Bytes on disk.
    public let size: Int
    /// A cloud stub (`*-cloud` tag, as `ollama pull gpt-oss:120b-cloud` makes): only a manifest on disk, every
    /// request forwarded to `remoteHost` (ollama.com). `nil` for a local model.
    public let remoteHost: String?
    /// The upstream name of a cloud stub (`gpt-oss:120b` for `gpt-oss:120b-cloud`).
    public let remoteModel: String?

    public var isCloud: Bool { self.remoteHost != nil }
    /// Reasons before it answers (capability `thinking`): qwen3, deepseek-r1, gpt-oss, magistral.
    public var canThink: Bool { self.capabilities.contains("thinking") }

    /// Whether it can answer chat requests (what "completion-capable" means to clients).
    public var canComplete: Bool { self.capabilities.contains("completion") }

    /// Adds `:latest` to a name without a tag, as Ollama does.
    public static func normalize(_ name: String) -> String {
        let lastSegment = name.split(separator: "/").last.map(String.init) ?? name
        return lastSegment.contains(":") ? name : name + ":latest"
    }

    public init(name rawName: String) {
        let name = Self.normalize(rawName)
        self.name = name
        let base = String(name.split(separator: ":")[0]).lowercased()
        let tag = String(name.split(separator: ":").dropFirst().first ?? "latest").lowercased()
        let known = Self.families.first { base.hasPrefix($0.prefix) }
        self.architecture = known?.arch ?? "llama"
        self.family = known?.family ?? "llama"
        let isEmbedding = base.contains("embed")
        let thinks = Self.thinkingPrefixes.contains { base.hasPrefix($0) }
        self.capabilities = isEmbedding ? ["embedding"] : ["completion", "tools"] + (thinks ? ["thinking"] : [])
        let isCloud = tag == "cloud" || tag.hasSuffix("-cloud")
        self.remoteHost = isCloud ? "https://ollama.com:443" : nil
        self.remoteModel = isCloud
            ? base + ":" + (tag == "cloud" ? "latest" : String(tag.dropLast("-cloud".count))) : nil
        self.contextLength = known?.context ?? 8192
        self.embeddingLength = isEmbedding ? 768 : 4096
        self.quantizationLevel = isEmbedding ? "F16" : "Q4_K_M"
        let billions: Double
        let sizeTag = isCloud ? String(tag.dropLast(tag == "cloud" ? 5 : 6)) : tag
        if let exact = Self.parameterSizes["\(base):\(tag)"] {
            billions = exact
        } else if sizeTag.hasSuffix("b"), let n = Double(sizeTag.dropLast()) {
            billions = n
        } else if sizeTag.hasSuffix("m"), let n = Double(sizeTag.dropLast()) {
            billions = n / 1000
        } else {
            billions = isEmbedding ? 0.137 : 7.2
        }
        self.parameterCount = Int(billions * 1_000_000_000)
        self.parameterSize = billions < 1
            ? "\(Int((billions * 1000).rounded()))M" : String(format: "%.1fB", billions)
        // Q4_K_M stores about 0.6 bytes per parameter; F16 two bytes.
        // A cloud stub is its manifest's few layers: a few hundred bytes.
        self.size = isCloud ? 384 : Int(Double(self.parameterCount) * (isEmbedding ? 2.0 : 0.6))
        self.digest = Self.hexDigest(of: name)
    }

    /// A deterministic 64-hex string: four FNV-1a 64 hashes of the name with different seeds.
    static func hexDigest(of text: String) -> String {
        (0..<4).map { seed -> String in
            var h: UInt64 = 0xcbf2_9ce4_8422_2325 ^ (UInt64(seed) &* 0x9E37_79B9_7F4A_7C15)
            for b in text.utf8 {
                h ^= UInt64(b)
                h = h &* 0x0000_0100_0000_01B3
            }
            let s = String(h, radix: 16)
            return String(repeating: "0", count: 16 - s.count) + s
        }.joined()
    }

    private static let thinkingPrefixes = ["qwen3", "deepseek-r1", "gpt-oss", "magistral"]

    private static let families: [(prefix: String, arch: String, family: String, context: Int)] = [
        ("qwen3", "qwen3", "qwen3", 40960),
        ("deepseek-r1", "qwen2", "qwen2", 131072),
        ("gpt-oss", "gptoss", "gptoss", 131072),
        ("magistral", "llama", "llama", 40960),
        ("qwen2.5", "qwen2", "qwen2", 32768),
        ("qwen2", "qwen2", "qwen2", 32768),
        ("llama3", "llama", "llama", 131072),
        ("llama", "llama", "llama", 4096),
        ("gemma3", "gemma3", "gemma3", 131072),
        ("gemma2", "gemma2", "gemma2", 8192),
        ("mistral", "llama", "llama", 32768),
        ("phi3", "phi3", "phi3", 131072),
        ("nomic-embed", "nomic-bert", "nomic-bert", 2048),
        ("mxbai-embed", "bert", "bert", 512),
    ]

    private static let parameterSizes: [String: Double] = [
        "qwen2.5:7b": 7.6, "qwen2.5:0.5b": 0.494, "qwen2.5:1.5b": 1.5, "qwen2.5:3b": 3.1,
        "llama3.2:3b": 3.2, "llama3.2:latest": 3.2, "llama3.2:1b": 1.2, "llama3.1:8b": 8.0,
        "nomic-embed-text:latest": 0.137, "gemma3:1b": 1.0, "gemma3:4b": 4.3, "mistral:7b": 7.2,
    ]
}
