import Foundation
import HomebaseCore
import HomebaseTransport
import Synchronization

/// An in-process stand-in for the Hugging Face Hub (reference/model-apis.md §6; Fixtures/hub/README.md): the
/// model listing with its filters, `expand` projection and `Link` pagination, model info, the file tree, and
/// `resolve` downloads the way the Hub serves them (small git files directly, LFS files by a 302 to the LFS
/// store, which honours `Range`). Faults come from `HubFaults`.
public final class HubEmulator: Sendable {
    public let configuration: HubEmulatorConfiguration
    let server = Mutex<SimpleHTTPServer?>(nil)
    /// Records by repo id.
    let records: [String: JSONNode]
    /// Generated files by repo id (made on first use: a few hundred repos of weights up front would be wasted).
    let files = Mutex<[String: [ServedFile]]>([:])
    /// Blobs whose first full download was already dropped (`drop-after`).
    let dropped = Mutex<Set<String>>([])
    /// Requests per path, for tests that check what a client asked for.
    let hits = Mutex<[String: Int]>([:])
    /// LFS-store requests that carried `Range` (resumes).
    let ranges = Mutex(0)

    public init(configuration: HubEmulatorConfiguration) {
        self.configuration = configuration
        var records: [String: JSONNode] = [:]
        for record in configuration.models {
            if let id = record["id"]?.stringValue, records[id] == nil { records[id] = record }
        }
        self.records = records
    }

    @discardableResult
    public func start(port: UInt16? = nil) throws -> UInt16 {
        let server = SimpleHTTPServer { [self] request, writer in self.handle(request, writer) }
        let bound = try server.start(host: self.configuration.host, port: port ?? self.configuration.port)
        self.server.withLock { $0 = server }
        return bound
    }

    public func stop() {
        let server = self.server.withLock { s -> SimpleHTTPServer? in
            defer { s = nil }
            return s
        }
        server?.stop()
    }

    /// How many requests reached `path` (no query) so far.
    public func hitCount(_ path: String) -> Int { self.hits.withLock { $0[path] ?? 0 } }

    /// How many weight requests asked for a `Range` (a resumed download).
    public var rangeRequests: Int { self.ranges.withLock { $0 } }

    /// The sha256 the emulator announces for a repo's `model.safetensors`, and its size (tests compare).
    public func weights(of id: String) -> (sha256: String, size: Int)? {
        guard let file = self.repoFiles(id)?.first(where: { $0.path.hasSuffix("model.safetensors") }) else { return nil }
        return (file.sha256!, file.content.count)
    }

    // MARK: Routing

    func handle(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        self.hits.withLock { $0[request.path, default: 0] += 1 }
        guard request.method == "GET" || request.method == "HEAD" else {
            return Self.error(writer, 405, code: nil, "Method not allowed")
        }
        let path = request.path
        if path == "/api/models" { return self.listing(request, writer) }
        if path.hasPrefix("/api/models/") { return self.modelAPI(String(path.dropFirst("/api/models/".count)), request, writer) }
        if path.hasPrefix("/lfs-store/") { return self.lfsStore(String(path.dropFirst("/lfs-store/".count)), request, writer) }
        let parts = path.split(separator: "/", maxSplits: 4, omittingEmptySubsequences: false).map(String.init)
        // "", ORG, NAME, "resolve", "REV/FILE"
        if parts.count == 5, parts[0].isEmpty, parts[3] == "resolve" {
            return self.resolve(repo: parts[1] + "/" + parts[2], revAndPath: parts[4], request, writer)
        }
        Self.error(writer, 404, code: nil, "Not Found")
    }

    // MARK: /api/models

    func listing(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        switch self.configuration.faults.listing {
        case .http500?:
            return Self.error(writer, 500, code: nil, "Internal Error - We're working hard to fix this as soon as possible!")
        case .garbage?:
            return writer.respond(status: 200, headers: [("Content-Type", "application/json; charset=utf-8")],
                                  body: "<html><body>upstream connect error</body></html>")
        case .truncated?, nil:
            break
        }
        let head = request.head
        let author = head.queryValue("author")
        let tags = head.query.filter { $0.name == "pipeline_tag" }.map(\.value)
        let search = head.queryValue("search")?.lowercased()
        let filters = head.query.filter { $0.name == "filter" }.map(\.value)
        let expand = head.query.filter { $0.name == "expand" || $0.name == "expand[]" }.map(\.value)
        let limit = min(Int(head.queryValue("limit") ?? "") ?? self.configuration.pageSize, self.configuration.pageSize)
        let offset = head.queryValue("cursor").flatMap(Self.decodeCursor) ?? 0
        let matching = self.configuration.models.filter { record in
            guard let id = record["id"]?.stringValue else { return false }
            if let author, record["author"]?.stringValue != author, !id.hasPrefix(author + "/") { return false }
            if !tags.isEmpty, !tags.contains(record["pipeline_tag"]?.stringValue ?? "\u{0}") { return false }
            if let search, !id.lowercased().contains(search) { return false }
            let recordTags = record["tags"]?.arrayValue?.compactMap(\.stringValue) ?? []
            return filters.allSatisfy { recordTags.contains($0) }
        }
        let page = matching.dropFirst(offset).prefix(max(1, limit))
        let body = JSONNode.array(page.map { Self.project($0, expand: expand) }).serialized()
        var headers = [("Content-Type", "application/json; charset=utf-8")]
        if offset + page.count < matching.count {
            let host = request.header("Host") ?? "\(self.configuration.host):\(self.configuration.port)"
            var items = head.query.filter { $0.name != "cursor" }.map { "\(Self.escape($0.name))=\(Self.escape($0.value))" }
            items.append("cursor=" + Self.encodeCursor(offset + page.count))
            headers.append(("Link", "<http://\(host)/api/models?\(items.joined(separator: "&"))>; rel=\"next\""))
        }
        if self.configuration.faults.listing == .truncated {
            writer.respondPaced(status: 200, headers: headers, body: body[...], dropAfter: body.count / 2)
            return
        }
        writer.respond(status: 200, headers: headers, body: body)
    }

    /// The Hub's default listing fields, and with `expand`, only the expanded ones (plus `_id` and `id`).
    static let defaultFields = ["_id", "id", "likes", "private", "downloads", "tags", "pipeline_tag", "library_name",
                                "createdAt"]

    static func project(_ record: JSONNode, expand: [String]) -> JSONNode {
        guard case .object(let members) = record else { return record }
        let wanted = Set(expand.isEmpty ? Self.defaultFields : ["_id", "id"] + expand)
        var out = members.filter { wanted.contains($0.key) }
        if expand.isEmpty, let id = record["id"] { out.append(.init(key: "modelId", value: id)) }
        return .object(out)
    }

    /// Opaque cursors, as the Hub's are: base64 of a small JSON object.
    static func encodeCursor(_ offset: Int) -> String {
        Base64.encode(Array(#"{"offset":\#(offset)}"#.utf8)).replacingOccurrences(of: "=", with: "")
    }

    static func decodeCursor(_ text: String) -> Int? {
        let padded = text + String(repeating: "=", count: (4 - text.count % 4) % 4)
        guard let bytes = Base64.decode(padded),
            let node = try? JSONNode.parse(String(decoding: bytes, as: UTF8.self)),
            let offset = node["offset"]?.intValue, offset >= 0
        else { return nil }
        return offset
    }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlQueryValueAllowed) ?? text
    }

    // MARK: /api/models/ORG/NAME[/revision/REV | /tree/REV]

    func modelAPI(_ rest: String, _ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 2 else { return Self.error(writer, 404, code: "RepoNotFound", "Repository not found") }
        let id = parts[0] + "/" + parts[1]
        guard let record = self.records[id] else {
            return Self.error(writer, 404, code: "RepoNotFound", "Repository not found")
        }
        let sha = record["sha"]?.stringValue ?? String(repeating: "0", count: 40)
        if parts.count == 4, parts[2] == "tree" {
            guard parts[3] == "main" || parts[3] == sha else {
                return Self.error(writer, 404, code: "RevisionNotFound", "Invalid rev id: \(parts[3])")
            }
            // The Hub lists only the top level (files and folders) unless asked for `recursive`, a page at a time
            // with a `Link` to the next, as the listing does.
            let recursive = request.head.query.contains {
                $0.name == "recursive" && ["1", "true", "True"].contains($0.value)
            }
            let entries = RepoFiles.tree(self.repoFiles(id) ?? [], recursive: recursive)
            let offset = request.head.queryValue("cursor").flatMap(Self.decodeCursor) ?? 0
            let page = entries.dropFirst(offset).prefix(max(1, self.configuration.pageSize))
            var headers = [("Content-Type", "application/json; charset=utf-8")]
            if offset + page.count < entries.count {
                let host = request.header("Host") ?? "\(self.configuration.host):\(self.configuration.port)"
                var items = request.head.query.filter { $0.name != "cursor" }.map {
                    "\(Self.escape($0.name))=\(Self.escape($0.value))"
                }
                items.append("cursor=" + Self.encodeCursor(offset + page.count))
                headers.append(("Link", "<http://\(host)\(request.path)?\(items.joined(separator: "&"))>; rel=\"next\""))
            }
            return writer.respond(status: 200, headers: headers, body: JSONNode.array(Array(page)).serialized())
        }
        guard parts.count == 2 || (parts.count == 4 && parts[2] == "revision") else {
            return Self.error(writer, 404, code: nil, "Not Found")
        }
        if parts.count == 4, parts[3] != "main", parts[3] != sha {
            return Self.error(writer, 404, code: "RevisionNotFound", "Invalid rev id: \(parts[3])")
        }
        guard case .object(var members) = record else { return Self.json(writer, record) }
        members.removeAll { $0.key == "siblings" }
        members.append(.init(key: "modelId", value: .string(id)))
        members.append(.init(key: "siblings", value: .array((self.repoFiles(id) ?? []).map {
            .object([.init(key: "rfilename", value: .string($0.path))])
        })))
        let expand = request.head.query.filter { $0.name == "expand" || $0.name == "expand[]" }.map(\.value)
        Self.json(writer, expand.isEmpty ? .object(members) : Self.project(.object(members), expand: expand))
    }

    // MARK: Downloads

    func resolve(repo id: String, revAndPath: String, _ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        guard let slash = revAndPath.firstIndex(of: "/") else {
            return Self.error(writer, 404, code: "EntryNotFound", "Entry not found")
        }
        let rev = String(revAndPath[..<slash])
        let path = String(revAndPath[revAndPath.index(after: slash)...])
        // Anonymous callers get 401 for missing, private and gated repos alike (the Hub does not say which).
        guard let record = self.records[id] else {
            return Self.error(writer, 401, code: "RepoNotFound",
                              "Repository Not Found for url: \(request.head.target). Please make sure you specified the correct `repo_id` and `repo_type`. If you are trying to access a private or gated repo, make sure you are authenticated.")
        }
        if self.configuration.faults.gated.contains(id) {
            return Self.error(writer, 401, code: "GatedRepo",
                              "Access to model \(id) is restricted. You must have access to it and be authenticated to access it. Please log in.")
        }
        let sha = record["sha"]?.stringValue ?? String(repeating: "0", count: 40)
        guard rev == "main" || rev == sha else {
            return Self.error(writer, 404, code: "RevisionNotFound", "Invalid rev id: \(rev)")
        }
        guard let file = self.repoFiles(id)?.first(where: { $0.path == path }) else {
            return Self.error(writer, 404, code: "EntryNotFound", "\(path) does not exist on \"\(rev)\"")
        }
        var headers = [("X-Repo-Commit", sha), ("ETag", "\"\(file.gitOID)\"")]
        if let lfs = file.sha256 {
            let host = request.header("Host") ?? "\(self.configuration.host):\(self.configuration.port)"
            headers += [("X-Linked-Etag", "\"\(lfs)\""), ("X-Linked-Size", String(file.content.count)),
                        ("Location", "http://\(host)/lfs-store/\(RepoIDFolder.folder(id))/\(lfs)")]
            return writer.respond(status: 302, headers: headers + [("Content-Type", "text/plain; charset=utf-8")],
                                  body: "Found. Redirecting to /lfs-store/\(lfs)")
        }
        headers.append(("Content-Type", "application/octet-stream"))
        writer.respond(status: 200, headers: headers, body: file.content)
    }

    /// The LFS store the Hub redirects to (a CDN in production): serves blobs by sha256, honouring `Range`.
    func lfsStore(_ rest: String, _ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        let parts = rest.split(separator: "/").map(String.init)
        guard parts.count == 2, let id = RepoIDFolder.id(parts[0]),
            let file = self.repoFiles(id)?.first(where: { $0.sha256 == parts[1] })
        else { return writer.respond(status: 404, headers: [("Content-Type", "text/plain")], body: "NoSuchKey") }
        var content = file.content
        let faults = self.configuration.faults
        if faults.corrupt.contains("*") || faults.corrupt.contains(id), !content.isEmpty {
            content[content.count / 2] ^= 0xff
        }
        var headers = [("ETag", "\"\(file.sha256!)\""), ("Accept-Ranges", "bytes"),
                       ("Content-Type", "application/octet-stream")]
        var status = 200
        var start = 0
        if let range = request.header("Range") {
            self.ranges.withLock { $0 += 1 }
            guard let from = Self.rangeStart(range), from < content.count || (from == 0 && content.isEmpty) else {
                return writer.respond(status: 416, headers: [("Content-Range", "bytes */\(content.count)")], body: [])
            }
            start = from
            status = 206
            headers.append(("Content-Range", "bytes \(from)-\(content.count - 1)/\(content.count)"))
        }
        var dropAfter: Int?
        if let n = faults.dropAfter, status == 200, request.method == "GET",
            self.dropped.withLock({ $0.insert(file.sha256!).inserted }) {
            dropAfter = n
        }
        var piece = 256 * 1024
        var pause: Duration?
        if let rate = faults.slowBytesPerSecond {
            piece = max(1024, rate / 20)
            pause = .milliseconds(50)
        }
        writer.respondPaced(status: status, headers: headers, body: content[start...], pieceBytes: piece, pause: pause,
                            dropAfter: dropAfter)
    }

    /// `bytes=N-` or `bytes=N-M` (the end is ignored: the rest of the file is sent, which every client accepts
    /// for an open resume); `nil` for anything else.
    static func rangeStart(_ value: String) -> Int? {
        guard value.hasPrefix("bytes="), let dash = value.firstIndex(of: "-") else { return nil }
        return Int(value[value.index(value.startIndex, offsetBy: 6)..<dash]).flatMap { $0 >= 0 ? $0 : nil }
    }

    func repoFiles(_ id: String) -> [ServedFile]? {
        guard let record = self.records[id] else { return nil }
        if let cached = self.files.withLock({ $0[id] }) { return cached }
        let nested = self.configuration.faults.nested
        let made = RepoFiles.make(id: id, record: record, weightBytes: self.configuration.weightBytes,
                                  weightsFolder: nested.contains("*") || nested.contains(id) ? "weights/" : "")
        self.files.withLock { $0[id] = made }
        return made
    }

    // MARK: Responses

    static func json(_ writer: HTTPResponseWriter, _ node: JSONNode) {
        writer.respond(status: 200, headers: [("Content-Type", "application/json; charset=utf-8")], body: node.serialized())
    }

    /// The Hub's error shape: `{"error": "..."}` with `X-Error-Code` and `X-Error-Message`.
    static func error(_ writer: HTTPResponseWriter, _ status: Int, code: String?, _ message: String) {
        var headers = [("Content-Type", "application/json; charset=utf-8"), ("X-Error-Message", message)]
        if let code { headers.append(("X-Error-Code", code)) }
        writer.respond(status: status, headers: headers,
                       body: JSONNode.object([.init(key: "error", value: .string(message))]).serialized())
    }
}

/// `models--ORG--NAME` and back, for the LFS store's paths.
enum RepoIDFolder {
    static func folder(_ id: String) -> String { "models--" + id.replacingOccurrences(of: "/", with: "--") }

    static func id(_ folder: String) -> String? {
        guard folder.hasPrefix("models--") else { return nil }
        let parts = folder.dropFirst("models--".count).components(separatedBy: "--")
        return parts.count == 2 ? parts.joined(separator: "/") : nil
    }
}

extension CharacterSet {
    /// Query values: unreserved characters only, so `&`, `=` and `+` inside a value stay data.
    static let urlQueryValueAllowed = CharacterSet(charactersIn:
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}
