import HomebaseCore

/// One look at a runtime: its version, installed models with their capabilities and context length, and which
/// are loaded. The verifier and the monitor share it.
struct RuntimeProbe: Sendable {
    /// What a probe found. `sizes` (bytes on disk, by tag) lets the verifier pick the cheapest trial model.
    struct Snapshot: Sendable, Equatable {
        var version: String
        var models: [RuntimeModelInfo]
        var sizes: [String: Int64]
    }

    /// `/api/show` answers by model name, valid while the digest stays the same. A probe every 30 s would
    /// otherwise ask `show` for every model every time, though a model's capabilities never change in place.
    struct ShowCache: Sendable {
        var entries: [String: (digest: String, info: OllamaModelInfo)] = [:]
    }

    let client: OllamaManagementClient

    /// Version, tags, show for each model not cached, then ps. A model that disappears between `tags` and
    /// `show` (404) is left out: it was deleted meanwhile. Every other failure fails the probe.
    func snapshot(cache: inout ShowCache) async throws -> Snapshot {
        let version = try await self.client.version()
        let installed = try await self.client.tags()
        var models: [RuntimeModelInfo] = []
        var sizes: [String: Int64] = [:]
        var fresh = ShowCache()
        for model in installed {
            if model.isCloud {
                // A cloud stub's `show` is forwarded to ollama.com (502 offline, 403 with cloud disabled): what the
                // tags say is enough, and its failure is never the local runtime's.
                models.append(RuntimeModelInfo(
                    tag: model.name, family: model.family, parameterSize: model.parameterSize,
                    quantization: model.quantization, capabilities: model.capabilities ?? ["completion"],
                    contextLength: nil, loaded: false, cloud: true))
                sizes[model.name] = model.size
                continue
            }
            let info: OllamaModelInfo
            if let cached = cache.entries[model.name], cached.digest == model.digest, !model.digest.isEmpty {
                info = cached.info
            } else {
                do {
                    info = try await self.client.show(model.name)
                } catch OllamaError.http(status: 404, _) {
                    continue
                }
            }
            fresh.entries[model.name] = (model.digest, info)
            sizes[model.name] = model.size
            var entry = RuntimeModelInfo(
                tag: model.name, family: model.family, parameterSize: model.parameterSize,
                quantization: model.quantization, capabilities: info.capabilities,
                contextLength: info.contextLength, loaded: false)
            entry.trainedContextLength = info.contextLength
            models.append(entry)
        }
        cache = fresh
        let ps = try await self.client.ps()
        Self.apply(loaded: Self.served(ps), to: &models)
        // Issue 37: the memory each loaded model takes and when its keep-alive unloads it.
        var entries: [String: OllamaLoadedModel] = [:]
        for model in ps { entries[Self.normalized(model.name)] = model }
        for index in models.indices {
            let entry = entries[Self.normalized(models[index].tag)]
            models[index].memoryBytes = entry?.sizeBytes
            models[index].vramBytes = entry?.vramBytes
            models[index].unloadsAtMs = entry?.expiresAt.flatMap(RFC3339.milliseconds)
        }
        return Snapshot(version: version, models: models, sizes: sizes)
    }

    /// Ollama's context when nothing says otherwise (`OLLAMA_CONTEXT_LENGTH` unset, under 24 GiB of VRAM):
    /// what an unloaded model is advertised with, labelled a default, until `/api/ps` reports what it serves.
    static let defaultContextLength = 4096

    /// Marks each model loaded or not, with the context it is served with: what `/api/ps` reports for a loaded
    /// one, else the trained length capped at `defaultContextLength` (`contextServed` false).
    static func apply(loaded: [String: Int?], to models: inout [RuntimeModelInfo]) {
        for index in models.indices where !models[index].cloud {
            let served = loaded[Self.normalized(models[index].tag)]
            models[index].loaded = served != nil
            if let context = served ?? nil {
                models[index].contextLength = context
                models[index].contextServed = true
            } else {
                models[index].contextLength = models[index].trainedContextLength.map { min($0, Self.defaultContextLength) }
                models[index].contextServed = false
            }
        }
    }

    /// What `/api/ps` lists, by name normalised (`:latest` added) so they compare with tags, with the context
    /// each is served with when the server says.
    func loaded() async throws -> [String: Int?] {
        Self.served(try await self.client.ps())
    }

    /// `loaded()` of what `/api/ps` listed.
    static func served(_ ps: [OllamaLoadedModel]) -> [String: Int?] {
        var out: [String: Int?] = [:]
        for model in ps { out[Self.normalized(model.name)] = .some(model.contextLength) }
        return out
    }

    /// A model name as Ollama stores it: `:latest` added when the name has no tag.
    static func normalized(_ name: String) -> String {
        let lastSegment = name.split(separator: "/").last.map(String.init) ?? name
        return lastSegment.contains(":") ? name : name + ":latest"
    }
}
