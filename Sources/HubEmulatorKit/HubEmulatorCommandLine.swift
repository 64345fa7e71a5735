import Foundation

/// Parses `hub-emulator`'s arguments.
public enum HubEmulatorCommandLine {
    public enum Command: Sendable {
        case run(HubEmulatorConfiguration)
        case help
    }

    public struct UsageError: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    public static let usage = """
        USAGE: hub-emulator --models FILE [--listen HOST:PORT] [--weight-bytes N] [--page-size N] [--fault SPEC]...

        A stand-in for the Hugging Face Hub's model API and file downloads (reference/model-apis.md §6,
        Fixtures/hub/README.md): /api/models with author/pipeline_tag/search/filter, repeated expand= and Link
        pagination; /api/models/ORG/NAME[/revision/REV]; /api/models/ORG/NAME/tree/REV[?recursive=1] (only the top
        level without it, as on the Hub); ORG/NAME/resolve/REV/FILE
        with 302 to the LFS store, X-Linked-Etag/X-Linked-Size/X-Repo-Commit, Range and the X-Error-Code errors.
        Each repo's files are generated deterministically.

        OPTIONS:
          --models FILE         The fixture: a JSON array of listing objects (Fixtures/hub/models.json).
          --listen HOST:PORT    Address to serve on. (default: 127.0.0.1:8090)
          --weight-bytes N      Size of each repo's model.safetensors. (default: 262144)
          --page-size N         Page size and cap on limit=. (default: 1000)
          --fault SPEC          listing-500, listing-garbage, listing-truncated, drop-after=N, corrupt=ID|*,
                                gated=ID, slow=BYTES_PER_S, nested=ID|* (weights in a subfolder)
                                (repeatable, or joined by ';').
          -h, --help            Show this help.
        """

    public static func parse(_ arguments: [String], readFile: (String) throws -> [UInt8] = {
        Array(try Data(contentsOf: URL(fileURLWithPath: $0)))
    }) throws(UsageError) -> Command {
        var config = HubEmulatorConfiguration()
        var modelsPath: String?
        var i = 0
        func value(_ flag: String) throws(UsageError) -> String {
            i += 1
            guard i < arguments.count else { throw UsageError(description: "\(flag) needs a value") }
            return arguments[i]
        }
        func number(_ flag: String) throws(UsageError) -> Int {
            let text = try value(flag)
            guard let n = Int(text), n > 0 else { throw UsageError(description: "\(flag) needs a positive number") }
            return n
        }
        while i < arguments.count {
            let flag = arguments[i]
            switch flag {
            case "-h", "--help": return .help
            case "--listen":
                let text = try value(flag)
                guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
                    throw UsageError(description: "--listen needs HOST:PORT")
                }
                config.host = String(text[..<colon])
                config.port = port
            case "--models": modelsPath = try value(flag)
            case "--weight-bytes": config.weightBytes = try number(flag)
            case "--page-size": config.pageSize = try number(flag)
            case "--fault": try config.faults.add(try value(flag))
            default: throw UsageError(description: "unknown option '\(flag)'")
            }
            i += 1
        }
        guard let modelsPath else { throw UsageError(description: "--models FILE is required") }
        let bytes: [UInt8]
        do { bytes = try readFile(modelsPath) } catch {
            throw UsageError(description: "cannot read \(modelsPath): \(error.localizedDescription)")
        }
        config.models = try HubEmulatorConfiguration.loadModels(bytes)
        return .run(config)
    }
}
