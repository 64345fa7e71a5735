import Testing

@testable import HomebaseCore

@Suite struct WebSocketHandshakeTests {
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="  // RFC 6455 §1.3's sample nonce
    static let ours = "homebase-relay.v1"

    /// A request that passes every check; tests remove or replace one header at a time.
    static let validHeaders: [(String, String)] = [
        ("Host", "relay.example:443"),
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", key),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Protocol", ours),
    ]

    static func decide(
        method: String = "GET",
        target: String = "/v1/relay",
        _ headers: [(String, String)] = validHeaders
    ) -> WebSocketHandshake.Decision {
        WebSocketHandshake.serverDecision(
            method: method,
            target: target,
            headers: headers,
            expectedPath: "/v1/relay",
            subprotocol: ours
        )
    }

    static func replacing(_ name: String, with value: String?) -> [(String, String)] {
        var headers = validHeaders.filter { $0.0 != name }
        if let value { headers.append((name, value)) }
        return headers
    }

    static func status(_ decision: WebSocketHandshake.Decision) -> Int? {
        if case .reject(let status, _) = decision { return status }
        return nil
    }

    // MARK: Accept value and key

    /// RFC 6455 §1.3: the sample key hashes to the sample accept value.
    @Test func acceptValueMatchesRFCExample() {
        #expect(WebSocketHandshake.guid == "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
        #expect(WebSocketHandshake.acceptValue(forKey: Self.key) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    /// A key is valid only as canonical base64 of exactly 16 bytes.
    @Test func clientKeyMustBeSixteenBytesOfBase64() {
        #expect(WebSocketHandshake.validateClientKey(Self.key))
        #expect(WebSocketHandshake.validateClientKey(Base64.encode([UInt8](repeating: 0xFF, count: 16))))
        #expect(!WebSocketHandshake.validateClientKey(Base64.encode([UInt8](repeating: 1, count: 15))))
        #expect(!WebSocketHandshake.validateClientKey(Base64.encode([UInt8](repeating: 1, count: 17))))
        #expect(!WebSocketHandshake.validateClientKey(""))
        #expect(!WebSocketHandshake.validateClientKey("dGhlIHNhbXBsZSBub25jZQ"))  // padding stripped
        #expect(!WebSocketHandshake.validateClientKey("dGhlIHNhbXBsZSBub25jZR=="))  // non-canonical last char
        #expect(!WebSocketHandshake.validateClientKey("dGhlIHNhbXBsZSBub25jZQ!="))
    }

    // MARK: Server decision

    /// The complete, ordinary request is accepted and our subprotocol selected.
    @Test func validRequestIsAcceptedWithOurSubprotocol() {
        #expect(Self.decide() == .accept(key: Self.key, subprotocol: Self.ours))
    }

    /// Header names are case-insensitive, token values too; lists and repeated headers are combined; the query
    /// string (protocol-v1's `?token=`) is ignored when matching the path.
    @Test func tolerantParsingOfNamesListsAndQuery() {
        let headers: [(String, String)] = [
            ("host", "relay.example"),
            ("UPGRADE", "WebSocket"),
            ("connection", "keep-alive, Upgrade"),
            ("sec-websocket-key", " \(Self.key) "),
            ("SEC-WEBSOCKET-VERSION", "13"),
            ("Sec-WebSocket-Protocol", "chat, other"),
            ("Sec-WebSocket-Protocol", "homebase-relay.v1"),
        ]
        #expect(Self.decide(target: "/v1/relay?token=abc", headers) == .accept(key: Self.key, subprotocol: Self.ours))
        #expect(
            Self.decide(target: "http://relay.example/v1/relay", headers)
                == .accept(key: Self.key, subprotocol: Self.ours)
        )
    }

    /// No Sec-WebSocket-Protocol at all: accepted without one (tolerance; RFC 6455 allows it).
    @Test func clientOfferingNoSubprotocolIsAcceptedWithoutOne() {
        #expect(
            Self.decide(Self.replacing("Sec-WebSocket-Protocol", with: nil)) == .accept(key: Self.key, subprotocol: nil)
        )
    }

    /// Offering only protocols we do not speak is refused with 400, as is a differently cased name.
    @Test func clientOfferingOnlyOtherSubprotocolsIsRejected() {
        #expect(Self.status(Self.decide(Self.replacing("Sec-WebSocket-Protocol", with: "chat, superchat"))) == 400)
        #expect(Self.status(Self.decide(Self.replacing("Sec-WebSocket-Protocol", with: "Homebase-Relay.V1"))) == 400)
    }

    @Test func nonGetIsRejectedWith405() {
        #expect(Self.status(Self.decide(method: "POST")) == 405)
        #expect(Self.status(Self.decide(method: "get")) == 405)  // methods are case-sensitive
    }

    @Test func wrongPathIsRejectedWith404() {
        #expect(Self.status(Self.decide(target: "/v1/relay/")) == 404)
        #expect(Self.status(Self.decide(target: "/v2/relay")) == 404)
        #expect(Self.status(Self.decide(target: "/")) == 404)
        #expect(Self.status(Self.decide(target: "")) == 404)
    }

    @Test func missingOrRepeatedHostIsRejectedWith400() {
        #expect(Self.status(Self.decide(Self.replacing("Host", with: nil))) == 400)
        #expect(Self.status(Self.decide(Self.replacing("Host", with: " "))) == 400)
        #expect(Self.status(Self.decide(Self.validHeaders + [("Host", "other")])) == 400)
    }

    @Test func missingUpgradeOrConnectionTokenIsRejectedWith400() {
        #expect(Self.status(Self.decide(Self.replacing("Upgrade", with: nil))) == 400)
        #expect(Self.status(Self.decide(Self.replacing("Upgrade", with: "h2c"))) == 400)
        #expect(Self.status(Self.decide(Self.replacing("Connection", with: nil))) == 400)
        #expect(Self.status(Self.decide(Self.replacing("Connection", with: "keep-alive"))) == 400)
        // "upgrade" must be a whole token, not a substring of one.
        #expect(Self.status(Self.decide(Self.replacing("Connection", with: "upgraded"))) == 400)
    }

    /// A version other than 13, or none, or two, gets 426 and the rejection names version 13.
    @Test func wrongVersionIsRejectedWith426AndVersionHeader() {
        #expect(Self.status(Self.decide(Self.replacing("Sec-WebSocket-Version", with: "8"))) == 426)
        #expect(Self.status(Self.decide(Self.replacing("Sec-WebSocket-Version", with: nil))) == 426)
        #expect(Self.status(Self.decide(Self.validHeaders + [("Sec-WebSocket-Version", "13")])) == 426)
        let response = String(
            decoding: WebSocketHandshake.serverRejectionBytes(status: 426, reason: "x"),
            as: UTF8.self
        )
        #expect(response.hasPrefix("HTTP/1.1 426 Upgrade Required\r\n"))
        #expect(response.contains("\r\nSec-WebSocket-Version: 13\r\n"))
        #expect(response.hasSuffix("\r\n\r\nx\n"))
    }

    @Test func missingRepeatedOrMalformedKeyIsRejectedWith400() {
        #expect(Self.status(Self.decide(Self.replacing("Sec-WebSocket-Key", with: nil))) == 400)
        #expect(Self.status(Self.decide(Self.replacing("Sec-WebSocket-Key", with: "short=="))) == 400)
        #expect(Self.status(Self.decide(Self.validHeaders + [("Sec-WebSocket-Key", Self.key)])) == 400)
    }

    /// The 101 response carries the accept value and the subprotocol, byte for byte.
    @Test func serverResponseBytesAreExact() {
        let expected =
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: homebase-relay.v1\r\n\r\n"
        #expect(
            WebSocketHandshake.serverResponseBytes(forClientKey: Self.key, subprotocol: Self.ours)
                == Array(expected.utf8)
        )
        let withoutProtocol = WebSocketHandshake.serverResponseBytes(acceptKey: "abc", subprotocol: nil)
        #expect(!String(decoding: withoutProtocol, as: UTF8.self).contains("Sec-WebSocket-Protocol"))
    }

    // MARK: Client

    @Test func clientRequestBytesAreExact() {
        let bytes = WebSocketHandshake.clientRequestBytes(
            host: "relay.example",
            path: "/v1/relay",
            key: Self.key,
            subprotocol: Self.ours,
            extraHeaders: [("Authorization", "Bearer t")]
        )
        let expected =
            "GET /v1/relay HTTP/1.1\r\nHost: relay.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "Sec-WebSocket-Protocol: homebase-relay.v1\r\nAuthorization: Bearer t\r\n\r\n"
        #expect(bytes == Array(expected.utf8))
    }

    static let goodResponse: [(String, String)] = [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        ("Sec-WebSocket-Protocol", ours),
    ]

    static func validate(status: Int = 101, _ headers: [(String, String)]) -> Result<String?, WebSocketHandshakeError> {
        WebSocketHandshake.validateServerResponse(status: status, headers: headers, sentKey: key, subprotocol: ours)
    }

    @Test func serverResponseIsValidated() {
        #expect(Self.validate(Self.goodResponse) == .success(Self.ours))
        // No subprotocol in the answer is tolerated and reported as nil.
        #expect(Self.validate(Array(Self.goodResponse.prefix(3))) == .success(nil))
        #expect(Self.validate(status: 401, Self.goodResponse) == .failure(.unexpectedStatus(401)))
        #expect(Self.validate(Self.goodResponse.filter { $0.0 != "Upgrade" }) == .failure(.missingUpgrade))
        #expect(
            Self.validate(Self.goodResponse.filter { $0.0 != "Connection" }) == .failure(.missingConnectionUpgrade)
        )
        var wrongAccept = Self.goodResponse
        wrongAccept[2] = ("Sec-WebSocket-Accept", WebSocketHandshake.acceptValue(forKey: "AAAAAAAAAAAAAAAAAAAAAA=="))
        #expect(Self.validate(wrongAccept) == .failure(.acceptMismatch))
        #expect(Self.validate(Self.goodResponse.filter { $0.0 != "Sec-WebSocket-Accept" }) == .failure(.acceptMismatch))
        var otherProtocol = Self.goodResponse
        otherProtocol[3] = ("Sec-WebSocket-Protocol", "chat")
        #expect(Self.validate(otherProtocol) == .failure(.unexpectedSubprotocol("chat")))
        #expect(
            Self.validate(Self.goodResponse + [("Sec-WebSocket-Extensions", "permessage-deflate")])
                == .failure(.unexpectedExtensions)
        )
    }
}
