#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Plain files that survive a crash (the state database's own durability is SQLite's): written whole or not at
/// all, and their names made durable by syncing the directory that holds them. The Hub cache's blobs and refs
/// use them. Errors are `StoreError.file` with the failing call, the path and `errno`.
public enum DurableFile {
    /// Writes `bytes` to `path` atomically: into `path.tmp`, `fsync`ed, renamed over `path`, the directory
    /// synced. A crash leaves the old file or the new one, never a part of either; a failure leaves no `.tmp`.
    public static func write(_ bytes: [UInt8], to path: String) throws(StoreError) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .file(operation: "open", path: temporary, errno: errno) }
        var failure: StoreError?
        if !bytes.withUnsafeBytes({ Self.writeAll(fd, $0) }) {
            failure = .file(operation: "write", path: temporary, errno: errno)
        } else if fsync(fd) != 0 {
            failure = .file(operation: "fsync", path: temporary, errno: errno)
        }
        close(fd)
        if failure == nil, Self.systemRename(temporary, path) != 0 {
            failure = .file(operation: "rename", path: path, errno: errno)
        }
        if let failure {
            unlink(temporary)
            throw failure
        }
        try Self.syncDirectory(Self.directory(of: path))
    }

    /// Renames a file already written and `fsync`ed to `destination`, then syncs the destination's directory,
    /// so the new name itself survives a crash.
    public static func rename(_ source: String, to destination: String) throws(StoreError) {
        guard Self.systemRename(source, destination) == 0 else { throw .file(operation: "rename", path: source, errno: errno) }
        try Self.syncDirectory(Self.directory(of: destination))
    }

    /// `fsync` of a directory: makes the names created or renamed in it durable.
    public static func syncDirectory(_ path: String) throws(StoreError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .file(operation: "open", path: path, errno: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .file(operation: "fsync", path: path, errno: errno) }
    }

    /// Writes all of `raw` to `fd`, retrying short writes and `EINTR`; false on an error (`errno` says which).
    public static func writeAll(_ fd: Int32, _ raw: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < raw.count {
            #if canImport(Glibc)
            let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
            #else
            let n = Darwin.write(fd, raw.baseAddress! + offset, raw.count - offset)
            #endif
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += n
        }
        return true
    }

    /// The directory part of a path (`.` for a bare name, `/` for a name in the root).
    public static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func systemRename(_ source: String, _ destination: String) -> Int32 {
        #if canImport(Glibc)
        Glibc.rename(source, destination)
        #else
        Darwin.rename(source, destination)
        #endif
    }
}
