import HomebaseCore

/// Faults the Hub emulator injects, each by a command-line flag (`--fault SPEC`).
public struct HubFaults: Sendable, Equatable {
    /// How `/api/models` misbehaves.
    public enum Listing: String, Sendable, Equatable {
        /// `500` with the Hub's error body.
        case http500 = "listing-500"
        /// `200` with a body that is not JSON.
        case garbage = "listing-garbage"
        /// `200`, the full length announced, half the page sent, then the connection dropped.
        case truncated = "listing-truncated"
    }

    public var listing: Listing?
    /// Drops a weight file's first full (non-`Range`) download after this many bytes; the resumed request is
    /// served, so a client that resumes with `Range` finishes.
    public var dropAfter: Int?
    /// Repos (or `*`) whose weights are served with a flipped byte: the sha256 does not match the announced one.
    public var corrupt: Set<String> = []
    /// Repos answered `401 GatedRepo`.
    public var gated: Set<String> = []
    /// Throttles weight downloads to about this many bytes per second.
    public var slowBytesPerSecond: Int?
    /// Repos (or `*`) whose weights live in a subfolder (`weights/model.safetensors`), which a tree listed without
    /// `recursive=1` does not show (as on the Hub).
    public var nested: Set<String> = []

    public init() {}

    /// Parses one `--fault` value: `listing-500`, `listing-garbage`, `listing-truncated`, `drop-after=N`,
    /// `corrupt=ID|*`, `gated=ID`, `slow=BYTES_PER_S`, `nested=ID|*`; several joined by `;`.
    public mutating func add(_ spec: String) throws(HubEmulatorCommandLine.UsageError) {
        for part in spec.split(separator: ";").map(String.init) where !part.isEmpty {
            if let listing = Listing(rawValue: part) {
                self.listing = listing
                continue
            }
            let pieces = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pieces.count == 2, !pieces[1].isEmpty else {
                throw HubEmulatorCommandLine.UsageError(description: "unknown fault '\(part)'")
            }
            switch pieces[0] {
            case "drop-after":
                guard let n = Int(pieces[1]), n >= 0 else {
                    throw HubEmulatorCommandLine.UsageError(description: "drop-after needs a byte count")
                }
                self.dropAfter = n
            case "corrupt": self.corrupt.insert(pieces[1])
            case "gated": self.gated.insert(pieces[1])
            case "nested": self.nested.insert(pieces[1])
            case "slow":
                guard let n = Int(pieces[1]), n > 0 else {
                    throw HubEmulatorCommandLine.UsageError(description: "slow needs bytes per second")
                }
                self.slowBytesPerSecond = n
            default:
                throw HubEmulatorCommandLine.UsageError(description: "unknown fault '\(part)'")
            }
        }
    }
}

public struct HubEmulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 8090
    /// The listing records (the fixture file's array), in the Hub's default order.
    public var models: [JSONNode] = []
    /// Size of each repo's generated `model.safetensors`.
    public var weightBytes = 256 * 1024
    /// Page size when the request has no `limit` (and the cap on `limit`).
    public var pageSize = 1000
    public var faults = HubFaults()

    public init() {}

    /// Reads a fixture file: a JSON array of listing objects, each with a string `id`.
    public static func loadModels(_ bytes: [UInt8]) throws(HubEmulatorCommandLine.UsageError) -> [JSONNode] {
        let root: JSONNode
        do {
            root = try bytes.withUnsafeBufferPointer { b throws(JSONNode.ParseError) in try JSONNode.parse(b) }
        } catch {
            throw HubEmulatorCommandLine.UsageError(description: "the models file is not JSON: \(error.reason)")
        }
        guard let array = root.arrayValue, array.allSatisfy({ $0["id"]?.stringValue != nil }) else {
            throw HubEmulatorCommandLine.UsageError(description: "the models file must be an array of objects with an id")
        }
        return array
    }
}
