import Foundation
import HomebaseCore

/// What the running daemon reports about itself, written to the state database within 250 ms of a change and
/// every 2 s, so `homebase status` and `homebase models` answer whether or not they can reach it.
public struct DaemonStatus: Codable, Equatable, Sendable {
    /// The runtime's models as the daemon last saw them (the same shape adverts are built from).
    public typealias Model = RuntimeModelInfo

    public var pid: Int32
    public var updatedAtMs: UInt64
    public var relayURL: String
    public var relayConnected: Bool
    public var runtimeEndpoint: String?
    public var runtimeVerified: Bool
    public var runtimeAvailable: Bool
    public var runtimeVersion: String?
    public var runtimeError: String?
    public var models: [Model]

    /// A report older than this means the daemon is not running (it writes every 2 s).
    public static let staleAfterMs: UInt64 = 10_000

    public init(pid: Int32, updatedAtMs: UInt64, relayURL: String, relayConnected: Bool, runtime: RuntimeStatus) {
        self.pid = pid
        self.updatedAtMs = updatedAtMs
        self.relayURL = relayURL
        self.relayConnected = relayConnected
        self.runtimeEndpoint = runtime.endpoint
        self.runtimeVerified = runtime.verified
        self.runtimeAvailable = runtime.available
        self.runtimeVersion = runtime.version
        self.runtimeError = runtime.lastError
        self.models = runtime.models
    }

    public func isFresh(nowMs: UInt64) -> Bool { nowMs < self.updatedAtMs + Self.staleAfterMs }
}

extension HomebaseState {
    static let daemonStatusKey = "daemon.status"
    static let verifiedEndpointKey = "runtime.verified_endpoint"

    /// The daemon's last report (nil if it never ran).
    public func daemonStatus() -> DaemonStatus? {
        guard let data = try? self.keyValues.data(Self.daemonStatusKey) else { return nil }
        return try? JSONDecoder().decode(DaemonStatus.self, from: Data(data))
    }

    /// Written by the daemon only; not a state change the daemon itself must reload (no version bump).
    public func setDaemonStatus(_ status: DaemonStatus) throws {
        try self.keyValues.setData(Array(try JSONEncoder().encode(status)), forKey: Self.daemonStatusKey)
    }

    /// The endpoint that passed test-before-persist (seed 000 §4); a later failed probe does not clear it.
    public func verifiedEndpoint() -> String? { try? self.keyValues.string(Self.verifiedEndpointKey) }

    public func setVerifiedEndpoint(_ url: String?) throws {
        if let url { try self.keyValues.setString(url, forKey: Self.verifiedEndpointKey) }
        else { _ = try self.keyValues.remove(Self.verifiedEndpointKey) }
    }
}
