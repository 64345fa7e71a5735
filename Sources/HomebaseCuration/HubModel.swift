import HomebaseCore

/// One entry of the Hub's `/api/models` listing, as far as the catalog reads it (reference/model-apis.md §6):
/// `id`, `pipeline_tag`, `config.model_type` and the `safetensors` dtype counts. Any of the last three may be
/// missing.
public struct HubModel: Sendable, Hashable, Codable {
    public var id: String
    public var pipelineTag: String?
    public var modelType: String?
    /// dtype → element count (`BF16`, `U32`, …), when the Hub computed it.
    public var parameters: [String: Int]?

    public init(id: String, pipelineTag: String? = nil, modelType: String? = nil, parameters: [String: Int]? = nil) {
        self.id = id
        self.pipelineTag = pipelineTag
        self.modelType = modelType
        self.parameters = parameters
    }

    /// Bytes per stored element of each safetensors dtype. MLX quantised weights are packed into `U32`, so
    /// counting packed elements at four bytes each gives exactly the bytes on disk.
    static func bytesPerElement(_ dtype: String) -> Int? {
        switch dtype {
        case "F64", "I64", "U64": return 8
        case "F32", "I32", "U32": return 4
        case "F16", "BF16", "I16", "U16": return 2
        case "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4": return 1
        default: return nil
        }
    }

    /// The download size from the dtype counts, exact; `nil` when the Hub gave none or a dtype is unknown.
    public var exactBytes: Int64? {
        guard let parameters, !parameters.isEmpty else { return nil }
        var total: Int64 = 0
        for (dtype, count) in parameters {
            guard let width = Self.bytesPerElement(dtype), count >= 0 else { return nil }
            total += Int64(count) * Int64(width)
        }
        return total
    }
}

/// Why a listing page could not be read.
public struct HubListingError: Error, Equatable, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension HubModel {
    /// Parses one `/api/models` page: a JSON array of objects. Entries without a string `id` are skipped (the
    /// Hub always sends one; a page of nothing but broken entries is still a page); anything that is not an
    /// array is an error, so garbage or an error object never reads as "the org has no models".
    public static func parsePage(_ bytes: [UInt8]) throws(HubListingError) -> [HubModel] {
        let root: JSONNode
        do {
            root = try bytes.withUnsafeBufferPointer { buffer throws(JSONNode.ParseError) in
                try JSONNode.parse(buffer)
            }
        } catch {
            throw HubListingError("the listing is not JSON (\(error.reason) at byte \(error.offset))")
        }
        guard let entries = root.arrayValue else { throw HubListingError("the listing is not a JSON array") }
        return entries.compactMap(Self.init(listing:))
    }

    /// One listing entry; `nil` without a string `id` of the form `owner/name`.
    init?(listing node: JSONNode) {
        guard let id = node["id"]?.stringValue, RepoID.isValid(id) else { return nil }
        var parameters: [String: Int]?
        if case .object(let members)? = node["safetensors"]?["parameters"] {
            var counts: [String: Int] = [:]
            for member in members {
                if let n = member.value.intValue { counts[member.key] = n }
            }
            parameters = counts.isEmpty ? nil : counts
        }
        self.init(id: id, pipelineTag: node["pipeline_tag"]?.stringValue,
                  modelType: node["config"]?["model_type"]?.stringValue, parameters: parameters)
    }
}
