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
    package func admitsUpgrade(authorization: String?, queryToken: String?) -> Bool {
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

    package func admits(_ key: PublicKey) -> Bool { self.allowedKeys?.contains(key) ?? true }

    /// Reads tokens and keys from files: one entry per line, `#` comments and blank lines ignored.
    /// - Throws: `RelayConfigurationError` with the file and line of a malformed key.
    public static func load(tokenFile: String?, allowlistFile: String?) throws -> Admission {
        try Self.parse(tokens: tokenFile.map(Self.text(of:)), allowlist: allowlistFile.map(Self.text(of:)),
                       allowlistName: allowlistFile ?? "")
    }

    /// `load` of the files' texts; `allowlistName` names the allowlist in errors. Pure, for the fuzz harness.
    package static func parse(tokens: String?, allowlist: String?, allowlistName: String) throws -> Admission {
        var a = Admission()
        if let tokens {
            a.tokens = Set(Self.lines(of: tokens).map(\.text))
        }
        if let allowlist {
            var keys = Set<PublicKey>()
            for (number, text) in Self.lines(of: allowlist) {
                guard let key = PublicKey(hex: text) else {
                    throw RelayConfigurationError("\(allowlistName):\(number): not a 64-hex public key")
                }
                keys.insert(key)
            }
            a.allowedKeys = keys
        }
        return a
    }

    private static func text(of path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
        else { throw RelayConfigurationError("cannot read \(path)") }
        return text
    }

    /// Lines end at any line break, CRLF included (one `Character` to a `String`, so not a `"\n"`).
    private static func lines(of text: String) -> [(number: Int, text: String)] {
        text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated().compactMap { i, line in
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
