import Foundation

/// Parses `ollama-emulator`'s arguments (design.md §D, command-line contract).
public enum EmulatorCommandLine {
    /// The result of parsing: run with a configuration, or print help.
    public enum Command: Sendable {
        case run(EmulatorConfiguration)
        case help
    }

    /// A usage mistake; the executable prints it and exits 64.
    public struct UsageError: Error, CustomStringConvertible {
        public let description: String
    }

    public static let usage = """
        USAGE: ollama-emulator [--listen HOST:PORT] [--models a,b] [--loaded a,b] [--tokens-per-s N]
                               [--first-token-ms N] [--answer-tokens MIN-MAX] [--fault SPEC] [--version V]
                               [--legacy-chunks] [--cloud MODE] [--parallel N] [--reasoning-tokens N]
                               [--context-length N] [--pull-verify-ms N]

        A stand-in for Ollama's HTTP API (native /api/* and OpenAI-compatible /v1/*) with deterministic
        answers, a tunable token rate and fault injection.

        OPTIONS:
          --listen HOST:PORT    Address to serve on. (default: 127.0.0.1:11434)
          --models a,b          Installed models. (default: qwen2.5:7b,llama3.2:3b,nomic-embed-text:latest)
                                A `*-cloud` tag (gpt-oss:120b-cloud) is a cloud stub; qwen3, deepseek-r1,
                                gpt-oss and magistral models think before they answer.
          --loaded a,b          Models loaded (pinned) at start. (default: none)
          --tokens-per-s N      Generation speed. (default: 200)
          --first-token-ms N    Delay before the first token of every answer. (default: 0)
          --answer-tokens MIN-MAX
                                Answer length in tokens, picked per prompt (N alone: exactly N).
                                (default: 12-48)
          --fault SPEC          Fault for every chat request: slow-load=MS, stall-after=N, http-500,
                                disconnect-after=N, error-after=N, unknown-model (join several with ';').
          --cloud MODE          What cloud stubs' forwarded requests get: online (answers), offline
                                (502 dial tcp), disabled (403). (default: offline)
          --parallel N          Requests one model serves at once (OLLAMA_NUM_PARALLEL); the rest wait
                                silently in order. (default: no limit)
          --reasoning-tokens N  Tokens a thinking model reasons before answering. (default: 24)
          --context-length N    Context served (OLLAMA_CONTEXT_LENGTH), shown by /api/ps. (default: 4096)
          --pull-verify-ms N    Silence after "verifying sha256 digest" in /api/pull. (default: 0)
          --version V           Version reported by /api/version. (default: 0.32.6)
          --legacy-chunks       Stream /v1 chunks as Ollama <= 0.32.5 did.
          -h, --help            Show this help.

        Per request, faults also come from an X-Emulator-Fault header or a [[fault:SPEC]] marker in the
        last user message.
        """

    public static func parse(_ arguments: [String]) throws(UsageError) -> Command {
        var config = EmulatorConfiguration()
        var i = 0
        func value(_ flag: String) throws(UsageError) -> String {
            i += 1
            guard i < arguments.count else { throw UsageError(description: "\(flag) needs a value") }
            return arguments[i]
        }
        func list(_ text: String) -> [String] {
            text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        while i < arguments.count {
            let flag = arguments[i]
            switch flag {
            case "-h", "--help":
                return .help
            case "--listen":
                let text = try value(flag)
                guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
                    throw UsageError(description: "--listen expects HOST:PORT, got '\(text)'")
                }
                config.host = String(text[..<colon])
                config.port = port
            case "--models":
                config.models = list(try value(flag))
            case "--loaded":
                config.loaded = list(try value(flag))
            case "--tokens-per-s":
                let text = try value(flag)
                guard let n = Double(text), n > 0 else {
                    throw UsageError(description: "--tokens-per-s expects a positive number, got '\(text)'")
                }
                config.tokensPerSecond = n
            case "--first-token-ms":
                let text = try value(flag)
                guard let n = Int(text), n >= 0 else {
                    throw UsageError(description: "--first-token-ms expects milliseconds, got '\(text)'")
                }
                config.firstTokenMs = n
            case "--answer-tokens":
                let text = try value(flag)
                let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
                let low = Int(parts[0])
                let high = parts.count == 2 ? Int(parts[1]) : low
                guard let low, let high, low >= 1, high >= low, high <= 100_000 else {
                    throw UsageError(description: "--answer-tokens expects MIN-MAX tokens (1-100000), got '\(text)'")
                }
                config.answerTokens = low...high
            case "--fault":
                do {
                    config.fault = try EmulatorFault(parsing: try value(flag))
                } catch let error as EmulatorFault.ParseError {
                    throw UsageError(description: error.description)
                } catch let error as UsageError {
                    throw error
                } catch {
                    throw UsageError(description: "\(error)")
                }
            case "--version":
                config.version = try value(flag)
            case "--legacy-chunks":
                config.legacyChunks = true
            case "--cloud":
                let text = try value(flag)
                guard let mode = EmulatorConfiguration.CloudMode(rawValue: text) else {
                    throw UsageError(description: "--cloud expects online, offline or disabled, got '\(text)'")
                }
                config.cloud = mode
            case "--parallel", "--reasoning-tokens", "--context-length", "--pull-verify-ms":
                let text = try value(flag)
                let minimum = flag == "--parallel" || flag == "--context-length" ? 1 : 0
                guard let n = Int(text), n >= minimum, n <= 10_000_000 else {
                    throw UsageError(description: "\(flag) expects a whole number of at least \(minimum), got '\(text)'")
                }
                switch flag {
                case "--parallel": config.parallel = n
                case "--reasoning-tokens": config.reasoningTokens = n
                case "--context-length": config.contextLength = n
                default: config.pullVerifyMs = n
                }
            default:
                throw UsageError(description: "unknown option '\(flag)' (see --help)")
            }
            i += 1
        }
        for name in config.loaded where !config.models.map(EmulatedModel.normalize).contains(EmulatedModel.normalize(name)) {
            throw UsageError(description: "--loaded model '\(name)' is not in --models")
        }
        return .run(config)
    }
}
