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
        // Split at the first space by Unicode scalar, not `Character`: a token that begins with a combining
        // mark joins the space before it into one `Character`, and a split by `Character` would not see it.
        if let auth = authorization, let space = auth.unicodeScalars.firstIndex(of: " "),
           String(auth.unicodeScalars[..<space]).lowercased() == "bearer",
           self.tokens.contains(ConfigLines.trimmed(auth.unicodeScalars[auth.unicodeScalars.index(after: space)...]))
        {
            return true
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
            a.tokens = Set(ConfigLines.entries(of: tokens).map(\.text))
        }
        if let allowlist {
            var keys = Set<PublicKey>()
            for (number, text) in ConfigLines.entries(of: allowlist) {
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
}

/// A configuration problem, with a message a person can act on.
public struct RelayConfigurationError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
