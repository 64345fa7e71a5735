import Foundation

/// Where a tool keeps its state: `--state DIR`, else `$HOMEBASE_STATE/<tool>`, else `$XDG_DATA_HOME/homebase/<tool>`,
/// else `~/.local/share/homebase/<tool>` (design.md §D). The directory is created 0700 and the database 0600.
///
/// Each tool keeps its own identity (issue 39): `$HOMEBASE_STATE` is a parent folder with one subfolder per tool,
/// and a state folder records which tool made it (`tool` file), so `--state DIR` naming another tool's folder is
/// refused with a line saying so instead of one tool taking over the other's key.
public struct StateDirectory: Sendable {
    public let path: String
    public let tool: String
    /// `$HOMEBASE_STATE` when the path came from it (for the hint about state kept there before issue 39).
    let sharedParent: String?

    public init(explicit: String?, tool: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.tool = tool
        let shared = environment["HOMEBASE_STATE"].flatMap { $0.isEmpty ? nil : $0 }
        self.sharedParent = (explicit ?? "").isEmpty ? shared.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 } : nil
        if let e = explicit, !e.isEmpty {
            self.path = e
        } else if let parent = self.sharedParent {
            self.path = parent + "/" + tool
        } else if let x = environment["XDG_DATA_HOME"], !x.isEmpty {
            self.path = x + "/homebase/" + tool
        } else {
            self.path = (environment["HOME"] ?? NSHomeDirectory()) + "/.local/share/homebase/" + tool
        }
    }

    public var databasePath: String { self.path + "/state.db" }

    /// The file naming the tool whose state this is.
    public var ownerPath: String { self.path + "/tool" }

    public var exists: Bool { FileManager.default.fileExists(atPath: self.databasePath) }

    /// The tool that made this folder, when it says (folders from before issue 39 do not).
    public var owner: String? {
        guard let data = FileManager.default.contents(atPath: self.ownerPath) else { return nil }
        let name = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return name.isEmpty ? nil : name
    }

    /// Fails when the folder holds another tool's state.
    public func requireOwnedByTool() throws {
        if let owner = self.owner, owner != self.tool {
            throw CLIError("\(self.path) holds the state of '\(owner)', not of '\(self.tool)'; "
                           + "give each tool its own --state DIR (or unset HOMEBASE_STATE)")
        }
    }

    /// Creates the directory (0700) if needed and records the tool; refuses another tool's folder.
    public func create() throws {
        try self.requireOwnedByTool()
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        if self.owner == nil {
            guard FileManager.default.createFile(atPath: self.ownerPath, contents: Data((self.tool + "\n").utf8),
                                                 attributes: [.posixPermissions: 0o600]) else {
                throw CLIError("cannot write \(self.ownerPath); check the folder's permissions")
            }
        }
    }

    /// Fails with a one-line hint when the tool was never initialised here, or the folder is another tool's.
    public func requireInitialized(tool: String) throws {
        try self.requireOwnedByTool()
        guard self.exists else {
            if let parent = self.sharedParent, FileManager.default.fileExists(atPath: parent + "/state.db") {
                // $HOMEBASE_STATE held one tool's state.db directly before each tool got its own subfolder.
                throw CLIError("no state in \(self.path), but \(parent)/state.db is from before each tool had its "
                               + "own folder; if it is this \(tool)'s, move it: mkdir -p \(self.path) && mv "
                               + "\(parent)/state.db* \(self.path)/")
            }
            throw CLIError("no state in \(self.path); run '\(tool) init --relay URL' first (or pass --state DIR)")
        }
    }
}
