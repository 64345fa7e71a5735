import Foundation

/// Where a tool keeps its state: `--state DIR`, else `$HOMEBASE_STATE`, else `$XDG_DATA_HOME/homebase/<tool>`,
/// else `~/.local/share/homebase/<tool>` (system.md). The directory is created 0700 and the database 0600.
public struct StateDirectory: Sendable {
    public let path: String

    public init(explicit: String?, tool: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let e = explicit, !e.isEmpty {
            self.path = e
        } else if let s = environment["HOMEBASE_STATE"], !s.isEmpty {
            self.path = s
        } else if let x = environment["XDG_DATA_HOME"], !x.isEmpty {
            self.path = x + "/homebase/" + tool
        } else {
            self.path = (environment["HOME"] ?? NSHomeDirectory()) + "/.local/share/homebase/" + tool
        }
    }

    public var databasePath: String { self.path + "/state.db" }

    public var exists: Bool { FileManager.default.fileExists(atPath: self.databasePath) }

    /// Creates the directory (0700) if needed.
    public func create() throws {
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }

    /// Fails with a one-line hint when the tool was never initialised here.
    public func requireInitialized(tool: String) throws {
        guard self.exists else {
            throw CLIError("no state in \(self.path); run '\(tool) init --relay URL' first (or pass --state DIR)")
        }
    }
}
