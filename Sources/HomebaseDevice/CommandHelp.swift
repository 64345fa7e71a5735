import HomebaseCore
import HomebaseNode
import HomebaseRouter

/// One subcommand's help, as data: the usage line and one sentence.
public struct CommandHelp: Sendable, Equatable {
    public var usage: String
    public var abstract: String

    public init(_ usage: String, _ abstract: String) {
        self.usage = usage
        self.abstract = abstract
    }

    /// The whole `--help` text of a tool: a summary, the commands aligned, then the common options.
    public static func render(tool: String, summary: String, commands: [CommandHelp], notes: [String]) -> String {
        let width = min(48, commands.map(\.usage.count).max() ?? 0)
        var lines = ["\(tool): \(summary)", "", "Usage:"]
        for c in commands {
            let pad = String(repeating: " ", count: max(1, width - c.usage.count + 2))
            lines.append("  \(tool) \(c.usage)\(pad)\(c.abstract)")
        }
        lines.append("")
        lines.append("Options for every command:")
        lines.append("  --state DIR   where the device keeps its state (default $HOMEBASE_STATE/\(tool), else")
        lines.append("                $XDG_DATA_HOME/homebase/\(tool), else ~/.local/share/homebase/\(tool))")
        lines.append("  --help        show this help")
        if !notes.isEmpty {
            lines.append("")
            lines.append(contentsOf: notes)
        }
        return lines.joined(separator: "\n")
    }
}

/// Parsing helpers shared by the `handset` and `guest` command lines.
public enum DeviceCommandLine {
    /// `--watchdog-ms ACCEPT,FIRST,STALL` (or `HOMEBASE_WATCHDOG_MS`): a shortened ladder for integration tests.
    public static func watchdogs(_ text: String) throws(UsageError) -> InferenceClientStateMachine.Watchdogs {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { UInt64($0) }
        guard parts.count == 3, let a = parts[0], let f = parts[1], let s = parts[2], a > 0, f > 0, s > 0 else {
            throw UsageError("--watchdog-ms needs three positive millisecond values: ACCEPT,FIRST,STALL")
        }
        return InferenceClientStateMachine.Watchdogs(acceptMs: a, firstOutputMs: f, stallMs: s)
    }

    /// A 64-hex public key argument.
    public static func publicKey(_ text: String, _ what: String) throws(UsageError) -> PublicKey {
        guard let key = PublicKey(hex: text) else { throw UsageError("\(what) must be 64 hex characters") }
        return key
    }

    /// `openai`, `claude` (or `anthropic`).
    public static func cloud(_ text: String) throws(UsageError) -> CloudProvider {
        guard let provider = CloudProvider(argument: text) else {
            throw UsageError("unknown provider '\(text)'; use openai or claude")
        }
        return provider
    }

    /// A ws:// or wss:// relay URL.
    public static func relayURL(_ text: String?) throws(UsageError) -> String { try CLI.relayURL(text) }

    /// An http:// or https:// base URL.
    public static func httpURL(_ text: String) throws(UsageError) -> String {
        guard text.hasPrefix("http://") || text.hasPrefix("https://") else {
            throw UsageError("'\(text)' is not an http:// or https:// URL")
        }
        return text
    }

    /// Takes `--state DIR` and `--help` / `-h` out of `args` (they may appear anywhere before `--`).
    public static func globals(_ args: [String]) throws(UsageError) -> (state: String?, help: Bool, rest: [String]) {
        var state: String?
        var help = false
        var rest: [String] = []
        var i = 0
        var passthrough = false
        while i < args.count {
            let a = args[i]
            if passthrough {
                rest.append(a)
            } else if a == "--" {
                passthrough = true
                rest.append(a)
            } else if a == "--help" || a == "-h" {
                help = true
            } else if a == "--state" {
                guard i + 1 < args.count else { throw UsageError("--state needs a value") }
                state = args[i + 1]
                i += 1
            } else if a.hasPrefix("--state=") {
                state = String(a.dropFirst("--state=".count))
            } else {
                rest.append(a)
            }
            i += 1
        }
        return (state, help, rest)
    }

    /// One subcommand's words and options.
    public struct Spec: Sendable {
        public var words: [String]
        public var values: Set<String>
        public var flags: Set<String>
        public init(_ words: [String], values: Set<String> = [], flags: Set<String> = []) {
            self.words = words
            self.values = values
            self.flags = flags
        }
    }

    /// The longest spec whose words start `args`, and the rest of `args` parsed with its options.
    public static func match(_ args: [String], _ specs: [Spec]) throws(UsageError) -> (Spec, Arguments) {
        guard let first = args.first else { throw UsageError("missing command") }
        let candidates = specs.filter { $0.words.count <= args.count && Array(args.prefix($0.words.count)) == $0.words }
        guard let spec = candidates.max(by: { $0.words.count < $1.words.count }) else {
            let known = Set(specs.map { $0.words[0] })
            if known.contains(first), args.count > 1 {
                throw UsageError("unknown \(first) command '\(args[1])'")
            }
            throw UsageError(known.contains(first) ? "\(first) needs a subcommand" : "unknown command '\(first)'")
        }
        let arguments = try Arguments(Array(args.dropFirst(spec.words.count)), valueOptions: spec.values,
                                      flagOptions: spec.flags)
        return (spec, arguments)
    }
}
