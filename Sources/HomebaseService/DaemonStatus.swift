import Foundation
import HomebaseCore

/// What the running daemon reports about itself, written to the state database at start and at each change of
/// its relay link or runtime, so `homebase status` and `homebase models` answer whether or not they can reach it. Whether a daemon
/// runs at all is its lock's to say (`DaemonLock`), not this report's age: `HomebaseState.liveDaemonStatus()`.
public struct DaemonStatus: Codable, Equatable, Sendable {
    /// The runtime's models as the daemon last saw them (the same shape adverts are built from).
    public typealias Model = RuntimeModelInfo

    public var pid: Int32
    public var updatedAtMs: UInt64
    public var relayURL: String
    public var relayConnected: Bool
    /// Why the relay cannot be used (`RelayConnectProblem`), from the last attempt's real result; nil while
    /// connected or before the first attempt ended.
    public var relayProblem: String?
    public var runtimeEndpoint: String?
    public var runtimeVerified: Bool
    public var runtimeAvailable: Bool
    public var runtimeVersion: String?
    public var runtimeError: String?
    public var models: [Model]
    /// Where the daemon serves its status page (`run --ui`), e.g. `http://127.0.0.1:8787/`; `status --json`
    /// reads `/api/status` there. Nil without `--ui` (and in reports of daemons before it existed).
    public var uiURL: String?
    /// The page's `--ui-token`, so the CLI can read it; this database is the owner's alone (mode 0600) and
    /// already holds the device key.
    public var uiToken: String?
    /// `ollama` or `openai-compatible` (absent in reports of daemons before it existed: Ollama).
    public var runtimeKind: String?
    /// `RuntimeStatus.knownParallelism`: requests the runtime serves at once, when it says.
    public var runtimeParallelism: Int?

    public init(pid: Int32, updatedAtMs: UInt64, relayURL: String, relayConnected: Bool, runtime: RuntimeStatus,
                uiURL: String? = nil, uiToken: String? = nil, relayProblem: String? = nil) {
        self.pid = pid
        self.relayProblem = relayProblem
        self.updatedAtMs = updatedAtMs
        self.relayURL = relayURL
        self.relayConnected = relayConnected
        self.runtimeEndpoint = runtime.endpoint
        self.runtimeVerified = runtime.verified
        self.runtimeAvailable = runtime.available
        self.runtimeVersion = runtime.version
        self.runtimeError = runtime.lastError
        self.models = runtime.models
        self.uiURL = uiURL
        self.uiToken = uiToken
        self.runtimeKind = runtime.kind.rawValue
        self.runtimeParallelism = runtime.knownParallelism
    }
}

extension HomebaseState {
    static let daemonStatusKey = "daemon.status"
    static let verifiedEndpointKey = "runtime.verified_endpoint"

    /// The daemon's last report (nil if it never ran).
    public func daemonStatus() -> DaemonStatus? {
        guard let data = try? self.keyValues.data(Self.daemonStatusKey) else { return nil }
        return try? JSONDecoder().decode(DaemonStatus.self, from: Data(data))
    }

    /// Where the daemon's lock lives: beside the state database (nil for a database in memory).
    public var daemonLockPath: String? {
        let path = self.database.path
        guard path != ":memory:" else { return nil }
        let directory = (path as NSString).deletingLastPathComponent
        return (directory.isEmpty ? "." : directory) + "/" + DaemonLock.fileName
    }

    /// Whether a daemon runs on this state now (it holds the lock).
    public var daemonIsRunning: Bool { self.daemonLockPath.map(DaemonLock.isHeld(path:)) ?? false }

    /// The running daemon's report; nil when no daemon runs (a report left by one that ended is stale).
    public func liveDaemonStatus() -> DaemonStatus? { self.daemonIsRunning ? self.daemonStatus() : nil }

    /// Written by the daemon only; not a state change the daemon itself must reload (no version bump).
    public func setDaemonStatus(_ status: DaemonStatus) throws {
        try self.keyValues.setData(Array(try JSONEncoder().encode(status)), forKey: Self.daemonStatusKey)
    }

    /// The endpoint that passed test-before-persist (design.md §R4); a later failed probe does not clear it.
    public func verifiedEndpoint() -> String? { try? self.keyValues.string(Self.verifiedEndpointKey) }

    public func setVerifiedEndpoint(_ url: String?) throws {
        if let url { try self.keyValues.setString(url, forKey: Self.verifiedEndpointKey) }
        else { _ = try self.keyValues.remove(Self.verifiedEndpointKey) }
    }
}
