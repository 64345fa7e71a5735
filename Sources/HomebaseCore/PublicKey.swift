/// A device's Ed25519 public key: its address on the relay and everywhere else (Protocol/conventions.md).
///
/// Pure value: this type checks only the length. Whether the key is a valid curve point is the
/// crypto layer's business.
///
/// The 32 bytes are held inline (four words, in memory order), not in an array: the relay decodes a key from
/// every frame it forwards and looks it up, and a key on the heap cost an allocation per frame.
public struct PublicKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let byteCount = 32
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    /// - Returns: `nil` unless exactly 32 bytes.
    public init?<C: Collection>(bytes: C) where C.Element == UInt8 {
        guard bytes.count == Self.byteCount else { return nil }
        Swift.withUnsafeMutableBytes(of: &self.words) { out in
            if bytes.withContiguousStorageIfAvailable({ out.copyMemory(from: UnsafeRawBufferPointer($0)) }) == nil {
                for (i, b) in bytes.enumerated() { out[i] = b }
            }
        }
    }

    /// Parses 64 hex characters (lowercase or uppercase).
    public init?(hex: some StringProtocol) {
        guard hex.utf8.count == 64, let b = Hex.decode(hex) else { return nil }
        self.init(bytes: b)
    }

    /// The 32 bytes, as a new array.
    public var bytes: [UInt8] { self.withUnsafeBytes { Array($0) } }

    /// Calls `body` with the 32 bytes in place (no copy).
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try Swift.withUnsafeBytes(of: self.words, body)
    }

    public var hex: String { self.withUnsafeBytes { Hex.encode($0) } }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.words.0)
        hasher.combine(self.words.1)
        hasher.combine(self.words.2)
        hasher.combine(self.words.3)
    }

    public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool {
        lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2
            && lhs.words.3 == rhs.words.3
    }

    /// The first 8 hex characters, for logs (never log more of a key than that).
    public var short: String { String(self.hex.prefix(8)) }
    public var description: String { self.short }

    /// Byte order (the words read big-endian compare as the bytes do).
    public static func < (lhs: PublicKey, rhs: PublicKey) -> Bool {
        (lhs.words.0.bigEndian, lhs.words.1.bigEndian, lhs.words.2.bigEndian, lhs.words.3.bigEndian)
            < (rhs.words.0.bigEndian, rhs.words.1.bigEndian, rhs.words.2.bigEndian, rhs.words.3.bigEndian)
    }
}
