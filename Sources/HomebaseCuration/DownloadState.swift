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

/// A download's persisted record (`models.download.<id>` in the device's state database): the attempt that owns
/// it (its process and that process's attempt number), how far it got, whether a cancel was asked, or why it
/// failed. The record is how processes see each other's downloads: `handset models cancel` and `delete` in another
/// process act on it, and the owner reads it back while it downloads.
public struct DownloadRecord: Codable, Equatable, Sendable {
    /// The owner's process id; 0 in a failure record.
    public var pid: Int32
    /// The owner's attempt number (unique within its process); 0 in a failure record and in records written
    /// before attempts were recorded.
    public var attempt: Int
    public var fraction: Double
    /// A cancel was asked: the owner stops, removes its partial files and the record.
    public var cancel: Bool
    public var failure: String?

    public init(pid: Int32, attempt: Int, fraction: Double = 0, cancel: Bool = false, failure: String? = nil) {
        self.pid = pid
        self.attempt = attempt
        self.fraction = fraction
        self.cancel = cancel
        self.failure = failure
    }

    public static func failed(_ message: String) -> DownloadRecord {
        DownloadRecord(pid: 0, attempt: 0, failure: message)
    }

    enum CodingKeys: String, CodingKey { case pid, attempt, fraction, cancel, failure }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.pid = try c.decode(Int32.self, forKey: .pid)
        self.attempt = try c.decodeIfPresent(Int.self, forKey: .attempt) ?? 0
        self.fraction = try c.decode(Double.self, forKey: .fraction)
        self.cancel = try c.decode(Bool.self, forKey: .cancel)
        self.failure = try c.decodeIfPresent(String.self, forKey: .failure)
    }
}

/// Every model's `DownloadState`, the single owner of download state on a device (§8). The shell feeds it what
/// the state database holds (`observed`) and what its own download does (`progress`, `finished`), and the user's
/// commands (`start`, `cancel`, `delete`); each event returns the `Action`s the shell performs. A shell that
/// observes and applies an event's actions in one transaction of the shared database makes the event atomic
/// across processes: two processes starting the same download at once cannot both pass `absent → downloading`,
/// because the second observes the first's record.
///
/// The rules, each a bug lived, not imagined:
///
/// - Cancel wins: a cancel (a record with the cancel flag, or no record at all after a delete, or a record of
///   another attempt) retires the attempt at once — the state reads `absent` — so neither its completion nor its
///   error can resurrect it to `ready` or demote it to `failed`; its end removes the partial files instead.
/// - Only the owner writes its record: a refused start writes nothing, and an attempt that is no longer current
///   never writes a failure or a ready marker over whoever holds the record now.
/// - A late progress tick never stomps the finish: progress applies only to the attempt still downloading.
///
/// "Ready" is the persisted marker list, set only after the load check passed, never a directory scan: the weights
/// live in the Hub's cache, which the app does not own. Pure: liveness of a process, time, and all I/O come in as
/// parameters or go out as actions.
public struct DownloadStateMachine: Sendable, Equatable {
    /// What the shell does for an event, in order.
    public enum Action: Equatable, Sendable {
        /// Write the model's download record.
        case persistRecord(String, DownloadRecord)
        case removeRecord(String)
        /// Remove the model's `.incomplete` files (a cancelled or dead download; the next attempt starts clean).
        case removePartials(String)
        /// Add the model to the persisted ready markers.
        case persistReady(String)
        case removeReady(String)
        /// Remove the model's cache folders and evict its loaded container (a delete).
        case removeFiles(String)
    }

    /// Whether this device can run downloaded models at all (the simulator's `--device-capable`).
    public private(set) var isCapable: Bool
    /// This process's id, written into the records of the downloads it runs.
    public let pid: Int32
    /// The persisted ready markers, as last observed or changed here.
    public private(set) var readyIDs: Set<String>
    /// A download record as last observed or written, and whether its owner was alive when observed.
    struct Observed: Equatable, Sendable {
        var record: DownloadRecord
        var alive: Bool
    }

    private var records: [String: Observed] = [:]
    /// The attempts this process runs, by model id.
    private var mine: [String: Int] = [:]
    /// When each of this process's attempts last persisted its progress.
    private var persistedAtMs: [String: UInt64] = [:]
    private var nextAttempt = 1

    /// How often a running download writes its progress to its record (other processes show it).
    public static let progressPersistMs: UInt64 = 500

    public init(isCapable: Bool, readyIDs: Set<String>, pid: Int32 = 0) {
        self.isCapable = isCapable
        self.readyIDs = readyIDs
        self.pid = pid
    }

    // MARK: Observations

    /// The device-capable setting as read now.
    public mutating func observed(isCapable: Bool) {
        self.isCapable = isCapable
    }

    /// The persisted ready markers as read now.
    public mutating func observed(readyIDs: Set<String>) {
        self.readyIDs = readyIDs
    }

    /// The model's download record as read now (`nil`: none), and whether its owner process is alive. Our own
    /// record keeps the progress this process knows (the stored copy lags by up to `progressPersistMs`).
    public mutating func observed(_ id: String, record: DownloadRecord?, ownerAlive: Bool) {
        guard var record else {
            self.records[id] = nil
            return
        }
        // Another process wrote it: a fraction outside 0…1 (or NaN) shows as its nearest end.
        record.fraction = Self.clamped(record.fraction)
        if let held = self.records[id]?.record, self.isOurs(record, id), self.isOurs(held, id) {
            record.fraction = max(record.fraction, held.fraction)
        }
        self.records[id] = Observed(record: record, alive: self.isOurs(record, id) || ownerAlive)
    }

    // MARK: Queries

    public func state(_ id: String) -> DownloadState {
        guard self.isCapable else { return .unsupported }
        if let observed = self.records[id] {
            if let failure = observed.record.failure { return .failed(failure) }
            if observed.alive && !observed.record.cancel { return .downloading(observed.record.fraction) }
        }
        return self.readyIDs.contains(id) ? .ready : .absent
    }

    /// Whether `attempt` of this process is still the download of `id`: its record is there, is its own, and
    /// carries no cancel. Polled by the download; false means stop.
    public func isCurrent(_ id: String, attempt: Int) -> Bool {
        guard self.mine[id] == attempt, let record = self.records[id]?.record else { return false }
        return self.isOurs(record, id) && !record.cancel && record.failure == nil
    }

    /// The models with a record (downloading, failed, or being cancelled).
    public var recordedIDs: [String] { self.records.keys.sorted() }

    // MARK: Commands

    public enum StartOutcome: Equatable, Sendable {
        /// Go ahead; tag every event of this download with the attempt.
        case begin(attempt: Int)
        case alreadyDownloading
        case alreadyReady
        case unsupported
    }

    /// Starts a download (from `absent` or `failed`). Observe the record first, in the same transaction the
    /// actions are applied in. A refused start returns no actions: it never writes another attempt's record.
    public mutating func start(_ id: String) -> (StartOutcome, [Action]) {
        switch self.state(id) {
        case .unsupported: return (.unsupported, [])
        case .downloading: return (.alreadyDownloading, [])
        case .ready: return (.alreadyReady, [])
        case .absent, .failed:
            let attempt = self.nextAttempt
            self.nextAttempt += 1
            self.mine[id] = attempt
            self.persistedAtMs[id] = nil
            let record = DownloadRecord(pid: self.pid, attempt: attempt)
            self.records[id] = Observed(record: record, alive: true)
            return (.begin(attempt: attempt), [.persistRecord(id, record)])
        }
    }

    /// A progress tick of this process's `attempt` (clamped to 0…1), at `nowMs`: applied only while the attempt
    /// is current; persisted at most every `progressPersistMs`. Returns whether it applied.
    @discardableResult
    public mutating func progress(_ id: String, attempt: Int, fraction: Double, nowMs: UInt64) -> (Bool, [Action]) {
        guard self.isCurrent(id, attempt: attempt), var record = self.records[id]?.record else { return (false, []) }
        record.fraction = Self.clamped(fraction)
        self.records[id] = Observed(record: record, alive: true)
        if let last = self.persistedAtMs[id], nowMs < last + Self.progressPersistMs { return (true, []) }
        self.persistedAtMs[id] = nowMs
        return (true, [.persistRecord(id, record)])
    }

    /// How this process's download ended, as its code saw it.
    public enum Ending: Equatable, Sendable {
        /// The files are whole and the load check passed.
        case loaded
        case failed(String)
        /// It stopped on a cancel (its own task's, or a poll of `isCurrent` that said stop).
        case cancelled
    }

    /// The end of this process's `attempt`. Observe the record first, in the same transaction the actions are
    /// applied in: a cancel or delete that landed meanwhile wins over `loaded` and `failed`. Returns the state the
    /// model ends in.
    public mutating func finished(_ id: String, attempt: Int, _ ending: Ending) -> (DownloadState, [Action]) {
        let current = self.isCurrent(id, attempt: attempt)
        let ours = self.records[id].map { $0.record.pid == self.pid && $0.record.attempt == attempt } ?? false
        if self.mine[id] == attempt {
            self.mine[id] = nil
            self.persistedAtMs[id] = nil
        }
        switch (current, ending) {
        case (true, .loaded):
            self.records[id] = nil
            self.readyIDs.insert(id)
            return (self.state(id), [.persistReady(id), .removeRecord(id)])
        case (true, .failed(let message)):
            let record = DownloadRecord.failed(message)
            self.records[id] = Observed(record: record, alive: false)
            return (self.state(id), [.persistRecord(id, record)])
        default:
            // Cancelled, deleted or superseded: back to absent, partials gone. Our own record (a cancel flag) goes
            // too; another attempt's record and its partial files are left alone.
            if ours {
                self.records[id] = nil
                return (self.state(id), [.removeRecord(id), .removePartials(id)])
            }
            if case .downloading = self.state(id) { return (self.state(id), []) }
            return (self.state(id), [.removePartials(id)])
        }
    }

    public enum CancelOutcome: Equatable, Sendable {
        /// A running download (here or in another process) was told to stop; it removes its partial files.
        case requested
        /// Its process had died: the partial files and the record are removed now.
        case cleanedUp
        case notDownloading
    }

    /// Cancels the download of `id`, wherever it runs. Observe the record first, in the same transaction. The state
    /// reads `absent` at once; the owner sees the flag at its next poll.
    public mutating func cancel(_ id: String) -> (CancelOutcome, [Action]) {
        guard let observed = self.records[id], observed.record.failure == nil, !observed.record.cancel else {
            return (.notDownloading, [])
        }
        guard observed.alive else {
            self.records[id] = nil
            return (.cleanedUp, [.removePartials(id), .removeRecord(id)])
        }
        var cancelled = observed.record
        cancelled.cancel = true
        self.records[id] = Observed(record: cancelled, alive: true)
        return (.requested, [.persistRecord(id, cancelled)])
    }

    /// Deletes a model: any download stops (its record goes, which its owner reads as a cancel), the marker and a
    /// failure are cleared, and the files go — all of them, or a re-download would be a lie that completes at
    /// once against stale files.
    public mutating func delete(_ id: String) -> [Action] {
        self.records[id] = nil
        self.readyIDs.remove(id)
        return [.removeRecord(id), .removeReady(id), .removeFiles(id)]
    }

    static func clamped(_ fraction: Double) -> Double {
        min(max(fraction.isNaN ? 0 : fraction, 0), 1)
    }

    private func isOurs(_ record: DownloadRecord, _ id: String) -> Bool {
        record.pid == self.pid && record.attempt != 0 && record.attempt == self.mine[id]
    }
}
