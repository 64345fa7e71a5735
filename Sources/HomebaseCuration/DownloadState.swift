/// A model's lifecycle (§8).
///
/// ```
///  unsupported        (terminal on this device: the hardware gate said no)
///  absent ──start──▶ downloading(p) ──completed──▶ ready
///    ▲                  │        │                   │
///    │◀──── cancel ─────┘        └── failed ──▶ failed
///    └──────────────────── delete ───────────────────┘
/// ```
public enum DownloadState: Equatable, Sendable {
    case unsupported
    case absent
    case downloading(Double)
    case ready
    case failed(String)

    /// The state's name in `--json` output.
    public var name: String {
        switch self {
        case .unsupported: return "unsupported"
        case .absent: return "absent"
        case .downloading: return "downloading"
        case .ready: return "ready"
        case .failed: return "failed"
        }
    }
}

/// Every model's `DownloadState`, with the two guards that were bugs lived, not imagined:
///
/// - A late progress tick never stomps the finish: progress applies only to the attempt that is still
///   `downloading` (a straggling 1.0 after completion would leave a bar stuck at 100 % forever).
/// - Cancel wins: it returns the model to `absent` and retires the attempt, so neither that attempt's completion
///   nor its error can resurrect it to `ready` or demote it to `failed`; the caller removes the partial files.
///
/// "Ready" is the persisted marker list, set only after the load check passed, never a directory scan: the weights
/// live in the Hub's cache, which the app does not own. Every event names its attempt (from `start`), so events
/// of an attempt that is no longer current are ignored. Pure: the shell persists `readyIDs` and does the I/O the
/// returned actions name.
public struct DownloadStateMachine: Sendable, Equatable {
    /// Whether this device can run downloaded models at all (the simulator's `--device-capable`).
    public let isCapable: Bool
    /// The persisted ready markers.
    public private(set) var readyIDs: Set<String>
    private var transient: [String: DownloadState] = [:]
    private var attempts: [String: Int] = [:]
    private var nextAttempt = 1

    /// Seeds the states at launch: ready or absent from the markers on a capable device, else unsupported.
    public init(isCapable: Bool, readyIDs: Set<String>) {
        self.isCapable = isCapable
        self.readyIDs = readyIDs
    }

    public func state(_ id: String) -> DownloadState {
        guard self.isCapable else { return .unsupported }
        if let t = self.transient[id] { return t }
        return self.readyIDs.contains(id) ? .ready : .absent
    }

    public enum StartOutcome: Equatable, Sendable {
        /// Go ahead; tag every event of this download with the attempt.
        case begin(attempt: Int)
        case alreadyDownloading
        case alreadyReady
        case unsupported
    }

    /// Starts a download (from `absent` or `failed`).
    public mutating func start(_ id: String) -> StartOutcome {
        switch self.state(id) {
        case .unsupported: return .unsupported
        case .downloading: return .alreadyDownloading
        case .ready: return .alreadyReady
        case .absent, .failed:
            let attempt = self.nextAttempt
            self.nextAttempt += 1
            self.attempts[id] = attempt
            self.transient[id] = .downloading(0)
            return .begin(attempt: attempt)
        }
    }

    /// Applies a progress tick (clamped to 0…1); ignored unless `attempt` is still downloading. Returns whether
    /// it applied.
    @discardableResult
    public mutating func progress(_ id: String, attempt: Int, fraction: Double) -> Bool {
        guard self.isCurrent(id, attempt), case .downloading = self.state(id) else { return false }
        self.transient[id] = .downloading(min(max(fraction.isNaN ? 0 : fraction, 0), 1))
        return true
    }

    /// The download finished and the load check passed: `ready`, and the marker is to be persisted. Ignored
    /// (returns false) when the attempt was cancelled or superseded.
    @discardableResult
    public mutating func completed(_ id: String, attempt: Int) -> Bool {
        guard self.isCurrent(id, attempt), case .downloading = self.state(id) else { return false }
        self.transient[id] = nil
        self.attempts[id] = nil
        self.readyIDs.insert(id)
        return true
    }

    /// The download failed: `failed(message)`. Ignored when the attempt was cancelled or superseded.
    @discardableResult
    public mutating func failed(_ id: String, attempt: Int, message: String) -> Bool {
        guard self.isCurrent(id, attempt), case .downloading = self.state(id) else { return false }
        self.transient[id] = .failed(message)
        self.attempts[id] = nil
        return true
    }

    /// Cancels a download in flight: back to `absent`, the attempt retired. Returns whether one was in flight
    /// (then the caller removes its partial files).
    @discardableResult
    public mutating func cancel(_ id: String) -> Bool {
        guard case .downloading = self.state(id) else { return false }
        self.transient[id] = nil
        self.attempts[id] = nil
        return true
    }

    /// Deletes a model: cancels any download, clears the marker and a failure. The caller removes the cache
    /// folders and evicts the loaded container; all three, or a re-download would be a lie that completes at once
    /// against stale files.
    public mutating func delete(_ id: String) {
        self.transient[id] = nil
        self.attempts[id] = nil
        self.readyIDs.remove(id)
    }

    private func isCurrent(_ id: String, _ attempt: Int) -> Bool {
        self.attempts[id] == attempt
    }
}
