import Foundation
import HomebaseCore
import HomebaseStore
import Testing
@testable import HomebaseRouter

/// A fresh state database file under the temp dir, removed with the value.
final class TemporaryStateFile {
    let directory: String
    var path: String { self.directory + "/state.db" }

    init() throws {
        self.directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("homebase-router-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: false)
    }

    deinit { try? FileManager.default.removeItem(atPath: self.directory) }
}

@Suite struct SQLiteSettingsBackendTests {
    static func backend(_ file: TemporaryStateFile, _ namespace: String = "settings.") throws -> SQLiteSettingsBackend {
        SQLiteSettingsBackend(store: try KeyValueStore(database: try Database(path: file.path)), namespace: namespace)
    }

    @Test func stringsAndBytesRoundTripAsTheirOwnCase() throws {
        let file = try TemporaryStateFile()
        let backend = try Self.backend(file)
        try backend.set("ollama", forKey: "agent.runtime")
        try backend.set(bytes: [0, 255, 1], forKey: "blob")
        #expect(backend.value(forKey: "agent.runtime") == .string("ollama"))
        #expect(backend.value(forKey: "blob") == .bytes([0, 255, 1]))
        #expect(backend.value(forKey: "absent") == nil)
        try backend.set("replaced", forKey: "blob")
        #expect(backend.value(forKey: "blob") == .string("replaced"))
        try backend.removeValue(forKey: "blob")
        try backend.removeValue(forKey: "never-there")
        #expect(backend.value(forKey: "blob") == nil)
    }

    @Test func persistsAcrossReopen() throws {
        let file = try TemporaryStateFile()
        try Self.backend(file).set("qwen2.5:7b", forKey: "agent.selection")
        let reopened = try Self.backend(file)
        #expect(reopened.string(forKey: "agent.selection") == "qwen2.5:7b")
    }

    @Test func namespacesKeepInstancesApartAndKeysAreUnprefixed() throws {
        let file = try TemporaryStateFile()
        let database = try Database(path: file.path)
        let store = try KeyValueStore(database: database)
        let settings = SQLiteSettingsBackend(store: store, namespace: "settings.")
        let secrets = SQLiteSettingsBackend(store: store, namespace: "secrets.")
        try settings.set("a", forKey: "key.openai.0")
        try secrets.set("sk-1", forKey: "key.openai.0")
        try secrets.set("sk-2", forKey: "key.openai.1")
        try secrets.set("x", forKey: "other")
        #expect(settings.string(forKey: "key.openai.0") == "a")
        #expect(secrets.string(forKey: "key.openai.0") == "sk-1")
        #expect(secrets.keys(withPrefix: "key.") == ["key.openai.0", "key.openai.1"])
        #expect(settings.keys(withPrefix: "") == ["key.openai.0"])
    }

    @Test func theRouterStoresWorkOverIt() throws {
        let file = try TemporaryStateFile()
        let keys = CloudKeyStore(backend: try Self.backend(file, "secrets."))
        _ = try keys.add("sk-test-123", to: .openai)
        let reopened = CloudKeyStore(backend: try Self.backend(file, "secrets."))
        #expect(reopened.activeKey(.openai) == "sk-test-123")
    }

    struct Refused: Error {}

    /// Two connections (two processes) to one file: a read-then-write in `atomically` is never interleaved with
    /// another's, and a body that throws leaves nothing behind.
    @Test func atomicallyIsOneTransactionAcrossConnections() async throws {
        let file = try TemporaryStateFile()
        let first = try Self.backend(file, "device.")
        let second = try Self.backend(file, "device.")
        try first.set("0", forKey: "n")
        // Each increments 200 times by read-modify-write; a lost update would show as a smaller total.
        await withTaskGroup(of: Void.self) { group in
            for backend in [first, second] {
                group.addTask {
                    for _ in 0..<200 {
                        _ = try? backend.atomically { db in
                            let n = Int(db.string(forKey: "n") ?? "0") ?? 0
                            try db.set(String(n + 1), forKey: "n")
                        }
                    }
                }
            }
        }
        #expect(first.string(forKey: "n") == "400")
        #expect(throws: Refused.self) {
            try second.atomically { db in
                try db.set("written", forKey: "rolled.back")
                #expect(db.string(forKey: "rolled.back") == "written")
                throw Refused()
            }
        }
        #expect(first.string(forKey: "rolled.back") == nil)
        #expect(try first.atomically { db in db.keys(withPrefix: "") } == ["n"])
    }

    @Test func theInMemoryBackendIsAtomicToo() async throws {
        let backend = InMemorySettingsBackend()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    for _ in 0..<500 {
                        _ = try? backend.atomically { db in
                            try db.set(String((Int(db.string(forKey: "n") ?? "0") ?? 0) + 1), forKey: "n")
                        }
                    }
                }
            }
        }
        #expect(backend.string(forKey: "n") == "1000")
        #expect(throws: Refused.self) { try backend.atomically { db in try db.set("x", forKey: "y"); throw Refused() } }
        #expect(backend.string(forKey: "y") == nil)
    }
}
