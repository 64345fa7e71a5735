/// A fault an API emulator injects into its next chat requests (`/v1/chat/completions`, `/v1/messages`).
public enum APIEmulatorFault: Sendable, Equatable {
    /// Answer this status with the API's error body for it (500, 429, 529, …) instead of generating.
    case httpStatus(Int)
    /// After this many text tokens, send the API's in-stream error and end the stream.
    case midStreamError(afterTokens: Int)
    /// After this many text tokens, go silent and keep the connection open until the client leaves.
    case stall(afterTokens: Int)
    /// After this many text tokens, drop the TCP connection.
    case disconnect(afterTokens: Int)
    /// Answer 200 `text/event-stream` with exactly these bytes and close: hostile and truncated bodies.
    case rawStream(String)
}

/// One request as the emulator received it, for tests to inspect.
public struct RecordedRequest: Sendable {
    public var method: String
    public var path: String
    /// Header names lowercased.
    public var headers: [(String, String)]
    public var body: [UInt8]

    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return self.headers.first { $0.0 == lowered }?.1
    }

    /// The body as a JSON object, when it is one.
    public var json: [String: Any]? { EmulatorJSON.decodeObject(self.body) }
}

/// What an emulator has seen so far.
public struct APIEmulatorStats: Sendable {
    /// Chat requests that passed authentication and validation (tokens would have been billed).
    public var completions = 0
    /// `GET /v1/models` requests.
    public var modelListings = 0
    /// Streams whose client went away before the stream ended.
    public var clientsGone = 0
    /// Every request, oldest first.
    public var requests: [RecordedRequest] = []
}

/// Settings shared by the API emulators.
public struct APIEmulatorConfiguration: Sendable {
    /// Keys the emulator accepts; any other key (or none) gets the API's 401.
    public var validKeys: Set<String>
    /// Model ids listed and accepted; any other model gets the API's 404.
    public var models: [String]
    /// Delay before each token, in milliseconds (0: as fast as the socket takes them).
    public var tokenDelayMs: Int
    /// Fault for every chat request until changed (`setFault`).
    public var fault: APIEmulatorFault?

    public init(validKeys: Set<String>, models: [String], tokenDelayMs: Int = 0, fault: APIEmulatorFault? = nil) {
        self.validKeys = validKeys
        self.models = models
        self.tokenDelayMs = tokenDelayMs
        self.fault = fault
    }
}
