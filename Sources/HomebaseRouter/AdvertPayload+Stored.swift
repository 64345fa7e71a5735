import HomebaseCore

extension AdvertPayload.Model {
    /// A model known only by its tag (a grant that lists tags): completion assumed, the rest unknown.
    public static func tagOnly(_ tag: String, capabilities: [String] = ["completion"], loaded: Bool = false)
        -> AdvertPayload.Model {
        AdvertPayload.Model(tag: tag, family: "", parameterSize: "", quantization: "", capabilities: capabilities,
                            contextLength: nil, loaded: loaded, unknown: ["family", "parameter_size", "quantization"])
    }

    /// A model as this device stored it (the sibling advert in its settings, a joined Homebase's row).
    /// Records written before the router kept `AdvertPayload.Model` (as `AdvertisedModel`) may lack `family`,
    /// `parameter_size` and `quantization`, which it held as optional: a missing one reads as its empty value
    /// and is listed in `unknown`, as the wire says of a field the host could not tell. Only stored records
    /// are read this way; adverts off the wire must carry every field (`AdvertPayload`'s own decoding).
    struct Stored: Decodable {
        let model: AdvertPayload.Model

        private enum Keys: String, CodingKey {
            case tag, family, parameterSize = "parameter_size", quantization, capabilities
            case contextLength = "context_length", loaded, cloud, contextSource = "context_source", unknown
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            var unknown = try c.decodeIfPresent([String].self, forKey: .unknown) ?? []
            func text(_ key: Keys) throws -> String {
                if let value = try c.decodeIfPresent(String.self, forKey: key) { return value }
                if !unknown.contains(key.rawValue) { unknown.append(key.rawValue) }
                return ""
            }
            let family = try text(.family)
            let parameterSize = try text(.parameterSize)
            let quantization = try text(.quantization)
            self.model = AdvertPayload.Model(
                tag: try c.decode(String.self, forKey: .tag), family: family, parameterSize: parameterSize,
                quantization: quantization, capabilities: try c.decode([String].self, forKey: .capabilities),
                contextLength: try c.decodeIfPresent(Int.self, forKey: .contextLength),
                loaded: try c.decode(Bool.self, forKey: .loaded), cloud: try c.decodeIfPresent(Bool.self, forKey: .cloud),
                contextSource: try c.decodeIfPresent(String.self, forKey: .contextSource),
                unknown: unknown.isEmpty ? nil : unknown)
        }
    }
}
