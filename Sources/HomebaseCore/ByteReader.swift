/// Reads big-endian integers and byte runs from a buffer without copying until asked.
///
/// Every read returns `nil` when too few bytes remain; codecs turn that into their own
/// `truncated` error. A short read never traps (Protocol/conventions.md: integers are
/// unsigned big-endian).
public struct ByteReader: Sendable {
    public let bytes: ArraySlice<UInt8>
    public private(set) var index: Int

    public init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.index = bytes.startIndex
    }

    public init(_ bytes: [UInt8]) {
        self.init(bytes[...])
    }

    /// Bytes not yet read.
    public var remaining: Int { self.bytes.endIndex - self.index }
    public var isAtEnd: Bool { self.index >= self.bytes.endIndex }

    public mutating func readUInt8() -> UInt8? {
        guard self.remaining >= 1 else { return nil }
        defer { self.index += 1 }
        return self.bytes[self.index]
    }

    public mutating func readUInt16() -> UInt16? { self.readInteger(UInt16.self) }
    public mutating func readUInt32() -> UInt32? { self.readInteger(UInt32.self) }
    public mutating func readUInt64() -> UInt64? { self.readInteger(UInt64.self) }

    /// Reads `count` bytes as a slice of the underlying buffer (no copy).
    public mutating func readSlice(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, self.remaining >= count else { return nil }
        defer { self.index += count }
        return self.bytes[self.index..<(self.index + count)]
    }

    /// Reads `count` bytes into a new array.
    public mutating func readBytes(_ count: Int) -> [UInt8]? {
        self.readSlice(count).map { Array($0) }
    }

    /// Everything that is left, as a slice (no copy).
    public mutating func readRest() -> ArraySlice<UInt8> {
        defer { self.index = self.bytes.endIndex }
        return self.bytes[self.index...]
    }

    private mutating func readInteger<T: FixedWidthInteger & UnsignedInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard self.remaining >= size else { return nil }
        var value: T = 0
        for i in 0..<size {
            value = (value << 8) | T(self.bytes[self.index + i])
        }
        self.index += size
        return value
    }
}

/// Appends big-endian integers and byte runs to a growing array.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 64) {
        self.bytes = []
        self.bytes.reserveCapacity(capacity)
    }

    public mutating func write(_ value: UInt8) { self.bytes.append(value) }
    public mutating func write(_ value: UInt16) { self.writeInteger(value) }
    public mutating func write(_ value: UInt32) { self.writeInteger(value) }
    public mutating func write(_ value: UInt64) { self.writeInteger(value) }
    public mutating func write<C: Collection>(_ bytes: C) where C.Element == UInt8 { self.bytes.append(contentsOf: bytes) }
    /// Lets `body` append to the bytes (a layout written once for `[UInt8]`).
    mutating func append(_ body: (inout [UInt8]) -> Void) { body(&self.bytes) }

    private mutating func writeInteger<T: FixedWidthInteger & UnsignedInteger>(_ value: T) {
        self.bytes.appendBigEndian(value)
    }
}

extension [UInt8] {
    /// Appends `value`'s bytes, most significant first (network order), as `ByteWriter` writes integers.
    @inlinable
    mutating func appendBigEndian<T: FixedWidthInteger & UnsignedInteger>(_ value: T) {
        for i in (0..<MemoryLayout<T>.size).reversed() {
            self.append(UInt8(truncatingIfNeeded: value >> (i * 8)))
        }
    }
}

/// Lowercase hex, as every address and vector in Protocol/ is written.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    public static func encode<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(Self.digits[Int(b >> 4)])
            out.append(Self.digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes hex (either case). Returns `nil` on odd length or a non-hex character.
    public static func decode(_ string: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(string.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var i = 0
        while i < utf8.count {
            guard let hi = Self.nibble(utf8[i]), let lo = Self.nibble(utf8[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
