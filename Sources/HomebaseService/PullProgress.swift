/// One status line of `/api/pull` (reference/model-apis.md §1): a phase (`pulling manifest`, `verifying sha256
/// digest`, …) or a layer's byte progress (`pulling <12 hex>` with `digest`, `total`, `completed`).
public struct PullProgress: Sendable, Equatable {
    /// The line's `status`, as sent. Do not match on the phase texts: they differ between server versions.
    public var status: String
    /// The layer, with its `sha256:` prefix; `nil` on phase lines.
    public var digest: String?
    /// Layer bytes; 0 when absent (the server omits zero values).
    public var total: Int64
    /// Layer bytes downloaded so far; 0 when absent (early in a download).
    public var completed: Int64

    public init(status: String, digest: String? = nil, total: Int64 = 0, completed: Int64 = 0) {
        self.status = status
        self.digest = digest
        self.total = total
        self.completed = completed
    }

    /// The final line of a pull that worked. Only this line means success.
    public var isSuccess: Bool { self.status == "success" }
}
