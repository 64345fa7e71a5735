import HomebaseCore
import HomebaseCuration
import HomebaseTransport

/// Why talking to the Hub failed, in words a user can act on.
public enum HubError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The Hub answered with an error status (and its `X-Error-Code`, when it sent one).
    case http(status: Int, code: String?, message: String)
    /// No answer at all (refused, timed out, reset).
    case transport(String)
    /// An answer that is not what the API promises (garbage JSON, a truncated page).
    case malformed(String)
    /// A downloaded blob's hash did not match what the Hub announced; the blob was deleted.
    case checksumMismatch(path: String, expected: String, actual: String)
    /// Writing to disk failed (the disk is full, say); nothing half-written was kept.
    case disk(String)
    /// Another process holds the blob's lock (the path of the lock file).
    case locked(String)
    /// The model is downloading already, in this process or another (its id); a start was refused.
    case alreadyDownloading(String)
    case cancelled

    public var description: String {
        switch self {
        case .http(401, "GatedRepo", _):
            return "the repo is gated: accept its terms on the Hub and sign in (401 GatedRepo)"
        case .http(401, let code, _):
            return "the repo does not exist or needs access you do not have (401\(code.map { " " + $0 } ?? ""))"
        case .http(404, let code?, let message):
            return "not found (404 \(code)): \(message)"
        case .http(let status, let code, let message):
            return "the Hub answered \(status)\(code.map { " " + $0 } ?? "")" + (message.isEmpty ? "" : ": \(message)")
        case .transport(let why): return "cannot reach the Hub: \(why)"
        case .malformed(let why): return "the Hub's answer is malformed: \(why)"
        case .checksumMismatch(let path, let expected, let actual):
            return "\(path): sha256 \(actual.prefix(12))… does not match the Hub's \(expected.prefix(12))…; the file was deleted"
        case .disk(let why): return "cannot write the model: \(why); nothing partial was kept"
        case .locked(let path): return "another download holds the lock \(path)"
        case .alreadyDownloading(let id):
            return "already downloading ('handset models cancel \(id)' stops it)"
        case .cancelled: return "cancelled"
        }
    }
}

/// The Hub's model API over the project's libcurl client (reference/model-apis.md §6): the listing (three tags
/// in parallel, `Link` pagination followed unchanged), a revision's commit and its file tree.
public struct HubClient: Sendable {
    public static let defaultEndpoint = "https://huggingface.co"
    /// Pages followed per listing at most: a server whose `next` never ends must not hold the catalog forever.
    public static let maxPages = 200
    /// Largest listing page accepted.
    public static let maxPageBytes = 32 * 1024 * 1024

    public let http: HTTPClient
    /// The Hub root (`HF_ENDPOINT`), no trailing slash.
    public let endpoint: String
    public let timeout: Duration

    public init(http: HTTPClient, endpoint: String = Self.defaultEndpoint, timeout: Duration = .seconds(30)) {
        self.http = http
        self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.timeout = timeout
    }

    /// The first page's URL for one pipeline tag: repeated `expand=` (what the official clients send).
    public func listingURL(org: String, pipelineTag: String, limit: Int = 1000) -> String {
        "\(self.endpoint)/api/models?author=\(org)&pipeline_tag=\(pipelineTag)&sort=downloads&direction=-1"
            + "&limit=\(limit)&expand=safetensors&expand=config&expand=pipeline_tag"
    }

    /// One tag's whole listing, every page.
    public func listing(org: String, pipelineTag: String) async throws(HubError) -> [HubModel] {
        var url: String? = self.listingURL(org: org, pipelineTag: pipelineTag)
        var models: [HubModel] = []
        var pages = 0
        while let next = url {
            pages += 1
            guard pages <= Self.maxPages else { throw .malformed("more than \(Self.maxPages) pages") }
            let response = try await self.get(next, maxBytes: Self.maxPageBytes)
            do { models += try HubModel.parsePage(response.body) } catch { throw .malformed(error.description) }
            url = LinkHeader.next(response.head.header("Link"))
        }
        return models
    }

    /// The three listings the catalog merges, fetched in parallel (§2). Any failure fails the whole fetch: a
    /// catalog silently missing the vision tags is the very bug the three queries exist to avoid.
    public func catalogListings(org: String) async throws(HubError) -> [[HubModel]] {
        let tags = ModelTypes.queriedPipelineTags
        do {
            return try await withThrowingTaskGroup(of: (Int, [HubModel]).self) { group in
                for (i, tag) in tags.enumerated() {
                    group.addTask { (i, try await self.listing(org: org, pipelineTag: tag)) }
                }
                var out = [[HubModel]](repeating: [], count: tags.count)
                for try await (i, models) in group { out[i] = models }
                return out
            }
        } catch let error as HubError {
            throw error
        } catch {
            throw .transport("\(error)")
        }
    }

    /// The commit `revision` resolves to, and that commit's files.
    public func tree(_ id: String, revision: String = "main") async throws(HubError) -> (commit: String, files: [HubFile]) {
        let info = try await self.get("\(self.endpoint)/api/models/\(id)/revision/\(revision)", maxBytes: 4 << 20)
        let node: JSONNode
        do {
            node = try info.body.withUnsafeBufferPointer { b throws(JSONNode.ParseError) in try JSONNode.parse(b) }
        } catch { throw .malformed("model info is not JSON") }
        guard let commit = node["sha"]?.stringValue, HubTree.isHex(commit, count: 40) else {
            throw .malformed("model info has no commit sha")
        }
        // Without `recursive=1` the Hub lists only the top level: weights in a subfolder would be missed. A long
        // tree comes in pages linked like the listing's.
        var url: String? = "\(self.endpoint)/api/models/\(id)/tree/\(commit)?recursive=1"
        var files: [HubFile] = []
        var pages = 0
        while let next = url {
            pages += 1
            guard pages <= Self.maxPages else { throw .malformed("the file tree has more than \(Self.maxPages) pages") }
            let tree = try await self.get(next, maxBytes: 16 << 20)
            do { files += try HubTree.parse(tree.body) } catch { throw .malformed(error.description) }
            url = LinkHeader.next(tree.head.header("Link"))
        }
        return (commit.lowercased(), files)
    }

    /// A GET whose non-2xx answers become `HubError.http` with the Hub's `X-Error-Code`.
    func get(_ url: String, maxBytes: Int) async throws(HubError) -> HTTPResponse {
        let response: HTTPResponse
        do {
            response = try await self.http.send(HTTPRequest(url: url, headers: [("Accept", "application/json")],
                                                            timeout: self.timeout, maxResponseBytes: maxBytes))
        } catch let error as HTTPClientError {
            throw Self.transportError(error)
        } catch {
            throw .transport("\(error)")
        }
        guard (200..<300).contains(response.head.status) else {
            throw Self.httpError(response.head, body: response.body)
        }
        return response
    }

    static func transportError(_ error: HTTPClientError) -> HubError {
        switch error {
        case .cancelled: return .cancelled
        case .connectFailed(let why): return .transport(why)
        case .timedOut: return .transport("timed out")
        case .responseTooLarge: return .malformed("the answer is too large")
        case .invalidRequest(let why): return .transport(why)
        case .transport(_, let message): return .transport(message)
        }
    }

    /// The Hub's error: `X-Error-Code`, `X-Error-Message` or the body's `{"error": ...}`.
    static func httpError(_ head: HTTPClientResponseHead, body: [UInt8]) -> HubError {
        var message = head.header("X-Error-Message") ?? ""
        if message.isEmpty, let node = try? JSONNode.parse(String(decoding: body.prefix(4096), as: UTF8.self)),
            let text = node["error"]?.stringValue {
            message = text
        }
        return .http(status: head.status, code: head.header("X-Error-Code"), message: String(message.prefix(300)))
    }
}
