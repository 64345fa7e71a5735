import Foundation
import HomebaseCore
import HomebaseCuration
import HomebaseTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the handset reaches the Hub and keeps its cache: `HF_ENDPOINT` and the huggingface_hub cache root.
public struct HubAccess: Sendable {
    /// `nil` in builds (and tests) with no HTTP: catalog fetches and downloads then fail with a clear error.
    public var http: HTTPClient?
    public var endpoint: String
    public var layout: HubCacheLayout
    public var org: String

    public init(http: HTTPClient?, endpoint: String = HubClient.defaultEndpoint, cacheRoot: String,
                org: String = "mlx-community") {
        self.http = http
        self.endpoint = endpoint
        self.layout = HubCacheLayout(root: cacheRoot)
        self.org = org
    }

    /// From the environment, as huggingface_hub reads it: `HF_ENDPOINT`, `HF_HUB_CACHE` / `HF_HOME` / ….
    public static func environment(_ environment: [String: String], http: HTTPClient?) -> HubAccess {
        HubAccess(http: http, endpoint: environment["HF_ENDPOINT"] ?? HubClient.defaultEndpoint,
                  cacheRoot: HubCacheLayout.root(environment: environment, home: environment["HOME"] ?? "/tmp"),
                  org: environment["HOMEBASE_HUB_ORG"] ?? "mlx-community")
    }
}

/// What `handset models catalog` shows and where it came from.
public struct CatalogLoad: Sendable {
    public enum Source: String, Sendable {
        /// The cached copy, still fresh.
        case cache
        /// Fetched just now.
        case network
        /// The fetch failed; the stale cached copy stands in.
        case staleCache = "stale_cache"
    }

    public var catalog: Catalog
    public var source: Source
    public var fetchedAtMs: UInt64
    /// Why the fetch failed, for a `staleCache` load.
    public var warning: String?
}

/// A model whose weights passed the load check: the stand-in runtime's "container" (§8: the download doubles as
/// a warm-up; delete evicts it).
public struct LoadedModel: Sendable, Equatable {
    public var id: String
    public var commit: String
    public var modelType: String?
    public var weightFiles: Int
    public var weightBytes: Int64
}

/// The lifecycle layer between the catalog and the router (`OnDeviceModelStore` in the seed, §7–§8): the
/// catalog with its seven-day cache, every model's `DownloadState`, downloads into the Hub cache, the persisted
/// ready markers, custom repos, delete, and the resolution the floor rules make of the stored choice.
///
/// State lives in the handset's state database (the `device.` namespace, never synced): ready markers
/// (`models.ready`), the catalog (`models.catalog`), a record per download in flight or failed
/// (`models.download.<id>`, carrying the owner's pid, progress and a cancel flag, so `handset models cancel` in
/// another process can stop it), and the device-capable setting. Custom repos are a preference
/// (`settings.` namespace). Weights live in the Hub cache, which the app does not own.
public final class OnDeviceModelStore: Sendable {
    enum Key {
        static let ready = "models.ready"
        static let catalog = "models.catalog"
        static let capable = "models.device_capable"
        static let download = "models.download."
        static let custom = "agent.custom_repos"
    }

    /// A download in flight (owned by `pid`) or failed (`failure`).
    struct DownloadRecord: Codable, Equatable {
        var pid: Int32
        var fraction: Double
        var cancel: Bool
        var failure: String?
    }

    public let access: HubAccess
    let device: any SettingsBackend
    public let settings: AgentSettings
    let clock: @Sendable () -> UInt64
    /// This process's view: markers plus the downloads it runs.
    let live: Mutex<DownloadStateMachine>
    let running = Mutex<[String: Int]>([:])
    /// Loaded containers by id (the stand-in runtime's memory).
    let containers = Mutex<[String: LoadedModel]>([:])

    public init(access: HubAccess, device: any SettingsBackend, settings: AgentSettings,
                clock: @escaping @Sendable () -> UInt64) {
        self.access = access
        self.device = device
        self.settings = settings
        self.clock = clock
        let capable = device.string(forKey: Key.capable) != "false"
        let ready = Set(device.decodedJSON([String].self, forKey: Key.ready) ?? [])
        self.live = Mutex(DownloadStateMachine(isCapable: capable, readyIDs: ready))
    }

    // MARK: The device gate

    /// Whether this device can run downloaded models (`handset config device-capable`); on by default.
    public var isCapable: Bool { self.device.string(forKey: Key.capable) != "false" }

    public func setCapable(_ capable: Bool) throws {
        try self.device.set(capable ? "true" : "false", forKey: Key.capable)
    }

    // MARK: States

    /// The states as persisted, with this process's downloads on top: ready from the markers, downloading for a
    /// record whose owner still runs, failed for a recorded failure, unsupported on an incapable device.
    public func machine() -> DownloadStateMachine {
        let ready = Set(self.device.decodedJSON([String].self, forKey: Key.ready) ?? [])
        var m = DownloadStateMachine(isCapable: self.isCapable, readyIDs: ready)
        let mine = self.running.withLock { $0 }
        for key in self.device.keys(withPrefix: Key.download) {
            let id = String(key.dropFirst(Key.download.count))
            guard mine[id] == nil, let record = self.device.decodedJSON(DownloadRecord.self, forKey: key),
                case .begin(let attempt) = m.start(id)
            else { continue }
            if let failure = record.failure {
                m.failed(id, attempt: attempt, message: failure)
            } else if Self.isAlive(record.pid) {
                m.progress(id, attempt: attempt, fraction: record.fraction)
            } else {
                m.cancel(id)  // its process died: the partial files stay for a resume
            }
        }
        let liveMachine = self.live.withLock { $0 }
        for id in mine.keys {
            if case .begin(let attempt) = m.start(id), case .downloading(let p) = liveMachine.state(id) {
                m.progress(id, attempt: attempt, fraction: p)
            }
        }
        return m
    }

    public func state(_ id: String) -> DownloadState { self.machine().state(id) }

    static func isAlive(_ pid: Int32) -> Bool {
        pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }

    // MARK: The catalog

    /// The cached record, if readable.
    public func cachedCatalogRecord() -> CatalogCacheRecord? {
        self.device.decodedJSON(CatalogCacheRecord.self, forKey: Key.catalog)
    }

    /// The catalog from the fresh cache without network, else fetched (three tags in parallel) and cached; a
    /// failed fetch falls back to a stale cache with a warning, and fails only with no cache at all.
    public func loadCatalog(refresh: Bool) async throws(HubError) -> CatalogLoad {
        let cached = self.cachedCatalogRecord()
        let now = self.clock()
        switch CatalogLoadPlan.plan(cached: cached, org: self.access.org, nowMs: now, refresh: refresh) {
        case .useCache:
            return CatalogLoad(catalog: CatalogBuilder.build([cached!.models]), source: .cache,
                               fetchedAtMs: cached!.fetchedAtMs)
        case .fetch(let fallback):
            do throws(HubError) {
                guard let http = self.access.http else { throw HubError.transport("this build has no HTTP client") }
                let listings = try await HubClient(http: http, endpoint: self.access.endpoint)
                    .catalogListings(org: self.access.org)
                let merged = CatalogBuilder.merge(listings)
                try? self.device.setJSON(CatalogCacheRecord(org: self.access.org, fetchedAtMs: now, models: merged),
                                         forKey: Key.catalog)
                return CatalogLoad(catalog: CatalogBuilder.build([merged]), source: .network, fetchedAtMs: now)
            } catch {
                guard fallback, let cached else { throw error }
                return CatalogLoad(catalog: CatalogBuilder.build([cached.models]), source: .staleCache,
                                   fetchedAtMs: cached.fetchedAtMs, warning: error.description)
            }
        }
    }

    /// The catalog from the cache only (any age): what resolution uses, never touching the network.
    public func offlineCatalog() -> Catalog? {
        self.cachedCatalogRecord().map { CatalogBuilder.build([$0.models]) }
    }

    // MARK: Custom repos

    public var customRepos: CustomRepos {
        CustomRepos(ids: self.settings.backend.decodedJSON([String].self, forKey: Key.custom) ?? [])
    }

    public func addCustom(_ id: String) throws -> CustomRepos.AddOutcome {
        var custom = self.customRepos
        let outcome = custom.add(id)
        if outcome == .added { try self.settings.backend.setJSON(custom.ids, forKey: Key.custom) }
        return outcome
    }

    /// Removes a custom repo and its weights; if it was the active choice, the choice snaps back to the floor.
    ///
    /// - Returns: whether it was listed, and whether the choice was reset.
    public func removeCustom(_ id: String) throws -> (removed: Bool, choiceReset: Bool) {
        var custom = self.customRepos
        guard custom.remove(id) else { return (false, false) }
        try self.settings.backend.setJSON(custom.ids, forKey: Key.custom)
        try self.delete(id)
        let current = self.settings.modelChoice?.modelID
        guard OnDeviceResolution.choiceAfterRemoving(id, current: current) == nil, current != nil else {
            return (true, false)
        }
        try self.settings.clearModelChoice()
        return (true, true)
    }

    // MARK: Resolution

    /// What answers for `choice` (§10): a ready, known model, else the floor with its reason.
    public func resolve(choice: String?) -> OnDeviceResolution {
        let custom = self.customRepos
        // The catalog is read only for ids that are neither curated nor custom.
        let needsCatalog = choice.map { CuratedModels.model($0) == nil && !custom.contains($0) } ?? false
        return OnDeviceResolution.resolve(choice: choice, catalog: needsCatalog ? self.offlineCatalog() : nil,
                                          custom: custom, states: self.machine())
    }

    /// Whether a model choice names a hub model this device knows (curated, catalog or custom).
    public func isKnown(_ id: String) -> Bool {
        OnDeviceResolution.origin(of: id, catalog: self.offlineCatalog(), custom: self.customRepos) != nil
    }

    /// Whether the id is a vision model, as far as the device knows (the curated flag, else the catalog's gate;
    /// a custom repo is provisionally text until its weights load).
    public func isVision(_ id: String) -> Bool {
        if let curated = CuratedModels.model(id) { return curated.isVision }
        return self.offlineCatalog()?.entry(id)?.isVision ?? false
    }

    // MARK: Download, cancel, delete

    /// Downloads `id` into the Hub cache, checks it loads, and marks it ready. Progress comes every ~100 ms.
    ///
    /// - Throws: `HubError` (`cancelled` when a cancel won); the state is then `failed` or `absent`.
    public func download(_ id: String, progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in })
        async throws(HubError)
    {
        let attempt: Int
        switch self.begin(id) {
        case .begin(let a): attempt = a
        case .alreadyReady: return
        case .alreadyDownloading: throw .locked("\(id) is already downloading")
        case .unsupported: throw .http(status: 0, code: nil, message: "this device cannot run downloaded models")
        }
        defer { _ = self.running.withLock { $0.removeValue(forKey: id) } }
        do {
            guard let http = self.access.http else { throw HubError.transport("this build has no HTTP client") }
            let (commit, files) = try await HubClient(http: http, endpoint: self.access.endpoint).tree(id)
            let needed = files.filter(\.isNeededForLoad)
            guard needed.contains(where: { $0.path == "config.json" }),
                needed.contains(where: { $0.path.hasSuffix(".safetensors") })
            else { throw HubError.malformed("\(id) has no config.json and safetensors weights: not an MLX model") }
            let downloader = HubDownloader(http: http, endpoint: self.access.endpoint, layout: self.access.layout)
            let total = needed.reduce(Int64(0)) { $0 + $1.size }
            let meter = Mutex((DownloadProgress(totalBytes: total, nowMs: self.clock()), UInt64(0)))
            let clock = self.clock
            try await downloader.download(id, commit: commit, files: needed, progress: { [self] done, total in
                let (snapshot, persist) = meter.withLock { m -> (DownloadProgress, Bool) in
                    let now = clock()
                    m.0.totalBytes = total
                    m.0.record(doneBytes: done, nowMs: now)
                    let persist = now >= m.1 + 500
                    if persist { m.1 = now }
                    return (m.0, persist)
                }
                let applied = self.live.withLock { $0.progress(id, attempt: attempt, fraction: snapshot.fraction) }
                if applied && persist { self.updateRecord(id) { $0.fraction = snapshot.fraction } }
                if applied { progress(snapshot) }
            }, shouldCancel: { [self] in self.cancelRequested(id, attempt: attempt) })
            guard let loaded = self.loadCheck(id) else {
                throw HubError.malformed("\(id) downloaded but does not load (config or weights unreadable)")
            }
            // Cancel wins: a cancel that arrived while the last file landed keeps the model absent.
            if self.cancelRequested(id, attempt: attempt) { throw HubError.cancelled }
            guard self.live.withLock({ $0.completed(id, attempt: attempt) }) else { throw HubError.cancelled }
            try? self.persistReady(insert: id)
            self.containers.withLock { $0[id] = loaded }
            try? self.device.removeValue(forKey: Key.download + id)
        } catch let error as HubError {
            if error == .cancelled || self.cancelRequested(id, attempt: attempt) {
                self.live.withLock { _ = $0.cancel(id) }
                HubDownloader.removePartials(id, layout: self.access.layout)
                try? self.device.removeValue(forKey: Key.download + id)
                throw HubError.cancelled
            }
            if self.live.withLock({ $0.failed(id, attempt: attempt, message: error.description) }) {
                try? self.device.setJSON(DownloadRecord(pid: 0, fraction: 0, cancel: false, failure: error.description),
                                         forKey: Key.download + id)
            }
            throw error
        } catch {
            throw HubError.transport("\(error)")
        }
    }

    private func begin(_ id: String) -> DownloadStateMachine.StartOutcome {
        // Another process's download counts: start from the persisted view.
        let persisted = self.machine().state(id)
        if persisted == .unsupported { return .unsupported }
        if case .downloading = persisted { return .alreadyDownloading }
        if persisted == .ready { return .alreadyReady }
        let outcome = self.live.withLock { m -> DownloadStateMachine.StartOutcome in
            if case .failed = m.state(id) { m.delete(id) }
            return m.start(id)
        }
        if case .begin(let attempt) = outcome {
            self.running.withLock { $0[id] = attempt }
            try? self.device.setJSON(DownloadRecord(pid: getpid(), fraction: 0, cancel: false, failure: nil),
                                     forKey: Key.download + id)
        }
        return outcome
    }

    private func cancelRequested(_ id: String, attempt: Int) -> Bool {
        if self.running.withLock({ $0[id] }) != attempt { return true }
        return self.device.decodedJSON(DownloadRecord.self, forKey: Key.download + id)?.cancel == true
    }

    private func updateRecord(_ id: String, _ change: (inout DownloadRecord) -> Void) {
        guard var record = self.device.decodedJSON(DownloadRecord.self, forKey: Key.download + id) else { return }
        change(&record)
        try? self.device.setJSON(record, forKey: Key.download + id)
    }

    public enum CancelOutcome: Equatable, Sendable {
        /// A download running in this process or another was told to stop; it removes its partial files.
        case requested
        /// Its process had died: the partial files were removed here.
        case cleanedUp
        case notDownloading
    }

    /// Cancels a download of `id`, wherever it runs (cancel wins over completion and error).
    @discardableResult
    public func cancel(_ id: String) -> CancelOutcome {
        if self.running.withLock({ $0.removeValue(forKey: id) }) != nil {
            self.live.withLock { _ = $0.cancel(id) }
            self.updateRecord(id) { $0.cancel = true }
            return .requested
        }
        guard let record = self.device.decodedJSON(DownloadRecord.self, forKey: Key.download + id),
            record.failure == nil
        else { return .notDownloading }
        if Self.isAlive(record.pid) {
            self.updateRecord(id) { $0.cancel = true }
            return .requested
        }
        HubDownloader.removePartials(id, layout: self.access.layout)
        try? self.device.removeValue(forKey: Key.download + id)
        return .cleanedUp
    }

    /// Deletes a model: its Hub cache folders (weights, refs, snapshots, locks), the ready marker, any failure
    /// record, and the loaded container — all three, or a re-download would complete instantly against stale
    /// files.
    public func delete(_ id: String) throws {
        _ = self.cancel(id)
        self.live.withLock { $0.delete(id) }
        for path in [self.access.layout.repo(id), self.access.layout.locks(id)]
        where FileManager.default.fileExists(atPath: path) {
            try FileManager.default.removeItem(atPath: path)
        }
        try self.persistReady(remove: id)
        try self.device.removeValue(forKey: Key.download + id)
        self.containers.withLock { _ = $0.removeValue(forKey: id) }
    }

    private func persistReady(insert: String? = nil, remove: String? = nil) throws {
        var ids = self.device.decodedJSON([String].self, forKey: Key.ready) ?? []
        if let insert, !ids.contains(insert) { ids.append(insert) }
        if let remove { ids.removeAll { $0 == remove } }
        try self.device.setJSON(ids.sorted(), forKey: Key.ready)
    }

    // MARK: The stand-in runtime's load

    /// The loaded container for a ready model, loading it on first use: `refs/main` names a snapshot whose
    /// `config.json` is a JSON object and whose `.safetensors` files resolve to blobs with a readable header.
    /// `nil` when anything is missing: the caller answers from the floor.
    public func loadedModel(_ id: String) -> LoadedModel? {
        if let loaded = self.containers.withLock({ $0[id] }), self.snapshotExists(id, commit: loaded.commit) {
            return loaded
        }
        guard let loaded = self.loadCheck(id) else {
            self.containers.withLock { _ = $0.removeValue(forKey: id) }
            return nil
        }
        self.containers.withLock { $0[id] = loaded }
        return loaded
    }

    private func snapshotExists(_ id: String, commit: String) -> Bool {
        FileManager.default.fileExists(atPath: self.access.layout.snapshotFile(id, commit: commit, path: "config.json"))
    }

    func loadCheck(_ id: String) -> LoadedModel? {
        let layout = self.access.layout
        guard let ref = FileManager.default.contents(atPath: layout.ref(id)),
            let commit = String(data: ref, encoding: .utf8), HubTree.isHex(commit, count: 40)
        else { return nil }
        let snapshot = layout.snapshot(id, commit: commit)
        guard let configBytes = FileManager.default.contents(atPath: snapshot + "/config.json"),
            let config = try? JSONNode.parse(String(decoding: configBytes, as: UTF8.self)), config.isObject
        else { return nil }
        var files = 0
        var bytes: Int64 = 0
        let enumerator = FileManager.default.enumerator(atPath: snapshot)
        while let path = enumerator?.nextObject() as? String {
            guard path.hasSuffix(".safetensors") else { continue }
            guard let size = Self.safetensorsSize(snapshot + "/" + path) else { return nil }
            files += 1
            bytes += size
        }
        guard files > 0 else { return nil }
        return LoadedModel(id: id, commit: commit, modelType: config["model_type"]?.stringValue, weightFiles: files,
                           weightBytes: bytes)
    }

    /// The file's size when it is a readable safetensors file (8-byte little-endian header length, then a JSON
    /// object header that fits in the file).
    static func safetensorsSize(_ path: String) -> Int64? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let lengthBytes = try? handle.read(upToCount: 8), lengthBytes.count == 8 else { return nil }
        let length = lengthBytes.reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard let size = try? handle.seekToEnd(), length <= 100_000_000, 8 + length <= size,
            (try? handle.seek(toOffset: 8)) != nil, let header = try? handle.read(upToCount: Int(length)),
            let node = try? JSONNode.parse(String(decoding: header, as: UTF8.self)), node.isObject
        else { return nil }
        return Int64(size)
    }
}
