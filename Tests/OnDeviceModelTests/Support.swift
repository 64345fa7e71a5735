import Foundation
import HomebaseCore
import HomebaseCuration
import HomebaseTransport
import HubEmulatorKit
@testable import HomebaseDevice
@testable import HomebaseRouter

/// The fixture list, a Hub emulator on a free port, and a store over a fresh Hub cache.
struct Hub {
    static let fixture: [JSONNode] = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        let path = parts.joined(separator: "/") + "/Fixtures/hub/models.json"
        let bytes = Array(FileManager.default.contents(atPath: path) ?? Data())
        return (try? HubEmulatorConfiguration.loadModels(bytes)) ?? []
    }()

    static let http = HTTPClient()

    let emulator: HubEmulator
    let port: UInt16
    let root: String
    let device = InMemorySettingsBackend()
    let settings = AgentSettings(backend: InMemorySettingsBackend())
    let clock: @Sendable () -> UInt64

    init(faults: HubFaults = HubFaults(), pageSize: Int = 1000, weightBytes: Int = 300_000,
         clock: @escaping @Sendable () -> UInt64 = { 1_800_000_000_000 }) throws {
        var config = HubEmulatorConfiguration()
        config.models = Self.fixture
        config.faults = faults
        config.pageSize = pageSize
        config.weightBytes = weightBytes
        self.emulator = HubEmulator(configuration: config)
        self.port = try self.emulator.start(port: 0)
        self.root = NSTemporaryDirectory() + "hub-\(UUID().uuidString)"
        self.clock = clock
    }

    var endpoint: String { "http://127.0.0.1:\(self.port)" }

    func store(capable: Bool = true) throws -> OnDeviceModelStore {
        let store = OnDeviceModelStore(access: HubAccess(http: Self.http, endpoint: self.endpoint, cacheRoot: self.root),
                                       device: self.device, settings: self.settings, clock: self.clock)
        if !capable { try store.setCapable(false) }
        return store
    }

    var layout: HubCacheLayout { HubCacheLayout(root: self.root) }

    func stop() {
        self.emulator.stop()
        try? FileManager.default.removeItem(atPath: self.root)
    }

    /// Every file under the repo's cache folder whose name ends with `suffix`.
    func files(_ id: String, endingWith suffix: String) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: self.layout.repo(id))
        var out: [String] = []
        while let path = enumerator?.nextObject() as? String {
            if path.hasSuffix(suffix) { out.append(path) }
        }
        return out
    }
}

let curatedVision = "mlx-community/Qwen2-VL-2B-Instruct-4bit"
