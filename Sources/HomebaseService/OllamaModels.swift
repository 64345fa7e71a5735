import FoundationEssentials
import HomebaseCore

/// One installed model, as `/api/tags` lists it (reference/model-apis.md §1).
public struct OllamaInstalledModel: Sendable, Equatable {
    /// Full `name:tag`, e.g. `qwen2.5:7b`.
    public var name: String
    /// Bytes on disk.
    public var size: Int64
    /// 64 hex characters, no `sha256:` prefix.
    public var digest: String
    /// `details.family`, e.g. `qwen2`; empty when absent.
    public var family: String
    /// `details.parameter_size`, a display string such as `7.6B`; empty when absent.
    public var parameterSize: String
    /// `details.quantization_level`, e.g. `Q4_K_M`; empty when absent.
    public var quantization: String
    /// `remote_host` of a cloud stub (`ollama pull gpt-oss:120b-cloud`): its requests are forwarded there
    /// (ollama.com), so its prompts leave the machine. Nil for a local model.
    public var remoteHost: String?
    /// `capabilities` as current servers list them in `/api/tags`; nil from older servers.
    public var capabilities: [String]?

    public init(name: String, size: Int64, digest: String, family: String, parameterSize: String,
                quantization: String, remoteHost: String? = nil, capabilities: [String]? = nil) {
        self.name = name
        self.size = size
        self.digest = digest
        self.family = family
        self.parameterSize = parameterSize
        self.quantization = quantization
        self.remoteHost = remoteHost
        self.capabilities = capabilities
    }

    /// A cloud stub: not local inference.
    public var isCloud: Bool { !(self.remoteHost ?? "").isEmpty }
}

/// What `/api/show` says about one model that matters to routing.
public struct OllamaModelInfo: Sendable, Equatable {
    /// `capabilities` (`completion`, `tools`, `embedding`, …). Servers too old to send the field get an
    /// inferred list: `["embedding"]` for BERT-family or `*embed*` models, else `["completion"]`.
    public var capabilities: [String]
    /// `model_info["<arch>.context_length"]` where `<arch>` is `model_info["general.architecture"]`; `nil` when
    /// either is absent.
    public var contextLength: Int?
    /// `general.architecture`, e.g. `qwen2`; `nil` when absent.
    public var architecture: String?

    public init(capabilities: [String], contextLength: Int?, architecture: String?) {
        self.capabilities = capabilities
        self.contextLength = contextLength
        self.architecture = architecture
    }

    public var canComplete: Bool { ModelCapabilities.canComplete(self.capabilities) }
}

/// One model loaded in memory, as `/api/ps` lists it.
public struct OllamaLoadedModel: Sendable, Equatable {
    public var name: String
    /// RFC 3339 time the model unloads (a date in 2318 for a pinned model); `nil` when absent.
    public var expiresAt: String?
    /// The context the runtime serves it with (what a prompt may fill); `nil` from servers that do not say.
    public var contextLength: Int?
    /// Memory it takes (`size`), and of that on the GPU (`size_vram`), bytes; nil when absent.
    public var sizeBytes: Int64?
    public var vramBytes: Int64?

    public init(name: String, expiresAt: String?, contextLength: Int? = nil, sizeBytes: Int64? = nil,
                vramBytes: Int64? = nil) {
        self.name = name
        self.expiresAt = expiresAt
        self.contextLength = contextLength
        self.sizeBytes = sizeBytes
        self.vramBytes = vramBytes
    }
}

// MARK: Wire shapes (Decodable). Absent fields are optional; a field of the wrong type fails decoding.

struct OllamaWire {
    struct Version: Decodable {
        let version: String
    }

    struct Details: Decodable {
        let family: String?
        let parameter_size: String?
        let quantization_level: String?
    }

    struct Tags: Decodable {
        struct Entry: Decodable {
            let name: String?
            let model: String?
            let size: Int64?
            let digest: String?
            let details: Details?
            let remote_host: String?
            let capabilities: [String]?
        }

        /// `null` is accepted as none (Go marshals a nil slice as `null`).
        let models: [Entry]?
    }

    struct Show: Decodable {
        let capabilities: [String]?
        let details: Details?
        let model_info: ModelInfo?
    }

    /// `model_info` has a key per architecture, so it is read through dynamic keys: the architecture first,
    /// then the context-length key built from it (reference §1: no key is plainly `context_length`).
    struct ModelInfo: Decodable {
        let architecture: String?
        let contextLength: Int?

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: DynamicKey.self)
            self.architecture = try container.decodeIfPresent(String.self, forKey: DynamicKey("general.architecture"))
            if let architecture = self.architecture, !architecture.isEmpty {
                self.contextLength = try container.decodeIfPresent(
                    Int.self, forKey: DynamicKey("\(architecture).context_length"))
            } else {
                self.contextLength = nil
            }
        }
    }

    struct DynamicKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { self.stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    struct PS: Decodable {
        struct Entry: Decodable {
            let name: String?
            let model: String?
            let expires_at: String?
            /// The context served (current servers).
            let context_length: Int?
            let size: Int64?
            let size_vram: Int64?
        }

        let models: [Entry]?
    }

    struct PullLine: Decodable {
        let status: String?
        let digest: String?
        let total: Int64?
        let completed: Int64?
        let error: String?
    }

    struct ChatCompletion: Decodable {
        struct Choice: Decodable {
            struct Message: Decodable {
                let content: String?
            }

            let message: Message?
        }

        let choices: [Choice]?
    }

    /// Native `{"error":"..."}` or the `/v1` `{"error":{"message":"..."}}`.
    struct ErrorBody: Decodable {
        let message: String?

        enum CodingKeys: String, CodingKey { case error }
        enum NestedKeys: String, CodingKey { case message }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if let text = try? container.decode(String.self, forKey: .error) {
                self.message = text
            } else if let nested = try? container.nestedContainer(keyedBy: NestedKeys.self, forKey: .error) {
                self.message = try? nested.decode(String.self, forKey: .message)
            } else {
                self.message = nil
            }
        }
    }

    /// The capabilities an old server (no `capabilities` field) most likely has.
    static func inferredCapabilities(name: String, family: String?, architecture: String?) -> [String] {
        let hints = [name.lowercased(), family?.lowercased() ?? "", architecture?.lowercased() ?? ""]
        let embedding = hints.contains { $0.contains("bert") || $0.contains("embed") }
        return embedding ? ["embedding"] : ["completion"]
    }
}
