import Foundation
import HomebaseCore
import HomebaseCuration
import HomebaseRouter
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

/// The lifecycle layer between the catalog and the router (design.md §C8, §C10): the
/// catalog with its seven-day cache, every model's `DownloadState`, downloads into the Hub cache, the persisted
/// ready markers, custom repos, delete, and the resolution the floor rules make of the stored choice.
///
/// State lives in the handset's state database (the `device.` namespace, never synced): ready markers
/// (`models.ready`), the catalog (`models.catalog`), a record per download in flight or failed
/// (`models.download.<id>`, a `DownloadRecord`: the owner's pid and attempt, progress and a cancel flag, so
/// `handset models cancel` or `delete` in another process can stop it), and the device-capable setting.
/// `DownloadStateMachine` owns the download states: every command observes the record and applies the machine's
/// actions in one transaction of the state database (`step`), so processes never race each other. Custom repos are a preference
/// (`settings.` namespace). Weights live in the Hub cache, which the app does not own.
public final class OnDeviceModelStore: Sendable {
    enum Key {
        static let ready = "models.ready"
        static let catalog = "models.catalog"
        static let capable = "models.device_capable"
        static let download = "models.download."
        static let custom = "agent.custom_repos"
    }

    public let access: HubAccess
    let device: any SettingsBackend
    public let settings: AgentSettings
    let clock: @Sendable () -> UInt64
    /// The only owner of download state: what this process last observed in the state database, and the
    /// downloads it runs. Lock order: a state-database transaction (`atomically`) first, then this.
    let live: Mutex<DownloadStateMachine>
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
        self.live = Mutex(DownloadStateMachine(isCapable: capable, readyIDs: ready, pid: getpid()))
    }

    // MARK: The device gate

    /// Whether this device can run downloaded models (`handset config device-capable`); on by default.
    public var isCapable: Bool { self.device.string(forKey: Key.capable) != "false" }

    public func setCapable(_ capable: Bool) throws {
        try self.device.set(capable ? "true" : "false", forKey: Key.capable)
    }

    // MARK: States

    /// Every model's state as the state database holds it now (ready markers, each download record and whether
    /// its owner still runs), observed into the machine; a copy, for showing and resolving.
    public func machine() -> DownloadStateMachine {
        let capable = self.isCapable
        let ready = Set(self.device.decodedJSON([String].self, forKey: Key.ready) ?? [])
        var records: [String: DownloadRecord] = [:]
        for key in self.device.keys(withPrefix: Key.download) {
            records[String(key.dropFirst(Key.download.count))] = self.device.decodedJSON(DownloadRecord.self, forKey: key)
        }
        let alive = records.mapValues { Self.isAlive($0.pid) }
        return self.live.withLock { m in
            m.observed(isCapable: capable)
            m.observed(readyIDs: ready)
            for id in Set(m.recordedIDs).union(records.keys) {
                m.observed(id, record: records[id], ownerAlive: alive[id] ?? false)
            }
            return m
        }
    }

    public func state(_ id: String) -> DownloadState {
        let record = self.device.decodedJSON(DownloadRecord.self, forKey: Key.download + id)
        let ready = Set(self.device.decodedJSON([String].self, forKey: Key.ready) ?? [])
        let alive = record.map { Self.isAlive($0.pid) } ?? false
        let capable = self.isCapable
        return self.live.withLock { m in
            m.observed(isCapable: capable)
            m.observed(readyIDs: ready)
            m.observed(id, record: record, ownerAlive: alive)
            return m.state(id)
        }
    }

    /// Runs one event of the machine atomically across processes: in one state-database transaction, observes
    /// `id`'s record and the ready markers, runs `event`, and applies the records and markers it asks for; the
    /// file actions run after the commit. Returns the event's answer.
    private func step<T: Sendable>(_ id: String,
                                   _ event: (inout DownloadStateMachine) -> (T, [DownloadStateMachine.Action]))
        throws -> T
    {
        let (value, files) = try self.device.atomically { db -> (T, [DownloadStateMachine.Action]) in
            let record = db.decodedJSON(DownloadRecord.self, forKey: Key.download + id)
            let ready = Set(db.decodedJSON([String].self, forKey: Key.ready) ?? [])
            let alive = record.map { Self.isAlive($0.pid) } ?? false
            let (value, actions) = self.live.withLock { m in
                m.observed(readyIDs: ready)
                m.observed(id, record: record, ownerAlive: alive)
                return event(&m)
            }
            var files: [DownloadStateMachine.Action] = []
            for action in actions {
                switch action {
                case .persistRecord(let id, let record): try db.setJSON(record, forKey: Key.download + id)
                case .removeRecord(let id): try db.removeValue(forKey: Key.download + id)
                case .persistReady(let id): try Self.persistReady(db, insert: id)
                case .removeReady(let id): try Self.persistReady(db, remove: id)
                case .removePartials, .removeFiles: files.append(action)
                }
            }
            return (value, files)
        }
        for action in files {
            switch action {
            case .removePartials(let id): HubDownloader.removePartials(id, layout: self.access.layout)
            case .removeFiles(let id):
                self.containers.withLock { _ = $0.removeValue(forKey: id) }
                for path in [self.access.layout.repo(id), self.access.layout.locks(id)]
                where FileManager.default.fileExists(atPath: path) {
                    try FileManager.default.removeItem(atPath: path)
                }
            default: break
            }
        }
        return value
    }

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
    /// - Throws: `HubError` (`cancelled` when a cancel or delete won, `alreadyDownloading` when another attempt
    ///   holds the model); the state is then `failed` or `absent`.
    public func download(_ id: String, progress: @escaping @Sendable (DownloadProgress) -> Void = { _ in })
        async throws(HubError)
    {
        let attempt: Int
        switch try Self.stateDatabase({ try self.step(id) { $0.start(id) } }) {
        case .begin(let a): attempt = a
        case .alreadyReady: return
        case .alreadyDownloading: throw .alreadyDownloading(id)
        case .unsupported: throw .http(status: 0, code: nil, message: "this device cannot run downloaded models")
        }
        let ending: DownloadStateMachine.Ending
        var loaded: LoadedModel?
        var failure: HubError?
        do throws(HubError) {
            loaded = try await self.fetch(id, attempt: attempt, progress: progress)
            ending = .loaded
        } catch {
            failure = error
            ending = error == .cancelled ? .cancelled : .failed(error.description)
        }
        let end = try Self.stateDatabase({ try self.step(id) { $0.finished(id, attempt: attempt, ending) } })
        switch end {
        case .ready:
            if let loaded { self.containers.withLock { $0[id] = loaded } }
        case .failed:
            throw failure ?? .cancelled
        default:
            throw .cancelled
        }
    }

    /// The transfer and the load check of one attempt; polls the record every ~100 ms and stops when the attempt
    /// is no longer current (a cancel or delete, from any process).
    private func fetch(_ id: String, attempt: Int, progress: @escaping @Sendable (DownloadProgress) -> Void)
        async throws(HubError) -> LoadedModel
    {
        guard let http = self.access.http else { throw HubError.transport("this build has no HTTP client") }
        let (commit, files) = try await HubClient(http: http, endpoint: self.access.endpoint).tree(id)
        let needed = files.filter(\.isNeededForLoad)
        guard needed.contains(where: { $0.path == "config.json" }),
            needed.contains(where: { $0.path.hasSuffix(".safetensors") })
        else { throw HubError.malformed("\(id) has no config.json and safetensors weights: not an MLX model") }
        let downloader = HubDownloader(http: http, endpoint: self.access.endpoint, layout: self.access.layout)
        let total = needed.reduce(Int64(0)) { $0 + $1.size }
        let meter = Mutex(DownloadProgress(totalBytes: total, nowMs: self.clock()))
        let clock = self.clock
        try await downloader.download(id, commit: commit, files: needed, progress: { [self] done, total in
            let now = clock()
            let snapshot = meter.withLock { m -> DownloadProgress in
                m.totalBytes = total
                m.record(doneBytes: done, nowMs: now)
                return m
            }
            let (applied, actions) = self.live.withLock {
                $0.progress(id, attempt: attempt, fraction: snapshot.fraction, nowMs: now)
            }
            // Written only while the attempt is still current, checked in the same transaction: a progress
            // write never overwrites a cancel flag or another attempt's record.
            if !actions.isEmpty {
                _ = try? self.step(id) { m in ((), m.isCurrent(id, attempt: attempt) ? actions : []) }
            }
            if applied { progress(snapshot) }
        }, shouldCancel: { [self] in !self.isCurrent(id, attempt: attempt) })
        guard let loaded = self.loadCheck(id) else {
            throw HubError.malformed("\(id) downloaded but does not load (config or weights unreadable)")
        }
        return loaded
    }

    /// Whether `attempt` is still the download of `id`, from its record as stored now.
    private func isCurrent(_ id: String, attempt: Int) -> Bool {
        let record = self.device.decodedJSON(DownloadRecord.self, forKey: Key.download + id)
        let alive = record.map { Self.isAlive($0.pid) } ?? false
        return self.live.withLock { m in
            m.observed(id, record: record, ownerAlive: alive)
            return m.isCurrent(id, attempt: attempt)
        }
    }

    /// A state-database failure, as a `HubError` the download reports.
    private static func stateDatabase<T>(_ body: () throws -> T) throws(HubError) -> T {
        do { return try body() } catch { throw .disk("the state database: \(error)") }
    }

    public typealias CancelOutcome = DownloadStateMachine.CancelOutcome

    /// Cancels a download of `id`, wherever it runs (cancel wins over completion and error). The state reads
    /// `absent` at once; the download removes its partial files as it stops.
    @discardableResult
    public func cancel(_ id: String) -> CancelOutcome {
        (try? self.step(id) { $0.cancel(id) }) ?? .notDownloading
    }

    /// Deletes a model: its Hub cache folders (weights, refs, snapshots, locks), the ready marker, any download
    /// record (a download in any process reads its record's removal as a cancel and stops within ~100 ms), and
    /// the loaded container — all of them, or a re-download would complete instantly against stale files.
    public func delete(_ id: String) throws {
        try self.step(id) { ((), $0.delete(id)) }
    }

    private static func persistReady(_ db: any SettingsAccess, insert: String? = nil, remove: String? = nil) throws {
        var ids = db.decodedJSON([String].self, forKey: Key.ready) ?? []
        if let insert, !ids.contains(insert) { ids.append(insert) }
        if let remove { ids.removeAll { $0 == remove } }
        try db.setJSON(ids.sorted(), forKey: Key.ready)
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
