import HomebaseCore

/// `HTTPRequestHeadParser` and `HTTPResponseHeadParser`. Input: `control || maxHead || maxFields || bytes`;
/// control picks the cuts, the next two bytes the limits (small ones, so the boundaries are reached).
///
/// Checks: the heads and the error do not depend on the cuts; a parser waiting for more holds at most
/// `maxHeadBytes` and a CR; every head, written out again, parses to the same head; the upgrade rules
/// (`WebSocketHandshake.serverDecision`) take every request head the parser gives without trapping.
enum HTTPHeadHarness {
    static let requestTarget = FuzzTarget(
        "http-request-head", "HTTP/1.1 request heads: cut-independence, head bound, write→parse round trip",
        seeds: { Self.seeds(Self.requestSeeds) }, run: { input throws(InvariantViolation) in
            try Self.run(input, HTTPRequestHeadParser.self)
        })

    static let responseTarget = FuzzTarget(
        "http-response-head", "HTTP/1.1 response heads: cut-independence, head bound, write→parse round trip",
        seeds: { Self.seeds(Self.responseSeeds) }, run: { input throws(InvariantViolation) in
            try Self.run(input, HTTPResponseHeadParser.self)
        })

    struct Outcome<Head: Equatable>: Equatable {
        var heads: [Head] = []
        var error: HTTPParseError?
    }

    static func run<P: HeadParser>(_ input: [UInt8], _: P.Type) throws(InvariantViolation) {
        guard input.count >= 3 else { return }
        let limits = HTTPHeadLimits(
            maxHeadBytes: FuzzInput.limit(input[1], small: 200, production: 16 * 1024),
            maxHeaderCount: FuzzInput.limit(input[2], small: 8, production: 100))
        let bytes = input[3...]
        let whole = try Self.parse([bytes], P.self, limits: limits)
        let cut = try Self.parse(FuzzInput.pieces(bytes, seed: input[0]), P.self, limits: limits)
        try checkEqual(cut, whole, "heads depend on the cuts")
        for head in whole.heads {
            let again = try Self.parse([P.write(head)[...]], P.self, limits: HTTPHeadLimits(maxHeadBytes: 1 << 20))
            try checkEqual(again.heads, [head], "a written head parses differently")
            P.inspect(head)
        }
    }

    static func parse<P: HeadParser>(
        _ pieces: [ArraySlice<UInt8>], _: P.Type, limits: HTTPHeadLimits
    ) throws(InvariantViolation) -> Outcome<P.Head> {
        var parser = P(limits: limits)
        var outcome = Outcome<P.Head>()
        for piece in pieces {
            parser.append(piece)
            do {
                while let head = try parser.next() { outcome.heads.append(head) }
            } catch {
                outcome.error = error
                return outcome
            }
            try check(parser.bufferedCount <= limits.maxHeadBytes + 1,
                      "waiting with \(parser.bufferedCount) bytes, limit \(limits.maxHeadBytes)")
        }
        return outcome
    }

    static func seeds(_ heads: [String]) -> [[UInt8]] {
        heads.flatMap { head -> [[UInt8]] in
            let bytes = Array(head.utf8)
            return [bytes.prefixed(0, 255, 255), bytes.prefixed(0x0B, 255, 255), bytes.prefixed(3, 120, 4)]
        }
    }

    static let requestSeeds = [
        "GET /v1/relay?token=a%20b+c&x HTTP/1.1\r\nHost: relay.example\r\nUpgrade: websocket\r\n"
            + "Connection: keep-alive, Upgrade\r\nSec-WebSocket-Version: 13\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: homebase-relay.v1\r\n\r\n",
        "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1:11434\r\nContent-Length: 2\r\n\r\n{}"
            + "GET /metrics HTTP/1.0\nConnection: keep-alive\n\n",
        "\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    ]

    static let responseSeeds = [
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 404\nContent-Length: 18\n\n",
    ]
}

/// What the harness needs of a head parser; the two parsers share their contract.
protocol HeadParser {
    associatedtype Head: Equatable
    init(limits: HTTPHeadLimits)
    mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8
    var bufferedCount: Int { get }
    mutating func next() throws(HTTPParseError) -> Head?
    /// The head as a peer would send it.
    static func write(_ head: Head) -> [UInt8]
    /// Hands the head to the code that acts on it next.
    static func inspect(_ head: Head)
}

extension HeadParser {
    static func writeFields(_ fields: [HTTPHeaderField], to out: inout [UInt8]) {
        for field in fields {
            out += Array("\(field.name): \(field.value)\r\n".utf8)
        }
        out += Array("\r\n".utf8)
    }
}

extension HTTPRequestHeadParser: HeadParser {
    static func write(_ head: HTTPRequestHead) -> [UInt8] {
        var out = Array("\(head.method) \(head.target) \(head.version)\r\n".utf8)
        Self.writeFields(head.headers, to: &out)
        return out
    }

    static func inspect(_ head: HTTPRequestHead) {
        _ = WebSocketHandshake.serverDecision(
            method: head.method, target: head.target, headers: head.headers.map { ($0.name, $0.value) },
            expectedPath: "/v1/relay", subprotocol: "homebase-relay.v1")
        _ = (head.keepAlive, head.isChunked, head.contentLength, head.queryValue("token"))
    }
}

extension HTTPResponseHeadParser: HeadParser {
    static func write(_ head: HTTPResponseHead) -> [UInt8] {
        var out = Array("\(head.version) \(head.status) \(head.reason)\r\n".utf8)
        Self.writeFields(head.headers, to: &out)
        return out
    }

    static func inspect(_ head: HTTPResponseHead) {
        _ = (head.isChunked, head.contentLength, head.connectionTokens)
    }
}
