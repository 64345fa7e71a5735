import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseCuration
import HomebaseStore
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
///   then, after an `fsync`, renamed to `blobs/<etag>` (and the directory synced): a partial or corrupt file is
///   never taken for a whole one, and a whole one survives a crash;
/// - `snapshots/<commit>/<path>` links to it relatively, and `refs/main` names the commit.
///
/// libcurl's loop thread lends each read to a `BlobWriter` (`HTTPClient.download(_:into:)`, no copy, no task
/// hop); that writes and hashes it a megabyte at a time on a queue of its own, so the hash and the disk overlap
/// the socket reads instead of adding to them, and starts the disk's writeback as it goes.
public struct HubDownloader: Sendable {
    public let http: HTTPClient
    public let endpoint: String
    public let layout: HubCacheLayout
    /// libcurl's read size for a download (`HTTPRequest.receiveBufferBytes`): a megabyte a read and a write.
    static let receiveBufferBytes = 1 << 20

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
        var linkDirectories: Set<String> = []
        for file in files {
            let done = before
            try await self.fetch(id, commit: commit, file: file, progress: { progress(done + $0, total) },
                                 shouldCancel: shouldCancel)
            before += file.size
            progress(before, total)
            linkDirectories.insert(try self.link(id, commit: commit, file: file))
        }
        // The links are on disk before the ref that names their snapshot.
        for directory in linkDirectories.sorted() { try Self.syncDirectory(directory) }
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
        let writer = BlobWriter(fd: fd, hashes: file.sha256 != nil, fileBytes: resumeAt)
        if resumeAt > 0 { try writer.prefill(path: partial, count: resumeAt) }
        let sink = BlobSink(writer: writer, resumedBytes: resumeAt)
        var headers = [("Accept-Encoding", "identity")]
        if resumeAt > 0 && resumeAt < file.size { headers.append(("Range", "bytes=\(resumeAt)-")) }
        var outcome: HubError?
        if resumeAt < file.size || file.size == 0 {
            let url = "\(self.endpoint)/\(id)/resolve/\(commit)/\(Self.escapePath(file.path))"
            var request = HTTPRequest(url: url, headers: headers, connectTimeout: .seconds(10),
                                      idleTimeout: .seconds(30), followRedirects: true)
            request.receiveBufferBytes = Self.receiveBufferBytes
            let handle = self.http.download(request, into: sink)
            outcome = await Self.wait(sink, handle: handle, progress: progress, shouldCancel: shouldCancel)
        }
        // Waits for the writer's queue, whatever happened: it is done with the file before the file is closed.
        let digest: [UInt8]
        switch writer.finish() {
        case .success(let d): digest = d
        case .failure(let failure): throw failure  // a failed write aborted the transfer: this says why
        }
        if let outcome { throw outcome }
        guard fsync(fd) == 0 else { throw .disk("fsync: \(Self.errnoText())") }
        close(fd)
        closed = true
        // Verify before the rename: only a whole, matching file becomes a blob.
        let size = Int64(Self.fileSize(partial) ?? -1)
        let actual: String
        if file.sha256 != nil {
            actual = Hex.encode(digest)
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
        // The rename itself survives a crash.
        do { try DurableFile.rename(partial, to: blob) } catch { throw Self.disk(error) }
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

    /// Links the snapshot's path to the blob; returns the link's directory.
    func link(_ id: String, commit: String, file: HubFile) throws(HubError) -> String {
        let path = self.layout.snapshotFile(id, commit: commit, path: file.path)
        let directory = DurableFile.directory(of: path)
        try Self.makeDirectories([directory])
        unlink(path)
        guard symlink(HubCacheLayout.symlinkTarget(path: file.path, etag: file.etag), path) == 0 else {
            throw .disk("symlink \(path): \(Self.errnoText())")
        }
        return directory
    }

    /// `fsync` of a directory: makes the names created or renamed in it durable.
    static func syncDirectory(_ path: String) throws(HubError) {
        do { try DurableFile.syncDirectory(path) } catch { throw Self.disk(error) }
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
        do { try DurableFile.write(bytes, to: path) } catch { throw Self.disk(error) }
    }

    /// A durable-file failure as a `HubError.disk` line.
    static func disk(_ error: StoreError) -> HubError {
        guard case .file(let operation, let path, let code) = error else { return .disk("\(error)") }
        return .disk("\(operation) \(path): \(Self.errnoText(code))")
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

/// Receives one file's body on the HTTP loop thread and passes it to a `BlobWriter`; keeps the response's
/// verdict (an error status and its body, a disk failure, a cancel) for the task that waits.
///
/// `@unchecked Sendable`: `head`, `write` and `end` come one at a time on the loop thread (`HTTPBodyWriter`);
/// what other threads read (`bytesDone`, the outcome) is atomic or behind the mutex.
final class BlobSink: HTTPBodyWriter, @unchecked Sendable {
    let writer: BlobWriter
    private let resumed: Int64
    private var rejected: HubError?
    private var errorBody: [UInt8] = []
    private var head: HTTPClientResponseHead?
    private let done = Atomic<Int64>(0)
    private let cancelled = Atomic<Bool>(false)
    private let state = Mutex<(outcome: HubError??, waiter: CheckedContinuation<HubError?, Never>?)>((nil, nil))

    init(writer: BlobWriter, resumedBytes: Int64) {
        self.writer = writer
        self.resumed = resumedBytes
        self.done.store(resumedBytes, ordering: .relaxed)
    }

    var bytesDone: Int64 { self.done.load(ordering: .relaxed) }

    func markCancelled() { self.cancelled.store(true, ordering: .relaxed) }

    func head(_ head: HTTPClientResponseHead) {
        self.head = head
        switch head.status {
        case 206 where self.resumed > 0:
            break
        case 200:
            if self.resumed > 0 {
                // The server ignored the Range: start over, file and hash.
                self.writer.restart()
                self.done.store(0, ordering: .relaxed)
            }
        default:
            self.rejected = .http(status: head.status, code: head.header("X-Error-Code"), message: "")
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if self.rejected != nil {
            if self.errorBody.count < 4096 { self.errorBody += bytes.prefix(4096 - self.errorBody.count) }
            return true
        }
        // False once a write to the file failed: the transfer aborts, and `BlobWriter.finish` says why.
        guard self.writer.append(bytes) else { return false }
        self.done.add(Int64(bytes.count), ordering: .relaxed)
        return true
    }

    func end(_ error: HTTPClientError?) {
        self.writer.flush()
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

/// Writes a blob to its `.incomplete` file and hashes it, a megabyte at a time, on a queue of its own.
///
/// libcurl hands the body over in 16 KiB pieces (CURL_MAX_WRITE_SIZE). Written and hashed one by one on the loop
/// thread, a 256 MB file cost 16,000 `write` calls and the hash on top of the socket reads, all on one core.
/// Here the loop thread only copies each piece into a reused megabyte slot; the queue writes full slots to the
/// file, hashes them and gives them back. The socket reads and the file writes with the hash then run on two
/// cores, and nothing is allocated per piece. At most `slotCount` slots are in flight: past that `append` waits
/// for the queue, so the hash and the disk can never fall unboundedly behind.
///
/// `append`, `flush` and `restart` come from one thread at a time (the HTTP loop thread); `finish` after the
/// transfer ended. The queue alone touches the file offset and the hasher once the transfer has started.
final class BlobWriter: @unchecked Sendable {
    static let slotBytes = 1 << 20
    static let slotCount = 4
    /// Written bytes between two requests to start their writeback (`sync_file_range`).
    static let writebackStride: Int64 = 8 << 20

    /// A slot's memory; its owner (the filling thread, or the queue while it is in flight) alone touches it.
    struct Slot: @unchecked Sendable { let buffer: UnsafeMutableRawBufferPointer }

    private let fd: Int32
    private let hashes: Bool
    private let queue = DispatchQueue(label: "homebase.blob-writer")
    private let slots = DispatchSemaphore(value: BlobWriter.slotCount)
    private let free: Mutex<[Slot]>
    private let failed = Atomic<Bool>(false)
    // The filling thread's.
    private var current: Slot?
    private var filled = 0
    // The queue's (or anyone's before the transfer starts, and after `finish`).
    private var hasher: SHA256Hasher?
    private var fileBytes: Int64
    private var writebackFrom: Int64
    private var failure: HubError?

    /// `fileBytes`: what the file holds already (a resume; `prefill` hashes it).
    init(fd: Int32, hashes: Bool, fileBytes: Int64) {
        self.fd = fd
        self.hashes = hashes
        self.hasher = hashes ? SHA256Hasher() : nil
        self.fileBytes = fileBytes
        self.writebackFrom = fileBytes
        self.free = Mutex((0..<Self.slotCount).map { _ in
            Slot(buffer: UnsafeMutableRawBufferPointer.allocate(byteCount: Self.slotBytes, alignment: 64))
        })
    }

    deinit {
        // No block is pending: each holds the writer.
        if let current { current.buffer.deallocate() }
        self.free.withLock { for slot in $0 { slot.buffer.deallocate() } }
    }

    /// Hashes the bytes already in the partial file (a resume), before the transfer starts.
    func prefill(path: String, count: Int64) throws(HubError) {
        guard let hasher = self.hasher else { return }
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw .disk("open \(path): \(HubDownloader.errnoText())") }
        defer { close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.slotBytes, alignment: 64)
        defer { buffer.deallocate() }
        var left = count
        while left > 0 {
            let n = read(fd, buffer.baseAddress!, Int(min(Int64(buffer.count), left)))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw .disk("read back \(path): \(HubDownloader.errnoText())") }
            hasher.update(raw: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            left -= Int64(n)
        }
    }

    /// Empties the file and the hash (the server answered a `Range` with the whole file).
    func restart() {
        self.flush()
        self.queue.sync {
            if ftruncate(self.fd, 0) != 0, self.failure == nil {
                self.failure = .disk("truncate: \(HubDownloader.errnoText())")
                self.failed.store(true, ordering: .relaxed)
            }
            self.fileBytes = 0
            self.writebackFrom = 0
            self.hasher = self.hashes ? SHA256Hasher() : nil
        }
    }

    /// Copies a piece in; a full slot goes to the queue. `false` once a write has failed.
    func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var rest = bytes
        while !rest.isEmpty {
            if self.failed.load(ordering: .relaxed) { return false }
            let slot = self.current ?? self.takeSlot()
            self.current = slot
            let n = min(slot.buffer.count - self.filled, rest.count)
            (slot.buffer.baseAddress! + self.filled).copyMemory(from: rest.baseAddress!, byteCount: n)
            self.filled += n
            rest = UnsafeRawBufferPointer(rebasing: rest[n...])
            if self.filled == slot.buffer.count { self.flush() }
        }
        return !self.failed.load(ordering: .relaxed)
    }

    /// Sends the slot being filled to the queue, however full.
    func flush() {
        guard let slot = self.current else { return }
        let count = self.filled
        self.current = nil
        self.filled = 0
        guard count > 0 else { return self.giveBack(slot) }
        self.queue.async { self.process(slot, count: count) }
    }

    /// Waits for the queue; then the file holds every byte appended. Returns the digest (empty when not
    /// hashing), or the write failure.
    func finish() -> Result<[UInt8], HubError> {
        self.flush()
        return self.queue.sync {
            if let failure = self.failure { return .failure(failure) }
            return .success(self.hasher?.finalize() ?? [])
        }
    }

    private func takeSlot() -> Slot {
        self.slots.wait()
        return self.free.withLock { $0.removeLast() }
    }

    private func giveBack(_ slot: Slot) {
        self.free.withLock { $0.append(slot) }
        self.slots.signal()
    }

    /// On the queue: writes a slot, hashes it, starts its writeback.
    private func process(_ slot: Slot, count: Int) {
        defer { self.giveBack(slot) }
        guard self.failure == nil else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: slot.buffer[0..<count])
        guard DurableFile.writeAll(self.fd, bytes) else {
            self.failure = .disk("write: \(HubDownloader.errnoText())")
            self.failed.store(true, ordering: .relaxed)
            return
        }
        self.hasher?.update(raw: bytes)
        self.fileBytes += Int64(count)
        self.startWriteback()
    }

    /// Asks the kernel to start writing what arrived to disk (`SYNC_FILE_RANGE_WRITE`: it does not wait), every
    /// `writebackStride` bytes, so the disk works while the transfer runs and the `fsync` before the rename
    /// waits for the last stride rather than the whole file. Only a head start: the `fsync` still decides (and
    /// reports any error), so a failure here is ignored.
    private func startWriteback() {
        guard self.fileBytes - self.writebackFrom >= Self.writebackStride else { return }
        Posix.startWriteback(self.fd, offset: self.writebackFrom, count: self.fileBytes - self.writebackFrom)
        self.writebackFrom = self.fileBytes
    }
}
