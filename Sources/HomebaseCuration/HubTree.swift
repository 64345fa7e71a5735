import HomebaseCore

/// One file of a repo revision, from `GET /api/models/{repo}/tree/{revision}` (reference/model-apis.md §6):
/// `path`, `size`, the git `oid`, and for LFS files `lfs.oid` (the content's sha256) and `lfs.size`.
public struct HubFile: Sendable, Hashable, Codable {
    public var path: String
    public var size: Int64
    /// The git blob sha1 (40 hex): the etag and blob name of a non-LFS file.
    public var gitOID: String
    /// The content's sha256 (64 hex) for LFS files: their etag and blob name.
    public var sha256: String?

    public init(path: String, size: Int64, gitOID: String, sha256: String? = nil) {
        self.path = path
        self.size = size
        self.gitOID = gitOID
        self.sha256 = sha256
    }

    /// The blob's name in the cache (`blobs/<etag>`): sha256 for LFS files, git sha1 otherwise.
    public var etag: String { self.sha256 ?? self.gitOID }

    /// Files a model load reads (what mlx-lm fetches): configs, tokenizers, weights, chat templates. READMEs,
    /// images and `.gitattributes` are skipped.
    public var isNeededForLoad: Bool {
        let lower = self.path.lowercased()
        return [".json", ".safetensors", ".txt", ".model", ".tiktoken", ".jinja", ".py"].contains { lower.hasSuffix($0) }
    }

    /// A path that is safe to place under `snapshots/<rev>/`: relative, no `..`, no empty or dot components.
    public var hasSafePath: Bool {
        guard !self.path.isEmpty, !self.path.hasPrefix("/"), self.path.utf8.count <= 1024 else { return false }
        return self.path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy {
            !$0.isEmpty && $0 != "." && $0 != ".." && !$0.contains("\0")
        }
    }
}

public enum HubTree {
    /// Parses a tree listing; entries of `type` other than `file` are skipped. Throws on anything that is not an
    /// array of objects, on a file without `path`/`size`/`oid`, on a malformed hash, or on an unsafe path (a
    /// hostile server must not write outside the snapshot).
    public static func parse(_ bytes: [UInt8]) throws(HubListingError) -> [HubFile] {
        let root: JSONNode
        do {
            root = try bytes.withUnsafeBufferPointer { buffer throws(JSONNode.ParseError) in try JSONNode.parse(buffer) }
        } catch {
            throw HubListingError("the file list is not JSON (\(error.reason) at byte \(error.offset))")
        }
        guard let entries = root.arrayValue else { throw HubListingError("the file list is not a JSON array") }
        var files: [HubFile] = []
        for entry in entries {
            guard entry["type"]?.stringValue == "file" else { continue }
            guard let path = entry["path"]?.stringValue, let size = entry["size"]?.intValue, size >= 0,
                let oid = entry["oid"]?.stringValue, Self.isHex(oid, count: 40)
            else { throw HubListingError("a file entry lacks path, size or oid") }
            var sha: String?
            if let lfs = entry["lfs"], lfs.isObject {
                guard let o = lfs["oid"]?.stringValue, Self.isHex(o, count: 64) else {
                    throw HubListingError("\(path): the LFS oid is not a sha256")
                }
                sha = o.lowercased()
            }
            let file = HubFile(path: path, size: Int64(size), gitOID: oid.lowercased(), sha256: sha)
            guard file.hasSafePath else { throw HubListingError("unsafe file path \(path.debugDescription)") }
            files.append(file)
        }
        return files
    }

    public static func isHex(_ s: String, count: Int) -> Bool {
        s.utf8.count == count && s.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0 | 0x20) }
    }

    /// The git blob id of `content` (sha1 of `blob <len>\0` + content), the etag of a non-LFS file.
    public static func gitBlobID(_ content: [UInt8]) -> String {
        Self.hex(SHA1.hash(Array("blob \(content.count)\0".utf8) + content))
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Paths of the Hub cache layout that huggingface_hub and mlx-lm read (reference/model-apis.md §6), relative to
/// the hub root (`$HF_HUB_CACHE`, else `$HF_HOME/hub`):
///
/// ```
/// .locks/models--ORG--NAME/<etag>.lock
/// models--ORG--NAME/blobs/<etag>            (+ <etag>.incomplete while downloading)
/// models--ORG--NAME/refs/main               (the commit, no trailing newline)
/// models--ORG--NAME/snapshots/<commit>/<path> -> ../../blobs/<etag>   (relative symlinks)
/// ```
public struct HubCacheLayout: Sendable, Equatable {
    public var root: String

    public init(root: String) {
        self.root = root.hasSuffix("/") && root.count > 1 ? String(root.dropLast()) : root
    }

    /// The hub root from the environment, as huggingface_hub resolves it.
    public static func root(environment: [String: String], home: String) -> String {
        if let v = environment["HF_HUB_CACHE"], !v.isEmpty { return v }
        if let v = environment["HF_HOME"], !v.isEmpty { return v + "/hub" }
        if let v = environment["XDG_CACHE_HOME"], !v.isEmpty { return v + "/huggingface/hub" }
        return home + "/.cache/huggingface/hub"
    }

    public func repo(_ id: String) -> String { self.root + "/" + RepoID.cacheFolder(id) }
    public func locks(_ id: String) -> String { self.root + "/.locks/" + RepoID.cacheFolder(id) }
    public func lock(_ id: String, etag: String) -> String { self.locks(id) + "/" + etag + ".lock" }
    public func blob(_ id: String, etag: String) -> String { self.repo(id) + "/blobs/" + etag }
    public func incomplete(_ id: String, etag: String) -> String { self.blob(id, etag: etag) + ".incomplete" }
    public func ref(_ id: String, revision: String = "main") -> String { self.repo(id) + "/refs/" + revision }
    public func snapshot(_ id: String, commit: String) -> String { self.repo(id) + "/snapshots/" + commit }
    public func snapshotFile(_ id: String, commit: String, path: String) -> String {
        self.snapshot(id, commit: commit) + "/" + path
    }

    /// The relative symlink target from `snapshots/<commit>/<path>` to its blob: one `..` per directory level.
    public static func symlinkTarget(path: String, etag: String) -> String {
        let depth = path.split(separator: "/").count - 1
        return String(repeating: "../", count: depth + 2) + "blobs/" + etag
    }
}
