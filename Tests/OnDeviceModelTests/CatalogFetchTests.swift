import Foundation
import HomebaseCuration
import HubEmulatorKit
import Testing
@testable import HomebaseDevice
@testable import HomebaseRouter

@Suite struct CatalogFetchTests {
    @Test func threeTagsPagedAndMergedGiveTheWholeCatalog() async throws {
        let paged = try Hub(pageSize: 7)
        defer { paged.stop() }
        let whole = try Hub()
        defer { whole.stop() }
        let a = try await paged.store().loadCatalog(refresh: false)
        let b = try await whole.store().loadCatalog(refresh: false)
        #expect(a.source == .network)
        #expect(a.catalog == b.catalog)
        // The fixture's speech and embedding repos are under other tags: never fetched.
        let underOtherTags = Hub.fixture.filter {
            !ModelTypes.queriedPipelineTags.contains($0["pipeline_tag"]?.stringValue ?? "")
        }.count
        #expect(a.catalog.counts.fetched == Hub.fixture.count - underOtherTags)
        #expect(a.catalog.all.count > 150 && a.catalog.counts.shown > 20)
        // Paging followed the Link header: many more listing requests than three.
        #expect(paged.emulator.hitCount("/api/models") > 3 * 3)
        #expect(whole.emulator.hitCount("/api/models") == 3)
    }

    @Test func theCacheServesOfflineForSevenDaysThenRefetches() async throws {
        let hub = try Hub()
        let store = try hub.store()
        _ = try await store.loadCatalog(refresh: false)
        hub.emulator.stop()  // offline from here on
        let cached = try await store.loadCatalog(refresh: false)
        #expect(cached.source == .cache)
        // A week later the fetch is attempted, fails, and the stale copy stands in with a warning.
        let later = OnDeviceModelStore(access: store.access, device: hub.device, settings: hub.settings,
                                       clock: { 1_800_000_000_000 + CatalogCacheRecord.shelfLifeMs })
        let stale = try await later.loadCatalog(refresh: false)
        #expect(stale.source == .staleCache)
        #expect(stale.warning?.contains("cannot reach the Hub") == true)
        #expect(stale.catalog == cached.catalog)
        hub.stop()
    }

    @Test(arguments: [HubFaults.Listing.http500, .garbage, .truncated])
    func aBrokenListingIsAnErrorNotAnEmptyCatalog(fault: HubFaults.Listing) async throws {
        var faults = HubFaults()
        faults.listing = fault
        let hub = try Hub(faults: faults)
        defer { hub.stop() }
        let store = try hub.store()
        await #expect(throws: HubError.self) { try await store.loadCatalog(refresh: false) }
        #expect(store.cachedCatalogRecord() == nil)
        do {
            _ = try await store.loadCatalog(refresh: false)
        } catch {
            switch fault {
            case .http500: #expect(error == .http(status: 500, code: nil, message: "Internal Error - We're working hard to fix this as soon as possible!"))
            case .garbage: #expect(error.description.contains("not JSON"))
            case .truncated: #expect(error.description.contains("Hub"))
            }
        }
    }

    @Test func anIncapableDeviceStillListsButNothingDownloads() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let store = try hub.store(capable: false)
        let load = try await store.loadCatalog(refresh: false)
        #expect(!load.catalog.shown.isEmpty)
        let machine = store.machine()
        #expect(load.catalog.all.allSatisfy { machine.state($0.id) == .unsupported })
        await #expect(throws: HubError.self) { try await store.download(curatedVision) }
        #expect(store.state(curatedVision) == .unsupported)
        #expect(!FileManager.default.fileExists(atPath: hub.layout.repo(curatedVision)))
    }
}
