import HomebaseCore
import HomebaseCrypto
import HomebaseCuration

/// One file the emulator serves for a repo, with the hashes the Hub announces for it.
struct ServedFile: Sendable {
    let path: String
    let content: [UInt8]
    /// Git blob sha1: the `oid` of the tree entry (and the etag of a non-LFS file).
    let gitOID: String
    /// sha256 of the content for LFS files (their etag and `lfs.oid`).
    let sha256: String?

    init(path: String, content: [UInt8], lfs: Bool) {
        self.path = path
        self.content = content
        self.sha256 = lfs ? Hex.encode(SHA256.hash(content)) : nil
        // For an LFS file, git stores a pointer; its oid is the pointer's blob id, as on the Hub.
        let pointer = lfs
            ? Array("version https://git-lfs.github.com/spec/v1\noid sha256:\(self.sha256!)\nsize \(content.count)\n".utf8)
            : content
        self.gitOID = HubTree.gitBlobID(pointer)
    }

    var etag: String { self.sha256 ?? self.gitOID }

    /// The tree entry (`GET /api/models/{repo}/tree/{rev}`).
    var treeEntry: JSONNode {
        var members: [JSONNode.Member] = [
            .init(key: "type", value: .string("file")),
            .init(key: "oid", value: .string(self.gitOID)),
            .init(key: "size", value: .number(self.content.count)),
            .init(key: "path", value: .string(self.path)),
        ]
        if let sha = self.sha256 {
            members.append(.init(key: "lfs", value: .object([
                .init(key: "oid", value: .string(sha)),
                .init(key: "size", value: .number(self.content.count)),
                .init(key: "pointerSize", value: .number(134)),
            ])))
        }
        return .object(members)
    }
}

/// The files of one repo, generated deterministically from its id and listing record: `config.json` (with the
/// record's `model_type`), `tokenizer_config.json`, `README.md`, and an LFS `model.safetensors` — a valid
/// safetensors file (8-byte header length, JSON header, data) whose data is a seeded xorshift stream.
enum RepoFiles {
    static func make(id: String, record: JSONNode, weightBytes: Int, weightsFolder: String = "") -> [ServedFile] {
        var config: [JSONNode.Member] = []
        if case .object(let members)? = record["config"] {
            config = members.filter { $0.key != "tokenizer_config" }
        }
        config.append(.init(key: "_name_or_path", value: .string(id)))
        let configJSON = JSONNode.object(config).serialized()
        let tokenizer = JSONNode.object([
            .init(key: "eos_token", value: .string("<|im_end|>")),
            .init(key: "chat_template", value: .string("{% for m in messages %}{{ m.content }}{% endfor %}")),
        ]).serialized()
        let readme = Array("---\nlibrary_name: mlx\n---\n# \(id)\n\nConverted to MLX format.\n".utf8)
        return [
            ServedFile(path: ".gitattributes", content: Array("*.safetensors filter=lfs diff=lfs merge=lfs -text\n".utf8),
                       lfs: false),
            ServedFile(path: "README.md", content: readme, lfs: false),
            ServedFile(path: "config.json", content: configJSON, lfs: false),
            ServedFile(path: "tokenizer_config.json", content: tokenizer, lfs: false),
            ServedFile(path: weightsFolder + "model.safetensors", content: Self.safetensors(id: id, bytes: weightBytes),
                       lfs: true),
        ]
    }

    /// The tree listing (`GET /api/models/{repo}/tree/{rev}`): with `recursive`, every folder and file; without,
    /// as on the Hub, only the top level — its files and a `directory` entry per folder, whose files are not listed.
    static func tree(_ files: [ServedFile], recursive: Bool) -> [JSONNode] {
        var folders: [String] = []
        for file in files {
            let parts = file.path.split(separator: "/").dropLast()
            for depth in parts.indices.map({ $0 + 1 }) {
                let folder = parts.prefix(depth).joined(separator: "/")
                if !folders.contains(folder) { folders.append(folder) }
            }
        }
        let listedFolders = recursive ? folders : folders.filter { !$0.contains("/") }
        let directories = listedFolders.map { folder -> JSONNode in
            .object([
                .init(key: "type", value: .string("directory")),
                .init(key: "oid", value: .string(HubTree.gitBlobID(Array(folder.utf8)))),
                .init(key: "size", value: .number(0)),
                .init(key: "path", value: .string(folder)),
            ])
        }
        let listedFiles = recursive ? files : files.filter { !$0.path.contains("/") }
        return directories + listedFiles.map(\.treeEntry)
    }

    /// A safetensors file of exactly `bytes` bytes (at least the header), deterministic per id.
    static func safetensors(id: String, bytes: Int) -> [UInt8] {
        var headerText = #"{"__metadata__":{"format":"mlx"},"weight":{"dtype":"U8","shape":[DATA],"data_offsets":[0,DATA]}}"#
        // The header's own length depends on the digits of the data size: settle it in two passes.
        var dataBytes = max(0, bytes - 8 - headerText.utf8.count)
        for _ in 0..<2 {
            let text = headerText.replacingDATA(with: dataBytes)
            dataBytes = max(0, bytes - 8 - text.utf8.count)
        }
        headerText = headerText.replacingDATA(with: dataBytes)
        var out = [UInt8]()
        out.reserveCapacity(8 + headerText.utf8.count + dataBytes)
        var length = UInt64(headerText.utf8.count)
        for _ in 0..<8 {
            out.append(UInt8(length & 0xff))
            length >>= 8
        }
        out += Array(headerText.utf8)
        var state: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in id.utf8 { state = (state ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        var remaining = dataBytes
        while remaining > 0 {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            var word = state &* 0x2545_f491_4f6c_dd1d
            for _ in 0..<min(8, remaining) {
                out.append(UInt8(word & 0xff))
                word >>= 8
            }
            remaining -= 8
        }
        return out
    }
}

extension String {
    fileprivate func replacingDATA(with n: Int) -> String {
        self.split(separator: "DATA", omittingEmptySubsequences: false).joined(separator: String(n))
    }
}
