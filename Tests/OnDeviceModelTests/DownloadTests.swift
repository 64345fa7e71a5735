import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseCuration
import HomebaseTransport
import HubEmulatorKit
import Synchronization
import Testing
@testable import HomebaseDevice
@testable import HomebaseRouter

@Suite struct DownloadTests {
    @Test func aDownloadLandsInTheHubCacheLayoutVerifiedAndReady() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let store = try hub.store()
        let ticks = Mutex<[Double]>([])
        try await store.download(curatedVision) { p in ticks.withLock { $0.append(p.fraction) } }
        #expect(store.state(curatedVision) == .ready)
        #expect(hub.device.string(forKey: "models.ready") == #"["\#(curatedVision)"]"#)
        // refs/main, relative symlinks into blobs named by sha256 (LFS) or git sha1, no .incomplete left.
        let commit = try String(contentsOfFile: hub.layout.ref(curatedVision), encoding: .utf8)
        #expect(HubTree.isHex(commit, count: 40))
        let weights = hub.layout.snapshotFile(curatedVision, commit: commit, path: "model.safetensors")
        let target = try FileManager.default.destinationOfSymbolicLink(atPath: weights)
        let (sha, size) = try #require(hub.emulator.weights(of: curatedVision))
        #expect(target == "../../blobs/" + sha)
        let blob = try #require(FileManager.default.contents(atPath: hub.layout.blob(curatedVision, etag: sha)))
        #expect(blob.count == size && Hex.encode(SHA256.hash(Array(blob))) == sha)
        #expect(hub.files(curatedVision, endingWith: ".incomplete").isEmpty)
        #expect(!hub.files(curatedVision, endingWith: "README.md").contains { $0.hasPrefix("snapshots") })
        #expect(FileManager.default.fileExists(atPath: hub.layout.lock(curatedVision, etag: sha)))
        #expect(ticks.withLock { $0.last } == 1)
        // The stand-in runtime loads it.
        #expect(store.loadedModel(curatedVision)?.weightBytes == Int64(size))
    }

    @Test func aDroppedDownloadFailsThenResumesWithRange() async throws {
        var faults = HubFaults()
        faults.dropAfter = 100_000
        let hub = try Hub(faults: faults, weightBytes: 400_000)
        defer { hub.stop() }
        let store = try hub.store()
        await #expect(throws: HubError.self) { try await store.download(curatedVision) }
        guard case .failed = store.state(curatedVision) else {
            Issue.record("expected failed, got \(store.state(curatedVision))")
            return
        }
        let partial = hub.files(curatedVision, endingWith: ".incomplete")
        #expect(partial.count == 1)
        let kept = try FileManager.default.attributesOfItem(atPath: hub.layout.repo(curatedVision) + "/" + partial[0])[.size] as? Int
        #expect(kept == 100_000)  // nothing of it was taken as a blob
        try await store.download(curatedVision)
        #expect(store.state(curatedVision) == .ready)
        #expect(hub.emulator.rangeRequests == 1)
        let (sha, _) = try #require(hub.emulator.weights(of: curatedVision))
        let blob = try #require(FileManager.default.contents(atPath: hub.layout.blob(curatedVision, etag: sha)))
        #expect(Hex.encode(SHA256.hash(Array(blob))) == sha)
    }

    @Test func aBlobWhoseSha256DoesNotMatchIsRefusedDeletedAndFailed() async throws {
        var faults = HubFaults()
        faults.corrupt = [curatedVision]
        let hub = try Hub(faults: faults)
        defer { hub.stop() }
        let store = try hub.store()
        do {
            try await store.download(curatedVision)
            Issue.record("a corrupt blob was accepted")
        } catch {
            guard case .checksumMismatch(let path, _, _) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(path == "model.safetensors")
        }
        guard case .failed(let why) = store.state(curatedVision) else {
            Issue.record("expected failed")
            return
        }
        #expect(why.contains("sha256"))
        let (sha, _) = try #require(hub.emulator.weights(of: curatedVision))
        #expect(!FileManager.default.fileExists(atPath: hub.layout.blob(curatedVision, etag: sha)))
        #expect(hub.files(curatedVision, endingWith: ".incomplete").isEmpty)
        #expect(store.loadedModel(curatedVision) == nil)
        #expect(store.resolve(choice: curatedVision) == .floor(.notDownloaded))
    }

    @Test func cancelMidFlightRemovesPartialsAndLeavesAbsent() async throws {
        var faults = HubFaults()
        faults.slowBytesPerSecond = 400_000
        let hub = try Hub(faults: faults, weightBytes: 2_000_000)
        defer { hub.stop() }
        let store = try hub.store()
        let task = Task { () -> HubError? in
            do throws(HubError) { try await store.download(curatedVision); return nil } catch { return error }
        }
        while true {
            if case .downloading(let p) = store.state(curatedVision), p > 0.05 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(store.cancel(curatedVision) == .requested)
        #expect(await task.value == .cancelled)
        #expect(store.state(curatedVision) == .absent)
        #expect(hub.files(curatedVision, endingWith: ".incomplete").isEmpty)
        #expect(hub.device.keys(withPrefix: "models.download.").isEmpty)
    }

    @Test func cancelRacingCompletionWins() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let store = try hub.store()
        // Cancel the moment the last byte is counted: the files are whole, but the cancel must still win.
        do {
            try await store.download(curatedVision) { p in
                if p.fraction >= 1 { store.cancel(curatedVision) }
            }
            Issue.record("completion beat the cancel")
        } catch {
            #expect(error == .cancelled)
        }
        #expect(store.state(curatedVision) == .absent)
        #expect(hub.device.string(forKey: "models.ready") == nil)
        #expect(store.resolve(choice: curatedVision) == .floor(.notDownloaded))
    }

    @Test func aCancelFromAnotherProcessIsHonoured() async throws {
        var faults = HubFaults()
        faults.slowBytesPerSecond = 400_000
        let hub = try Hub(faults: faults, weightBytes: 2_000_000)
        defer { hub.stop() }
        let store = try hub.store()
        let task = Task { () -> HubError? in
            do throws(HubError) { try await store.download(curatedVision); return nil } catch { return error }
        }
        // A second store over the same state DB is what `handset models cancel` in another process is.
        let other = try hub.store()
        while true {
            if case .downloading = other.state(curatedVision) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(other.cancel(curatedVision) == .requested)
        #expect(await task.value == .cancelled)
        #expect(other.state(curatedVision) == .absent)
        #expect(hub.files(curatedVision, endingWith: ".incomplete").isEmpty)
    }

    #if os(Linux)
    @Test func aFullDiskIsAClearErrorAndNothingIsReady() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let store = try hub.store()
        // The weights' .incomplete is a link to /dev/full: every write fails with ENOSPC, as on a full disk.
        let (sha, _) = try #require(hub.emulator.weights(of: curatedVision))
        try FileManager.default.createDirectory(atPath: hub.layout.repo(curatedVision) + "/blobs",
                                                withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: hub.layout.incomplete(curatedVision, etag: sha),
                                                   withDestinationPath: "/dev/full")
        do {
            try await store.download(curatedVision)
            Issue.record("a full disk went unnoticed")
        } catch {
            guard case .disk(let why) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(why.contains("No space left"))
            #expect(error.description.contains("nothing partial was kept"))
        }
        guard case .failed = store.state(curatedVision) else {
            Issue.record("expected failed")
            return
        }
        #expect(!FileManager.default.fileExists(atPath: hub.layout.blob(curatedVision, etag: sha)))
        #expect(store.loadedModel(curatedVision) == nil)
    }
    #endif

    @Test func gatedAndMissingReposGiveClearErrors() async throws {
        var faults = HubFaults()
        faults.gated = ["mlx-community/gemma-3-4b-it-4bit"]
        let hub = try Hub(faults: faults)
        defer { hub.stop() }
        let store = try hub.store()
        do {
            try await store.download("mlx-community/gemma-3-4b-it-4bit")
            Issue.record("gated repo downloaded")
        } catch {
            #expect(error.description.contains("gated"))
            #expect(error.description.contains("401"))
        }
        do {
            try await store.download("someone/not-there")
            Issue.record("missing repo downloaded")
        } catch {
            #expect(error == .http(status: 404, code: "RepoNotFound", message: "Repository not found"))
        }
        #expect(!FileManager.default.fileExists(atPath: hub.layout.ref("mlx-community/gemma-3-4b-it-4bit")))
    }

    @Test func deleteRemovesWeightsMarkerAndContainerSoARedownloadIsReal() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let store = try hub.store()
        try await store.download(curatedVision)
        #expect(store.loadedModel(curatedVision) != nil)
        try store.delete(curatedVision)
        #expect(store.state(curatedVision) == .absent)
        #expect(!FileManager.default.fileExists(atPath: hub.layout.repo(curatedVision)))
        #expect(!FileManager.default.fileExists(atPath: hub.layout.locks(curatedVision)))
        #expect(store.loadedModel(curatedVision) == nil)
        let before = hub.emulator.hitCount("/lfs-store/models--mlx-community--Qwen2-VL-2B-Instruct-4bit/"
                                           + hub.emulator.weights(of: curatedVision)!.sha256)
        try await store.download(curatedVision)
        #expect(hub.emulator.hitCount("/lfs-store/models--mlx-community--Qwen2-VL-2B-Instruct-4bit/"
                                      + hub.emulator.weights(of: curatedVision)!.sha256) == before + 1)
    }

    @Test func weightsInASubfolderAreFoundThroughARecursiveTree() async throws {
        var faults = HubFaults()
        faults.nested = [curatedVision]
        let hub = try Hub(faults: faults)
        defer { hub.stop() }
        // The emulator lists like the Hub: the top level only, unless asked for recursive.
        let tree = "\(hub.endpoint)/api/models/\(curatedVision)/tree/main"
        let top = try await Hub.http.send(HTTPRequest(url: tree)).body
        #expect(try HubTree.parse(top).map(\.path).sorted() == [".gitattributes", "README.md", "config.json",
                                                                "tokenizer_config.json"])
        #expect(String(decoding: top, as: UTF8.self).contains(#""type":"directory""#))
        for query in ["?recursive=1", "?recursive=true"] {
            let all = try await Hub.http.send(HTTPRequest(url: tree + query)).body
            #expect(try HubTree.parse(all).map(\.path).contains("weights/model.safetensors"))
        }
        let store = try hub.store()
        try await store.download(curatedVision)
        #expect(store.state(curatedVision) == .ready)
        let loaded = try #require(store.loadedModel(curatedVision))
        #expect(loaded.weightFiles == 1)
        #expect(FileManager.default.fileExists(
            atPath: hub.layout.snapshotFile(curatedVision, commit: loaded.commit, path: "weights/model.safetensors")))
    }

    @Test func anUnreadableRecordIsNoDownloadAndAStartReplacesIt() async throws {
        let hub = try Hub()
        defer { hub.stop() }
        let store = try hub.store()
        for garbage in ["{", "[]", #"{"pid":"x"}"#, String(repeating: "9", count: 4000)] {
            try hub.device.set(garbage, forKey: "models.download." + curatedVision)
            #expect(store.state(curatedVision) == .absent)
            #expect(store.cancel(curatedVision) == .notDownloading)
        }
        try await store.download(curatedVision)
        #expect(store.state(curatedVision) == .ready)
        #expect(hub.device.keys(withPrefix: "models.download.").isEmpty)
    }

    @Test func aTreeInPagesIsReadToTheEnd() async throws {
        var faults = HubFaults()
        faults.nested = [curatedVision]
        // Two entries a page (a folder and five files): the weights are on the last of three.
        let hub = try Hub(faults: faults, pageSize: 2)
        defer { hub.stop() }
        let first = try await Hub.http.send(HTTPRequest(url: "\(hub.endpoint)/api/models/\(curatedVision)/tree/main?recursive=1"))
        #expect(try HubTree.parse(first.body).count == 1)  // a directory entry and one file
        #expect(first.head.header("Link")?.contains("cursor=") == true)
        let store = try hub.store()
        try await store.download(curatedVision)
        #expect(store.loadedModel(curatedVision)?.weightFiles == 1)
        #expect(hub.emulator.hitCount("/api/models/\(curatedVision)/tree/" + (try String(
            contentsOfFile: hub.layout.ref(curatedVision), encoding: .utf8))) == 3)
    }

    @Test func aSecondStartIsRefusedInWordsAndLeavesTheFirstAlone() async throws {
        var faults = HubFaults()
        faults.slowBytesPerSecond = 400_000
        let hub = try Hub(faults: faults, weightBytes: 2_000_000)
        defer { hub.stop() }
        let store = try hub.store()
        let task = Task { () -> HubError? in
            do throws(HubError) { try await store.download(curatedVision); return nil } catch { return error }
        }
        // Another process over the same state database.
        let other = try hub.store()
        while true {
            if case .downloading = other.state(curatedVision) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        do {
            try await other.download(curatedVision)
            Issue.record("a second start passed")
        } catch {
            #expect(error == .alreadyDownloading(curatedVision))
            #expect(error.description == "already downloading ('handset models cancel \(curatedVision)' stops it)")
        }
        guard case .downloading = store.state(curatedVision) else {
            Issue.record("the refused start changed the state: \(store.state(curatedVision))")
            return
        }
        #expect(other.cancel(curatedVision) == .requested)
        #expect(await task.value == .cancelled)
        #expect(HubError.locked("/c/.locks/x.lock").description == "another download holds the lock /c/.locks/x.lock")
    }
}
