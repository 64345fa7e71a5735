import Foundation
import HomebaseCore

/// Who may use the relay (Protocol/relay.md §8). Off by default: empty token and key sets admit everyone.
public struct Admission: Sendable, Equatable {
    /// Valid access tokens; empty = no token required.
    public var tokens: Set<String> = []
    /// Allowed public keys; `nil` = any key.
    public var allowedKeys: Set<PublicKey>?

    public init(tokens: Set<String> = [], allowedKeys: Set<PublicKey>? = nil) {
        self.tokens = tokens
        self.allowedKeys = allowedKeys
    }

    /// Whether the upgrade request carries a valid token (`Authorization: Bearer …` or `?token=`).
    func admitsUpgrade(authorization: String?, queryToken: String?) -> Bool {
        guard !self.tokens.isEmpty else { return true }
        if let auth = authorization {
            let parts = auth.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer",
               self.tokens.contains(String(parts[1]).trimmingCharacters(in: .whitespaces)) {
                return true
            }
        }
        if let t = queryToken, self.tokens.contains(t) { return true }
        return false
    }

    func admits(_ key: PublicKey) -> Bool { self.allowedKeys?.contains(key) ?? true }

    /// Reads tokens and keys from files: one entry per line, `#` comments and blank lines ignored.
    /// - Throws: `RelayConfigurationError` with the file and line of a malformed key.
    public static func load(tokenFile: String?, allowlistFile: String?) throws -> Admission {
        var a = Admission()
        if let tokenFile {
            a.tokens = Set(try Self.lines(of: tokenFile).map(\.text))
        }
        if let allowlistFile {
            var keys = Set<PublicKey>()
            for (number, text) in try Self.lines(of: allowlistFile) {
                guard let key = PublicKey(hex: text) else {
                    throw RelayConfigurationError("\(allowlistFile):\(number): not a 64-hex public key")
                }
                keys.insert(key)
            }
            a.allowedKeys = keys
        }
        return a
    }

    private static func lines(of path: String) throws -> [(number: Int, text: String)] {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
        else { throw RelayConfigurationError("cannot read \(path)") }
        return text.split(separator: "\n", omittingEmptySubsequences: false).enumerated().compactMap { i, line in
            let t = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let trimmed = t.trimmingCharacters(in: .whitespaces)
            return trimmed.isEmpty ? nil : (i + 1, trimmed)
        }
    }
}

/// A configuration problem, with a message a person can act on.
public struct RelayConfigurationError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
