import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseCuration
import HomebaseTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Downloads a repo revision into the Hub cache layout (reference/model-apis.md §6), the way huggingface_hub
/// does, so mlx-lm and friends would find the files:
///
/// - each file is fetched with `GET {endpoint}/{repo}/resolve/{commit}/{path}` (redirects followed to the LFS
///   store) into `blobs/<etag>.incomplete`, under `.locks/…/<etag>.lock`;
/// - an `.incomplete` left by an earlier attempt is resumed with `Range: bytes=N-` (its bytes are hashed first);
/// - the blob is verified — sha256 for LFS files (the tree's `lfs.oid`), the git blob sha1 otherwise — and only
///   then renamed to `blobs/<etag>`: a partial or corrupt file is never taken for a whole one;
/// - `snapshots/<commit>/<path>` links to it relatively, and `refs/main` names the commit.
///
/// Bytes go from libcurl's loop thread straight to the file (`HTTPClient.stream(_:handler:)`, no task hop per
/// read); the sha256 runs beside it on a hashing queue, so hashing overlaps the transfer instead of adding to it.
public struct HubDownloader: Sendable {
    public let http: HTTPClient
    public let endpoint: String
    public let layout: HubCacheLayout

    /// Progress: bytes done (this attempt's resumed bytes included) and the total, across every file.
    public typealias Progress = @Sendable (_ done: Int64, _ total: Int64) -> Void

    public init(http: HTTPClient, endpoint: String, layout: HubCacheLayout) {
        self.http = http
        self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.layout = layout
    }

    /// Downloads `files` of `id` at `commit`. Cancelling the task (or `shouldCancel` turning true, polled with
    /// progress) stops at once with `HubError.cancelled`, leaving `.incomplete` files for the caller to remove
    /// (a cancel) or resume (a retry).
    public func download(_ id: String, commit: String, files: [HubFile], progress: @escaping Progress,
                         shouldCancel: @escaping @Sendable () -> Bool = { false }) async throws(HubError) {
        let total = files.reduce(Int64(0)) { $0 + $1.size }
        var before: Int64 = 0
        try Self.makeDirectories([self.layout.repo(id) + "/blobs", self.layout.locks(id),
                                  self.layout.snapshot(id, commit: commit), self.layout.repo(id) + "/refs"])
        for file in files {
            let done = before
            try await self.fetch(id, commit: commit, file: file, progress: { progress(done + $0, total) },
                                 shouldCancel: shouldCancel)
            before += file.size
            progress(before, total)
            try self.link(id, commit: commit, file: file)
        }
        try Self.writeAtomically(Array(commit.utf8), to: self.layout.ref(id))
    }

    /// Removes `.incomplete` files of a repo (after a cancel: the next attempt starts clean).
    public static func removePartials(_ id: String, layout: HubCacheLayout) {
        let blobs = layout.repo(id) + "/blobs"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: blobs)) ?? [] where name.hasSuffix(".incomplete") {
            unlink(blobs + "/" + name)
        }
    }

    // MARK: One file

    func fetch(_ id: String, commit: String, file: HubFile, progress: @escaping @Sendable (Int64) -> Void,
               shouldCancel: @escaping @Sendable () -> Bool) async throws(HubError) {
        let blob = self.layout.blob(id, etag: file.etag)
        if Self.fileSize(blob) == file.size { return }  // verified when it was renamed in
        let lock = try Self.lock(self.layout.lock(id, etag: file.etag))
        defer { close(lock) }
        let partial = self.layout.incomplete(id, etag: file.etag)
        let fd = open(partial, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        guard fd >= 0 else { throw .disk("open \(partial): \(Self.errnoText())") }
        var closed = false
        defer { if !closed { close(fd) } }
        var resumeAt = Int64(Self.fileSize(partial) ?? 0)
        if resumeAt > file.size {
            guard ftruncate(fd, 0) == 0 else { throw .disk("truncate: \(Self.errnoText())") }
            resumeAt = 0
        }
        let sink = BlobSink(fd: fd, hashLFS: file.sha256 != nil, resumedBytes: resumeAt)
        if resumeAt > 0, file.sha256 != nil { try sink.hashExisting(path: partial, count: resumeAt) }
        var headers = [("Accept-Encoding", "identity")]
        if resumeAt > 0 && resumeAt < file.size { headers.append(("Range", "bytes=\(resumeAt)-")) }
        if resumeAt < file.size || file.size == 0 {
            let url = "\(self.endpoint)/\(id)/resolve/\(commit)/\(Self.escapePath(file.path))"
            let request = HTTPRequest(url: url, headers: headers, connectTimeout: .seconds(10),
                                      idleTimeout: .seconds(30), followRedirects: true)
            let handle = self.http.stream(request, handler: sink)
            let outcome = await Self.wait(sink, handle: handle, progress: progress, shouldCancel: shouldCancel)
            if let failure = outcome { throw failure }
        }
        guard fsync(fd) == 0 else { throw .disk("fsync: \(Self.errnoText())") }
        close(fd)
        closed = true
        // Verify before the rename: only a whole, matching file becomes a blob.
        let size = Int64(Self.fileSize(partial) ?? -1)
        let actual: String
        if file.sha256 != nil {
            actual = Hex.encode(sink.finishHash())
        } else {
            guard let bytes = FileManager.default.contents(atPath: partial) else { throw .disk("cannot read back \(partial)") }
            actual = HubTree.gitBlobID(Array(bytes))
        }
        guard size == file.size, actual == file.etag else {
            unlink(partial)
            if size != file.size {
                throw .malformed("\(file.path): got \(size) bytes, the Hub announced \(file.size); the file was deleted")
            }
            throw .checksumMismatch(path: file.path, expected: file.etag, actual: actual)
        }
        guard rename(partial, blob) == 0 else { throw .disk("rename: \(Self.errnoText())") }
    }

    /// Waits for the transfer, reporting progress every 100 ms and polling `shouldCancel`; task cancellation
    /// aborts the transfer at once. Returns the failure, or `nil` when the body arrived whole.
    static func wait(_ sink: BlobSink, handle: HTTPStreamHandle, progress: @escaping @Sendable (Int64) -> Void,
                     shouldCancel: @escaping @Sendable () -> Bool) async -> HubError? {
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                progress(sink.bytesDone)
                if shouldCancel() {
                    sink.markCancelled()
                    handle.cancel()
                    return
                }
            }
        }
        let outcome = await withTaskCancellationHandler {
            await sink.wait()
        } onCancel: {
            sink.markCancelled()
            handle.cancel()
        }
        ticker.cancel()
        // Harmless once ended; stops a transfer whose file write failed (its sink finished early).
        handle.cancel()
        return outcome
    }

    // MARK: Files

    func link(_ id: String, commit: String, file: HubFile) throws(HubError) {
        let path = self.layout.snapshotFile(id, commit: commit, path: file.path)
        if let slash = path.lastIndex(of: "/") { try Self.makeDirectories([String(path[..<slash])]) }
        unlink(path)
        guard symlink(HubCacheLayout.symlinkTarget(path: file.path, etag: file.etag), path) == 0 else {
            throw .disk("symlink \(path): \(Self.errnoText())")
        }
    }

    static func makeDirectories(_ paths: [String]) throws(HubError) {
        for path in paths {
            do { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) } catch {
                throw .disk("mkdir \(path): \(error.localizedDescription)")
            }
        }
    }

    /// Takes the blob's lock file (`flock`, released when the descriptor closes, even if the process dies).
    static func lock(_ path: String) throws(HubError) -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT, 0o644)
        guard fd >= 0 else { throw .disk("open \(path): \(Self.errnoText())") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw .locked(path)
        }
        return fd
    }

    static func writeAtomically(_ bytes: [UInt8], to path: String) throws(HubError) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw .disk("open \(temporary): \(Self.errnoText())") }
        let ok = bytes.withUnsafeBytes { Self.writeAll(fd, $0) } && fsync(fd) == 0
        close(fd)
        guard ok, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw .disk("write \(path): \(Self.errnoText())")
        }
    }

    static func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < raw.count {
            let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }

    static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_size)
    }

    static func errnoText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

    /// Percent-encodes each path segment (spaces, `#`, `?` in a file name), keeping the slashes.
    static func escapePath(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map {
            $0.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#")))
                ?? String($0)
        }.joined(separator: "/")
    }
}

/// Receives one file's body on the HTTP loop thread: writes it to the `.incomplete` file and feeds the hasher.
///
/// `@unchecked Sendable`: `head`, `body` and `end` come one at a time on the loop thread (`HTTPStreamHandler`), and
/// the hasher is read only after `end` resumed the waiter; what other threads read (`bytesDone`, the outcome) is
/// atomic or behind the mutex.
final class BlobSink: HTTPStreamHandler, @unchecked Sendable {
    private let fd: Int32
    private var hasher: PipelinedHasher?
    private let hashLFS: Bool
    private let resumed: Int64
    private var rejected: HubError?
    private var errorBody: [UInt8] = []
    private var head: HTTPClientResponseHead?
    private let done = Atomic<Int64>(0)
    private let cancelled = Atomic<Bool>(false)
    private let state = Mutex<(outcome: HubError??, waiter: CheckedContinuation<HubError?, Never>?)>((nil, nil))

    init(fd: Int32, hashLFS: Bool, resumedBytes: Int64) {
        self.fd = fd
        self.hashLFS = hashLFS
        self.hasher = hashLFS ? PipelinedHasher() : nil
        self.resumed = resumedBytes
        self.done.store(resumedBytes, ordering: .relaxed)
    }

    var bytesDone: Int64 { self.done.load(ordering: .relaxed) }

    func markCancelled() { self.cancelled.store(true, ordering: .relaxed) }

    /// Feeds the bytes already in the partial file to the hasher (a resume), before the transfer starts.
    func hashExisting(path: String, count: Int64) throws(HubError) {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw .disk("open \(path): \(HubDownloader.errnoText())") }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var left = count
        while left > 0 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, Int(min(Int64($0.count), left))) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw .disk("read back \(path): \(HubDownloader.errnoText())") }
            self.hasher?.update(Array(buffer[0..<n]))
            left -= Int64(n)
        }
    }

    func finishHash() -> [UInt8] { self.hasher?.finalize() ?? [] }

    func head(_ head: HTTPClientResponseHead) {
        self.head = head
        switch head.status {
        case 206 where self.resumed > 0:
            break
        case 200:
            if self.resumed > 0 {
                // The server ignored the Range: start over, file and hash.
                ftruncate(self.fd, 0)
                self.hasher = self.hashLFS ? PipelinedHasher() : nil
                self.done.store(0, ordering: .relaxed)
            }
        default:
            self.rejected = .http(status: head.status, code: head.header("X-Error-Code"), message: "")
        }
    }

    func body(_ bytes: [UInt8]) {
        if self.rejected != nil {
            if self.errorBody.count < 4096 { self.errorBody += bytes.prefix(4096 - self.errorBody.count) }
            return
        }
        let ok = bytes.withUnsafeBytes { HubDownloader.writeAll(self.fd, $0) }
        guard ok else {
            self.rejected = .disk(HubDownloader.errnoText())
            // Nothing more is written; the transfer is stopped by its end (the waiter cancels it).
            self.finish(self.rejected)
            return
        }
        self.hasher?.update(bytes)
        self.done.add(Int64(bytes.count), ordering: .relaxed)
    }

    func end(_ error: HTTPClientError?) {
        if case .http? = self.rejected, let head = self.head {
            self.finish(HubClient.httpError(head, body: self.errorBody))
        } else if let rejected = self.rejected {
            self.finish(rejected)
        } else if self.cancelled.load(ordering: .relaxed) {
            self.finish(.cancelled)
        } else if let error {
            self.finish(error == .cancelled ? .cancelled : HubClient.transportError(error))
        } else {
            self.finish(nil)
        }
    }

    /// Records the outcome once and wakes the waiter.
    private func finish(_ outcome: HubError?) {
        let waiter = self.state.withLock { s -> CheckedContinuation<HubError?, Never>? in
            guard s.outcome == nil else { return nil }
            s.outcome = .some(outcome)
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: outcome)
    }

    func wait() async -> HubError? {
        await withCheckedContinuation { continuation in
            let ready = self.state.withLock { s -> HubError?? in
                if let outcome = s.outcome { return .some(outcome) }
                s.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// SHA-256 on a serial queue of its own, fed in order from the HTTP loop thread: the hash keeps pace beside the
/// transfer on a second core instead of stalling the socket reads. At most `maxPendingPieces` pieces wait; past
/// that `update` waits for the hasher (the hash can never fall unboundedly behind, holding the file in memory).
final class PipelinedHasher: @unchecked Sendable {
    static let maxPendingPieces = 1024
    // Touched only on `queue`.
    private let hasher = SHA256Hasher()
    private let queue = DispatchQueue(label: "homebase.sha256")
    private let slots = DispatchSemaphore(value: PipelinedHasher.maxPendingPieces)

    func update(_ bytes: [UInt8]) {
        self.slots.wait()
        self.queue.async {
            self.hasher.update(bytes)
            self.slots.signal()
        }
    }

    /// Waits for every piece, then returns the digest.
    func finalize() -> [UInt8] {
        self.queue.sync { self.hasher.finalize() }
    }
}
