/// Why a device cannot use its relay, as its owner needs to read it (issue 39): one line naming the cause the
/// connection attempt really met (the HTTP status of the upgrade, a refused token, a TLS mismatch, nothing
/// listening) and what to check. The daemon logs it at info level, `homebase status` shows it, and `handset` /
/// `guest` print the same text when they cannot connect.
public struct RelayConnectProblem: Equatable, Sendable, CustomStringConvertible {
    /// What the attempt met.
    public enum Cause: Equatable, Sendable {
        /// The server answered the upgrade with this HTTP status instead of 101.
        case httpStatus(Int, String)
        /// The TCP connection could not be set up (refused, unreachable, name not resolved).
        case unreachable(String)
        /// No answer within the connect timeout.
        case timedOut
        /// The TLS layer failed (a `wss://` URL against a plain server, a certificate problem).
        case tls(String)
        /// The server closed the connection before an HTTP answer.
        case closedBeforeAnswer
        /// The WebSocket was up but the relay refused the login (an error or close frame, or no READY).
        case loginRefused(code: UInt16?, reason: String)
        /// Anything else, as the transport said it.
        case other(String)
    }

    public var cause: Cause
    /// The relay URL as configured (any `?token=` left out of the text).
    public var url: String
    /// Whether the attempt carried an access token (a header or `?token=` in the URL).
    public var tokenSent: Bool

    public init(cause: Cause, url: String, tokenSent: Bool) {
        self.cause = cause
        self.url = url
        self.tokenSent = tokenSent
    }

    /// The URL without its query (a token must not reach a log line).
    var shownURL: String {
        guard let q = self.url.firstIndex(of: "?") else { return self.url }
        return String(self.url[..<q])
    }

    var parsed: RelayURL? { RelayURL(self.url) }

    var hostPort: String { self.parsed.map { "\($0.host):\($0.port)" } ?? self.shownURL }

    public var description: String {
        switch self.cause {
        case .httpStatus(401, _), .httpStatus(403, _):
            if self.tokenSent {
                return "the relay refused: token not accepted (HTTP 401); check the token "
                    + "(HOMEBASE_RELAY_TOKEN or ?token= in the relay URL) against the relay's token_file"
            }
            return "the relay refused: token required (HTTP 401); set HOMEBASE_RELAY_TOKEN or add ?token=TOKEN "
                + "to the relay URL"
        case .httpStatus(let status, let reason):
            let path = self.parsed.map { $0.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? "/" }
            let answered = "\(self.hostPort) answered HTTP \(status)\(reason.isEmpty ? "" : " \(reason)")"
            if status == 404 || (path.map { $0 != "/v1/relay" } ?? false) {
                return "\(answered) at \(path ?? "/"): the relay's WebSocket path is /v1/relay "
                    + "(use ws://\(self.hostPort)/v1/relay)"
            }
            return "\(answered) instead of a WebSocket upgrade; is \(self.shownURL) a Homebase relay?"
        case .unreachable(let detail):
            return "cannot reach the relay at \(self.hostPort) (\(detail)); is the relay running, "
                + "and are the host and port right?"
        case .timedOut:
            return "no answer from the relay at \(self.hostPort) in time; check the address, the port and any firewall"
        case .tls(let detail):
            return "TLS with \(self.hostPort) failed (\(detail)); if the relay serves plain WebSocket use ws://, "
                + "else check its certificate"
        case .closedBeforeAnswer:
            let secure = self.parsed?.secure ?? false
            return "\(self.hostPort) closed the connection without an HTTP answer"
                + (secure ? "; is it a Homebase relay?" : "; if it serves TLS use wss://, else is it a Homebase relay?")
        case .loginRefused(let code, let reason):
            return "the relay refused the login (\(code.map { "\($0)" } ?? "no code")\(reason.isEmpty ? "" : ": \(reason)")); "
                + "check that this key is on the relay's allowlist"
        case .other(let detail):
            return "cannot use the relay at \(self.shownURL): \(detail)"
        }
    }
}

/// Decides which connection problems reach the log at info level: the first of each cause, then only when the
/// cause changes (a relay that stays down does not fill the log every backoff step), and the recovery once.
/// Pure: the caller logs what it returns.
public struct RelayProblemReport: Sendable, Equatable {
    /// The problem standing now (nil while connected or before the first attempt).
    public private(set) var current: RelayConnectProblem?

    public init() {}

    /// An attempt failed: the problem to log, or nil when the same cause was already reported.
    public mutating func failed(_ problem: RelayConnectProblem) -> RelayConnectProblem? {
        defer { self.current = problem }
        return self.current?.description == problem.description ? nil : problem
    }

    /// The link logged in: true when a problem was standing (log that it is over).
    public mutating func connected() -> Bool {
        defer { self.current = nil }
        return self.current != nil
    }
}
