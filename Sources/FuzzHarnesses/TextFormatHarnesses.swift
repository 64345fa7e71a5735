import HomebaseCore

/// `PairingCode.parse` (a line a user pastes). Input: the line's bytes (invalid UTF-8 arrives as U+FFFD, as
/// from a terminal).
///
/// Checks: an accepted code prints (`text`) as a code that parses to itself; its secret is 16 bytes and its
/// relay URL a `ws://` or `wss://` URL of printable ASCII; anything over `maxLength` bytes is refused.
enum PairingCodeHarness {
    static let target = FuzzTarget(
        "pairing-code", "pairing code parser: text→parse round trip, field rules, length bound",
        seeds: Self.seeds, run: Self.run)

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        let line = String(decoding: input, as: UTF8.self)
        let parsed = Result { () throws(PairingCode.ParseError) in try PairingCode.parse(line) }
        if line.utf8.count > PairingCode.maxLength {
            try checkEqual(parsed.failure, .tooLong, "verdict on a line over the length limit")
        }
        guard case .success(let code) = parsed else { return }
        try checkEqual(code.secret.count, PairingCode.secretByteCount, "secret length")
        try check(code.relayURL.hasPrefix("ws://") || code.relayURL.hasPrefix("wss://"), "relay URL \(code.relayURL)")
        try check(code.relayURL.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "relay URL bytes \(code.relayURL)")
        let again = Result { () throws(PairingCode.ParseError) in try PairingCode.parse(code.text) }
        try checkEqual(again, .success(code), "parse(text) of \(code.text)")
    }

    static func seeds() -> [[UInt8]] {
        let key = String(repeating: "79b5562e", count: 8)
        return [
            "hb1:\(key):000102030405060708090a0b0c0d0e0f@wss://relay.example/v1/relay",
            "  hb1:\(key.uppercased()):FFEEDDCCBBAA99887766554433221100@ws://127.0.0.1:8080/v1/relay?token=a@b\n",
            "hb1:\(key):000102030405060708090a0b0c0d0e0f@",
        ].map { Array($0.utf8) }
    }
}

/// `RelayURL` (from a config file, a command line or a pairing code). Input: the URL's bytes.
///
/// Checks: an accepted URL, printed (`description`, `httpURL`), parses to the same endpoint; its host is
/// non-empty and its port non-zero; its target starts with `/`.
enum RelayURLHarness {
    static let target = FuzzTarget(
        "relay-url", "relay URL parser: print→parse round trip, field rules",
        seeds: Self.seeds, run: Self.run)

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard let url = RelayURL(String(decoding: input, as: UTF8.self)) else { return }
        try check(!url.host.isEmpty && url.port != 0, "accepted host \(url.host.debugDescription) port \(url.port)")
        try check(url.target.hasPrefix("/"), "target \(url.target.debugDescription)")
        try checkEqual(RelayURL(url.description), url, "parse(description) of \(url.description)")
        try checkEqual(RelayURL(url.httpURL), url, "parse(httpURL) of \(url.httpURL)")
    }

    static func seeds() -> [[UInt8]] {
        [
            "wss://relay.example/v1/relay", "ws://127.0.0.1:8080/v1/relay?token=abc", "https://[::1]:443",
            " HTTP://Relay.Example:80?x=1 ", "ws://a:b:9/", "wss://relay.example:0/",
        ].map { Array($0.utf8) }
    }
}
