/// The catalog's on-disk copy (§2): the browser is instant and works offline after the first load; after seven
/// days the copy is stale and the next open re-fetches (a failed re-fetch still shows the stale copy).
public struct CatalogCacheRecord: Sendable, Codable, Equatable {
    /// Bumped when the record's shape changes; a record of another version reads as absent.
    public static let currentVersion = 1
    /// The shelf life.
    public static let shelfLifeMs: UInt64 = 7 * 24 * 3600 * 1000

    public var version: Int
    public var org: String
    /// When the listing was fetched (wall clock, ms).
    public var fetchedAtMs: UInt64
    /// The merged listing the catalog was built from (rebuilding from it keeps the cache independent of the
    /// pipeline's version).
    public var models: [HubModel]

    public init(org: String, fetchedAtMs: UInt64, models: [HubModel]) {
        self.version = Self.currentVersion
        self.org = org
        self.fetchedAtMs = fetchedAtMs
        self.models = models
    }

    /// Fresh for seven days. A record from the future (the clock was set back) is not trusted as fresh.
    public func isFresh(nowMs: UInt64) -> Bool {
        nowMs >= self.fetchedAtMs && nowMs - self.fetchedAtMs < Self.shelfLifeMs
    }
}

/// What a catalog open should do, given the cached copy (if any), the time and whether the user asked to refresh.
public enum CatalogLoadPlan: Equatable, Sendable {
    /// Use the cached copy; no network.
    case useCache
    /// Fetch; if that fails, fall back to the cached copy when there is one (stale beats nothing).
    case fetch(fallbackToCache: Bool)

    public static func plan(cached: CatalogCacheRecord?, org: String, nowMs: UInt64, refresh: Bool) -> Self {
        guard let cached, cached.version == CatalogCacheRecord.currentVersion, cached.org == org else {
            return .fetch(fallbackToCache: false)
        }
        if !refresh && cached.isFresh(nowMs: nowMs) { return .useCache }
        return .fetch(fallbackToCache: true)
    }
}
