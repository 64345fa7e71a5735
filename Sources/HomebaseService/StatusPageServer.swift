import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Synchronization

/// The HTTP shell of the local status page (`homebase run --ui`): the project's `SimpleHTTPServer`, with every
/// decision left to `StatusPageGate` (routes, Host, token, CSRF, sizes), the data to `StatusCollector`, and the
/// page itself to the assets embedded in the binary (`StatusPageAssets`). It only moves bytes.
///
/// Live updates are Server-Sent Events: each client of `/api/events` gets the report once a second, from one
/// shared encoding at most a second old. At most `maxEventClients` at once (more get 503), and one that stops
/// reading is dropped after `sendTimeoutMs`.
///
/// Strangers cannot lock the owner out (issue 37): at most `maxConnections` connections in all (a connection costs
/// a thread), given out by `ConnectionSlots` (at most `perAddress` unauthenticated ones from one address, and an
/// unauthenticated one is evicted to make room before anyone is refused; a request that passes the gate marks its
/// connection authenticated); a request must arrive whole within `requestReadTimeoutMs` (408 and closed), and a
/// refused request's connection is closed.
public final class StatusPageServer: Sendable {
    public struct Configuration: Sendable {
        public var host: String
        public var port: UInt16
        /// `--ui-token`: required on every request when set.
        public var accessToken: String?
        /// Host names accepted besides the loopback ones (`--ui-host`), for a page served under a name.
        public var allowedHosts: [String]
        public var maxEventClients = 8
        public var maxConnections = 32
        /// Unauthenticated connections at most from one peer address.
        public var perAddress = 8
        /// A request's head and body must arrive within this long.
        public var requestReadTimeoutMs: Int32 = 5_000
        /// A client (a live page) that stops reading is dropped after this long.
        public var sendTimeoutMs: Int32 = 10_000
        /// With a token, a request naming a host not allowed asks for the machine's addresses again, at most
        /// this often (they change with DHCP).
        public var ownHostsRefreshMs: UInt64 = 10_000
        /// Between two reports on `/api/events`.
        public var eventIntervalMs: Int32 = 1_000

        public init(host: String, port: UInt16, accessToken: String? = nil, allowedHosts: [String] = []) {
            self.host = host
            self.port = port
            self.accessToken = accessToken
            self.allowedHosts = allowedHosts
        }
    }

    private struct Shared {
        var eventClients = 0
        /// The last report's JSON and when it was encoded (monotonic ms), shared by the event streams.
        var latest: (json: [UInt8], atMs: UInt64)?
    }

    /// The gate, renewed with the machine's current addresses now and then (`refreshOwnHosts`).
    public var gate: StatusPageGate { self.gateState.withLock { $0.gate } }
    private let gateState: Mutex<(gate: StatusPageGate, ownHostsAtMs: UInt64)>
    private let ownHosts: @Sendable () -> [String]
    private let collector: StatusCollector
    private let configuration: Configuration
    private let logger: Logger
    private let shared = Mutex(Shared())
    private let server = Mutex<SimpleHTTPServer?>(nil)

    /// - Parameter csrfToken: this daemon's token (random by default: 32 bytes from the system's CSPRNG).
    /// - Parameter ownHosts: the machine's own addresses and names (`LocalHosts.current`), allowed as hosts
    ///   when an access token is set; asked again at most every `ownHostsRefreshMs` when a request names a host not allowed
    ///   (an address from DHCP that changed).
    public init(collector: StatusCollector, configuration: Configuration, csrfToken: String? = nil,
                logger: Logger = .discard(), ownHosts: @escaping @Sendable () -> [String] = LocalHosts.current) {
        self.collector = collector
        self.configuration = configuration
        self.logger = logger
        self.ownHosts = ownHosts
        let gate = StatusPageGate(StatusPageGate.Configuration(
            allowedHosts: configuration.allowedHosts + [configuration.host], accessToken: configuration.accessToken,
            csrfToken: csrfToken ?? SecureRandom.bytes(32).map { String(format: "%02x", $0) }.joined(),
            ownHosts: configuration.accessToken == nil ? [] : ownHosts()))
        self.gateState = Mutex((gate, Posix.monotonicMs))
    }

    /// Asks for the machine's addresses again (at most every `ownHostsRefreshMs`); true when the gate changed.
    private func refreshOwnHosts() -> Bool {
        guard self.configuration.accessToken != nil else { return false }
        let now = Posix.monotonicMs
        let due = self.gateState.withLock { state -> Bool in
            guard now &- state.ownHostsAtMs >= self.configuration.ownHostsRefreshMs else { return false }
            state.ownHostsAtMs = now
            return true
        }
        guard due else { return false }
        let hosts = self.ownHosts().map { $0.lowercased() }
        return self.gateState.withLock { state in
            guard hosts != state.gate.configuration.ownHosts else { return false }
            var configuration = state.gate.configuration
            configuration.ownHosts = hosts
            state.gate = StatusPageGate(configuration)
            return true
        }
    }

    /// Binds and serves; returns the bound port.
    @discardableResult
    public func start() throws -> UInt16 {
        var http = SimpleHTTPServer.Configuration()
        http.headLimits = HTTPHeadLimits(maxHeadBytes: 8 * 1024, maxHeaderCount: 50)
        http.maxBodyBytes = self.gate.configuration.maxBodyBytes
        http.idleTimeoutMs = 60_000
        http.backlog = 64
        http.maxConnections = self.configuration.maxConnections
        http.slots = ConnectionSlots.Limits(maxConnections: self.configuration.maxConnections,
                                            perAddress: self.configuration.perAddress)
        http.requestReadTimeoutMs = self.configuration.requestReadTimeoutMs
        http.sendTimeoutMs = self.configuration.sendTimeoutMs
        let server = SimpleHTTPServer(configuration: http) { [self] request, writer in
            self.handle(request, writer)
        }
        let port = try server.start(host: self.configuration.host, port: self.configuration.port)
        self.server.withLock { $0 = server }
        return port
    }

    /// Closes the listener and every connection (event streams end), and lets go of the HTTP server: its handler
    /// holds this page, which held it, and that cycle kept both (and the daemon behind the collector) alive.
    public func stop() {
        self.server.withLock { server in
            defer { server = nil }
            return server
        }?.stop()
    }

    func handle(_ request: HTTPServerRequest, _ writer: HTTPResponseWriter) {
        var decision = self.gate.decide(request.head, bodyBytes: request.body.count)
        if decision == .hostNotAllowed, self.refreshOwnHosts() {
            decision = self.gate.decide(request.head, bodyBytes: request.body.count)
        }
        switch decision {
        case .refuse(let status, let reason):
            self.logger.debug("status page refused a request",
                              metadata: ["status": "\(status)", "reason": reason, "path": request.path])
            // A refused connection does not stay to wait for another request: it holds a slot meanwhile.
            writer.respond(status: status, headers: Self.securityHeaders + [
                ("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store"), ("Connection", "close"),
            ], body: Array((reason + "\n").utf8))
            return
        case .login, .serve:
            // It passed the gate (the access token, when one is set): never evicted for a stranger.
            writer.authenticateConnection()
        }
        switch decision {
        case .refuse:
            return
        case .login:
            let token = self.gate.configuration.accessToken ?? ""
            writer.respond(status: 303, headers: Self.securityHeaders + [
                ("Location", "/"),
                ("Set-Cookie", "\(StatusPageGate.cookieName)=\(token); Path=/; HttpOnly; SameSite=Strict"),
            ])
        case .serve(.page):
            let page = StatusPageAssets.indexHTML.replacingOccurrences(
                of: StatusPageAssets.csrfPlaceholder, with: self.gate.configuration.csrfToken)
            self.respond(writer, 200, type: "text/html; charset=utf-8", Array(page.utf8))
        case .serve(.asset(let path)):
            let (type, text) = path == "/app.css"
                ? ("text/css; charset=utf-8", StatusPageAssets.appCSS)
                : ("text/javascript; charset=utf-8", StatusPageAssets.appJS)
            self.respond(writer, 200, type: type, Array(text.utf8))
        case .serve(.status):
            guard let json = self.latestJSON(maxAgeMs: 0) else {
                return self.respond(writer, 503, type: "text/plain; charset=utf-8", Array("status unavailable\n".utf8))
            }
            self.respond(writer, 200, type: "application/json", json)
        case .serve(.events):
            self.streamEvents(writer)
        case .serve(.action(let action)):
            self.perform(action, body: request.body, writer)
        }
    }

    private func perform(_ action: StatusPageGate.Action, body: [UInt8], _ writer: HTTPResponseWriter) {
        let (status, object): (Int, [String: Any])
        do {
            let command = try StatusPageCommand.parse(action, body: body)
            if command == .pair {
                // The code and its QR code (for a phone's camera), drawn by the page from these rows.
                let code = try self.collector.createPairingCode()
                let qr = try QRCode.encode(Array(code.utf8), correction: .medium)
                self.logger.info("status page action", metadata: ["action": action.rawValue])
                (status, object) = (200, [
                    "ok": true, "message": "a pairing code: 10 minutes, single use", "code": code,
                    "expires_in_s": Int(PairingService.codeLifetimeMs / 1000),
                    "qr": ["size": qr.size, "rows": qr.rows] as [String: Any],
                ])
            } else {
                let message = try self.collector.perform(command)
                self.logger.info("status page action", metadata: ["action": action.rawValue])
                // The next event carries the change at once, not up to a second later.
                self.shared.withLock { $0.latest = nil }
                (status, object) = (200, ["ok": true, "message": message])
            }
        } catch let invalid as StatusPageCommand.Invalid {
            (status, object) = (400, ["ok": false, "message": invalid.description])
        } catch {
            (status, object) = (409, ["ok": false, "message": "\(error)"])
        }
        let json = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        self.respond(writer, status, type: "application/json", Array(json))
    }

    /// Sends the report every `eventIntervalMs` until the client leaves or the server stops.
    private func streamEvents(_ writer: HTTPResponseWriter) {
        let admitted = self.shared.withLock { s -> Bool in
            guard s.eventClients < self.configuration.maxEventClients else { return false }
            s.eventClients += 1
            return true
        }
        guard admitted else {
            return self.respond(writer, 503, type: "text/plain; charset=utf-8", Array("too many live pages\n".utf8))
        }
        defer { self.shared.withLock { $0.eventClients -= 1 } }
        guard writer.startStream(status: 200, headers: Self.securityHeaders + [
            ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"),
        ]) else { return }
        // The browser reconnects after this long if the stream breaks.
        guard writer.writeChunk(Array("retry: 2000\n\n".utf8)) else { return }
        while true {
            if let json = self.latestJSON(maxAgeMs: UInt64(self.configuration.eventIntervalMs) * 9 / 10) {
                guard writer.writeChunk(Array("event: status\ndata: ".utf8) + json + Array("\n\n".utf8)) else { return }
            }
            if writer.waitForDisconnect(timeoutMs: Int(self.configuration.eventIntervalMs)) { return }
        }
    }

    /// The report's JSON, re-encoded when the shared one is older than `maxAgeMs`; nil if it cannot be built.
    private func latestJSON(maxAgeMs: UInt64) -> [UInt8]? {
        let now = Posix.monotonicMs
        if let latest = self.shared.withLock({ $0.latest }), now &- latest.atMs <= maxAgeMs, maxAgeMs > 0 {
            return latest.json
        }
        do {
            let json = try self.collector.report().json()
            self.shared.withLock { $0.latest = (json, now) }
            return json
        } catch {
            self.logger.warning("cannot build the status report", metadata: ["error": "\(error)"])
            return nil
        }
    }

    private func respond(_ writer: HTTPResponseWriter, _ status: Int, type: String, _ body: [UInt8]) {
        writer.respond(status: status, headers: Self.securityHeaders + [
            ("Content-Type", type), ("Cache-Control", "no-store"),
        ], body: body)
    }

    /// Nothing from elsewhere (the page works offline and loads no third party), no framing by another site,
    /// no sniffing, no referrer.
    static let securityHeaders: [(String, String)] = [
        ("Content-Security-Policy",
         "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        ("Referrer-Policy", "no-referrer"),
    ]
}
