/// A device's Ed25519 public key: its address on the relay and everywhere else (Protocol/conventions.md).
///
/// Pure value: this type checks only the length. Whether the key is a valid curve point is the
/// crypto layer's business.
public struct PublicKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let byteCount = 32
    public let bytes: [UInt8]

    /// - Returns: `nil` unless exactly 32 bytes.
    public init?<C: Collection>(bytes: C) where C.Element == UInt8 {
        guard bytes.count == Self.byteCount else { return nil }
        self.bytes = Array(bytes)
    }

    /// Parses 64 hex characters (lowercase or uppercase).
    public init?(hex: some StringProtocol) {
        guard hex.utf8.count == 64, let b = Hex.decode(hex) else { return nil }
        self.bytes = b
    }

    public var hex: String { Hex.encode(self.bytes) }

    // Hash the 32 bytes in one call: the relay looks a key up for every frame it forwards.
    public func hash(into hasher: inout Hasher) {
        self.bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    public static func == (lhs: PublicKey, rhs: PublicKey) -> Bool {
        lhs.bytes.withUnsafeBytes { l in
            rhs.bytes.withUnsafeBytes { r in
                // Both are exactly 32 bytes (checked in init): four word compares.
                (0..<4).allSatisfy { l.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self)
                    == r.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self) }
            }
        }
    }
    /// The first 8 hex characters, for logs (never log more of a key than that).
    public var short: String { String(self.hex.prefix(8)) }
    public var description: String { self.short }

    public static func < (lhs: PublicKey, rhs: PublicKey) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }
}
