import Foundation
import HomebaseCore

/// A small command-line parser for the executables: positional words, `--flag`, `--option VALUE`
/// (or `--option=VALUE`). Unknown options are errors, so a typo never silently changes behaviour.
public struct Arguments: Sendable {
    public private(set) var positionals: [String] = []
    private var options: [String: String] = [:]
    private var flags: Set<String> = []

    /// - Parameters:
    ///   - valueOptions: options that take a value (without `--`).
    ///   - flagOptions: options that take none.
    public init(_ args: [String], valueOptions: Set<String>, flagOptions: Set<String>) throws(UsageError) {
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let a = args[i]
            if onlyPositionals || !a.hasPrefix("--") || a == "-" {
                self.positionals.append(a)
            } else if a == "--" {
                onlyPositionals = true
            } else {
                var name = String(a.dropFirst(2))
                var inline: String?
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                if flagOptions.contains(name) {
                    guard inline == nil else { throw UsageError("--\(name) takes no value") }
                    self.flags.insert(name)
                } else if valueOptions.contains(name) {
                    if let v = inline {
                        self.options[name] = v
                    } else {
                        guard i + 1 < args.count else { throw UsageError("--\(name) needs a value") }
                        i += 1
                        self.options[name] = args[i]
                    }
                } else {
                    throw UsageError("unknown option --\(name)")
                }
            }
            i += 1
        }
    }

    public func value(_ name: String) -> String? { self.options[name] }
    public func flag(_ name: String) -> Bool { self.flags.contains(name) }

    /// The positional at `index`, or a usage error naming what is missing.
    public func positional(_ index: Int, _ what: String) throws(UsageError) -> String {
        guard index < self.positionals.count else { throw UsageError("missing \(what)") }
        return self.positionals[index]
    }

    /// Fails if there are more positionals than `count`.
    public func expectPositionals(atMost count: Int) throws(UsageError) {
        guard self.positionals.count <= count else {
            throw UsageError("unexpected argument '\(self.positionals[count])'")
        }
    }
}

/// The user made a mistake on the command line: exit 64 with this message.
public struct UsageError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A failure to report as one line on stderr with exit status 1.
public struct CLIError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Exit handling shared by the executables: one line on stderr, status 0 / 1 / 64.
public enum CLI {
    public static func printError(_ tool: String, _ message: String) {
        FileHandle.standardError.write(Data("\(tool): \(message)\n".utf8))
    }

    /// A `TOOL: warning: …` line on stderr: the command still did what it was asked, but it cannot work yet.
    public static func warn(_ message: String) {
        let tool = (CommandLine.arguments.first.map { ($0 as NSString).lastPathComponent }) ?? "homebase"
        FileHandle.standardError.write(Data("\(tool): warning: \(message)\n".utf8))
    }

    /// Runs `body`, mapping errors to the exit codes of design.md §D (1 failure, 64 usage).
    public static func main(tool: String, _ body: () async throws -> Void) async -> Never {
        do {
            try await body()
            exit(0)
        } catch let e as UsageError {
            Self.printError(tool, e.description)
            FileHandle.standardError.write(Data("Run '\(tool) --help' for usage.\n".utf8))
            exit(64)
        } catch {
            Self.printError(tool, "\(error)")
            exit(1)
        }
    }

    /// A ws:// or wss:// relay URL (`--relay`, shared by `homebase` and the devices).
    public static func relayURL(_ text: String?) throws(UsageError) -> String {
        guard let text else { throw UsageError("init needs --relay URL") }
        guard text.hasPrefix("ws://") || text.hasPrefix("wss://"), RelayURL(text) != nil else { throw UsageError("'\(text)' is not a ws:// or wss:// URL") }
        return text
    }

    /// Prints a JSON value (sorted keys, one object) on stdout.
    public static func printJSON(_ object: Any) {
        let options: JSONSerialization.WritingOptions = [.sortedKeys, .withoutEscapingSlashes]
        if let data = try? JSONSerialization.data(withJSONObject: object, options: options) {
            print(String(decoding: data, as: UTF8.self))
        }
    }
}
