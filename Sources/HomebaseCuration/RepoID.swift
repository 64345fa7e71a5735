/// Repo ids (design.md §C7): the custom-repo door checks shape only.
public enum RepoID {
    /// A plausible `owner/name`: exactly two non-empty parts of id-safe characters (letters, digits, `-`, `_`,
    /// `.`), neither starting with `.` nor `-`, at most 96 characters each (the Hub's limit). No network call
    /// confirms the repo exists; a wrong id fails at download time with a clear error.
    public static func isValid(_ id: String) -> Bool {
        let parts = id.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return false }
        return parts.allSatisfy { part in
            guard let first = part.first, (1...96).contains(part.count), first != ".", first != "-" else {
                return false
            }
            return part.allSatisfy { c in
                c.isASCII && (c.isLetter || c.isNumber || c == "-" || c == "_" || c == ".")
            } && !part.contains("..")
        }
    }

    /// The Hub cache folder name: `models--ORG--NAME` (reference/model-apis.md §6).
    public static func cacheFolder(_ id: String) -> String {
        "models--" + id.split(separator: "/", omittingEmptySubsequences: false).joined(separator: "--")
    }
}

/// The persisted custom-repo list: validated, de-duplicated, order of addition kept.
public struct CustomRepos: Sendable, Equatable, Codable {
    public private(set) var ids: [String]

    public init(ids: [String] = []) {
        var seen: Set<String> = []
        self.ids = ids.filter { RepoID.isValid($0) && seen.insert($0).inserted }
    }

    public enum AddOutcome: Equatable, Sendable {
        case added
        case alreadyPresent
        case invalid
    }

    /// Adds an id, idempotently. Surrounding whitespace is dropped.
    public mutating func add(_ raw: String) -> AddOutcome {
        let id = String(raw.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
        guard RepoID.isValid(id) else { return .invalid }
        guard !self.ids.contains(id) else { return .alreadyPresent }
        self.ids.append(id)
        return .added
    }

    /// Removes an id; whether it was there.
    @discardableResult
    public mutating func remove(_ id: String) -> Bool {
        guard let i = self.ids.firstIndex(of: id) else { return false }
        self.ids.remove(at: i)
        return true
    }

    public func contains(_ id: String) -> Bool { self.ids.contains(id) }
}
