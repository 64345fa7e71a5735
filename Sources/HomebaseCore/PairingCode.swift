/// A one-time pairing code (Protocol/messages.md §4): `hb1:<homebase pk, 64 hex>:<secret, 32 hex>@<relay URL>`.
///
/// `homebase pair` prints one; `handset pair CODE` parses it. Pure value: the secret is 16 random bytes the
/// Homebase drew; this type only formats and parses.
public struct PairingCode: Equatable, Sendable {
    /// The literal prefix, which carries the format version.
    public static let prefix = "hb1:"
    /// Bytes in the secret (32 hex characters).
    public static let secretByteCount = 16
    /// The longest code we accept. A relay URL is short; this bounds what a pasted line can make us hold.
    public static let maxLength = 2048

    /// The Homebase's device key: the handset seals `pair.request` to it.
    public var homebase: PublicKey
    /// The one-time secret.
    public var secret: [UInt8]
    /// The relay both devices use, e.g. `wss://relay.example.org/v1`.
    public var relayURL: String

    /// - Precondition: `secret` is 16 bytes.
    public init(homebase: PublicKey, secret: [UInt8], relayURL: String) {
        precondition(secret.count == Self.secretByteCount, "a pairing secret is 16 bytes")
        self.homebase = homebase
        self.secret = secret
        self.relayURL = relayURL
    }

    /// The secret as `pair.request` carries it: 32 lowercase hex characters.
    public var secretHex: String { Hex.encode(self.secret) }

    /// The code as printed: one line, lowercase hex.
    public var text: String { Self.prefix + self.homebase.hex + ":" + self.secretHex + "@" + self.relayURL }

    /// Why a string is not a pairing code; each case is a sentence a user can act on.
    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        case empty
        case tooLong
        case wrongPrefix
        case badPublicKey
        case badSecret
        case missingRelayURL
        case badRelayURL

        public var description: String {
            switch self {
            case .empty: "the pairing code is empty"
            case .tooLong: "the pairing code is too long"
            case .wrongPrefix: "the pairing code does not start with hb1:"
            case .badPublicKey: "the pairing code's Homebase key is not 64 hex characters"
            case .badSecret: "the pairing code's secret is not 32 hex characters"
            case .missingRelayURL: "the pairing code has no relay URL after '@'"
            case .badRelayURL: "the pairing code's relay URL is not a ws:// or wss:// URL"
            }
        }
    }

    /// Parses a code, ignoring whitespace around it (a pasted line often carries a newline).
    ///
    /// The layout is positional: the key and the secret have fixed lengths, so an `@` inside the relay URL
    /// (user info) cannot shift the split.
    public static func parse(_ string: String) throws(ParseError) -> PairingCode {
        let utf8 = Array(string.utf8)
        guard utf8.count <= Self.maxLength else { throw .tooLong }
        var start = 0
        var end = utf8.count
        while start < end, Self.isSpace(utf8[start]) { start += 1 }
        while end > start, Self.isSpace(utf8[end - 1]) { end -= 1 }
        guard start < end else { throw .empty }
        let code = utf8[start..<end]
        let prefix = Array(Self.prefix.utf8)
        guard code.starts(with: prefix) else { throw .wrongPrefix }

        var i = code.startIndex + prefix.count
        let keyHexLength = PublicKey.byteCount * 2
        guard code.endIndex - i >= keyHexLength + 1, code[i + keyHexLength] == UInt8(ascii: ":"),
            let key = PublicKey(bytes: Hex.decode(Self.ascii(code[i..<(i + keyHexLength)])) ?? [])
        else { throw .badPublicKey }
        i += keyHexLength + 1

        let secretHexLength = Self.secretByteCount * 2
        guard code.endIndex - i >= secretHexLength,
            let secret = Hex.decode(Self.ascii(code[i..<(i + secretHexLength)])),
            secret.count == Self.secretByteCount
        else { throw .badSecret }
        i += secretHexLength

        guard i < code.endIndex else { throw .missingRelayURL }
        // Anything but '@' right after 32 hex characters means the secret is longer than it may be.
        guard code[i] == UInt8(ascii: "@") else { throw .badSecret }
        i += 1
        guard i < code.endIndex else { throw .missingRelayURL }
        let url = code[i...]
        guard Self.isRelayURL(url) else { throw .badRelayURL }
        return PairingCode(homebase: key, secret: secret, relayURL: String(decoding: url, as: UTF8.self))
    }

    /// `ws://` or `wss://`, a non-empty rest, printable ASCII without spaces.
    private static func isRelayURL(_ url: ArraySlice<UInt8>) -> Bool {
        guard url.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        for scheme in ["ws://", "wss://"] {
            let s = Array(scheme.utf8)
            if url.starts(with: s) { return url.count > s.count }
        }
        return false
    }

    /// Bytes that must be hex, as a string for `Hex.decode` (non-ASCII bytes make it fail, as they should).
    private static func ascii(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    private static func isSpace(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D
    }
}
