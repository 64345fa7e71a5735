#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads one JSON text in a single pass without building a tree: the caller walks objects and arrays,
/// takes the values it wants and skips the rest. Exactly as strict as `JSONNode.parse` (same grammar, same
/// depth limit, same errors), and skipped values are checked too: a text one accepts, the other accepts.
///
/// For hot paths that need a few fields of a larger object (a streamed chat chunk per token): skipping costs
/// no allocation, and keys are compared as bytes.
public struct JSONReader {
    public typealias ParseError = JSONNode.ParseError

    /// What the next value is, from its first byte.
    public enum Kind: Equatable, Sendable {
        case object, array, string, number, bool, null
    }

    /// An object member's name as it appears between the quotes (escapes not yet decoded).
    public struct Key {
        fileprivate let raw: UnsafeBufferPointer<UInt8>
        fileprivate let escaped: Bool

        /// Whether the decoded name is `name`.
        public func matches(_ name: StaticString) -> Bool {
            if self.escaped {
                var parser = JSONNodeParser(bytes: self.raw)
                // `raw` was checked when the key was read; decoding it again cannot fail.
                guard let decoded = try? parser.stringBody(end: self.raw.count) else { return false }
                return decoded.utf8.elementsEqual(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            }
            let count = name.utf8CodeUnitCount
            guard self.raw.count == count else { return false }
            return count == 0 || memcmp(self.raw.baseAddress!, name.utf8Start, count) == 0
        }
    }

    private var parser: JSONNodeParser
    private var depth = 0

    private init(bytes: UnsafeBufferPointer<UInt8>) {
        self.parser = JSONNodeParser(bytes: bytes)
    }

    /// Runs `body` over the JSON text in `bytes`, which must hold exactly one value (whitespace around it
    /// allowed). `body` must consume that value, by reading or skipping it.
    public static func read<T>(
        _ bytes: UnsafeBufferPointer<UInt8>, _ body: (inout JSONReader) throws(ParseError) -> T
    ) throws(ParseError) -> T {
        var reader = JSONReader(bytes: bytes)
        reader.parser.skipWhitespace()
        let result = try body(&reader)
        reader.parser.skipWhitespace()
        guard reader.parser.index == bytes.count else {
            throw ParseError(reason: .trailingBytes, offset: reader.parser.index)
        }
        return result
    }

    /// `read` over a string's UTF-8 (no copy for a native string).
    public static func read<T>(_ text: String, _ body: (inout JSONReader) throws(ParseError) -> T) throws(ParseError) -> T {
        var text = text
        let result: Result<T, ParseError> = text.withUTF8 { bytes in
            do throws(ParseError) { return .success(try Self.read(bytes, body)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Where the reader is: the offset in the text of the next byte it reads (after a member's colon, the
    /// value's first byte).
    public var offset: Int { self.parser.index }

    /// The string value whose opening quote is at `quote` in `bytes`, decoded and checked exactly as `string()`
    /// checks one, and the offset just past its closing quote.
    public static func string(
        in bytes: UnsafeBufferPointer<UInt8>, at quote: Int
    ) throws(ParseError) -> (text: String, end: Int) {
        var parser = JSONNodeParser(bytes: bytes)
        parser.index = quote
        guard quote >= 0, quote < bytes.count else { throw parser.fail(.unexpectedEnd) }
        guard bytes[quote] == UInt8(ascii: "\"") else { throw parser.fail(.unexpectedByte(bytes[quote])) }
        let text = try parser.string()
        return (text, parser.index)
    }

    /// The kind of the next value; consumes nothing.
    public func kind() throws(ParseError) -> Kind {
        switch try self.parser.peek() {
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
        case let byte: throw self.parser.fail(.unexpectedByte(byte))
        }
    }

    /// Consumes a `null` and returns true, or consumes nothing and returns false.
    public mutating func null() throws(ParseError) -> Bool {
        guard try self.parser.peek() == UInt8(ascii: "n") else { return false }
        try self.parser.literal("null")
        return true
    }

    /// The next value, which must be a string.
    public mutating func string() throws(ParseError) -> String {
        guard try self.parser.peek() == UInt8(ascii: "\"") else { throw self.parser.fail(.unexpectedByte(self.parser.bytes[self.parser.index])) }
        return try self.parser.string()
    }

    /// The next value, which must be a number: as an `Int` when its text is an integer that fits (as
    /// `JSONNode.intValue`), else nil (the number is consumed either way).
    public mutating func integer() throws(ParseError) -> Int? {
        let first = try self.parser.peek()
        guard first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            throw self.parser.fail(.unexpectedByte(first))
        }
        let start = try self.parser.numberRange()
        let span = UnsafeBufferPointer(rebasing: self.parser.bytes[start..<self.parser.index])
        var value = 0
        var negative = false
        for (offset, byte) in span.enumerated() {
            if offset == 0 && byte == UInt8(ascii: "-") {
                negative = true
                continue
            }
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let digit = Int(byte - UInt8(ascii: "0"))
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
            guard !o1, !o2 else { return nil }
            value = sum
        }
        return value
    }

    /// The next value if it is a string; any other value is skipped (checked) and the answer is nil.
    public mutating func stringOrSkip() throws(ParseError) -> String? {
        guard try self.kind() == .string else {
            try self.skip()
            return nil
        }
        return try self.parser.string()
    }

    /// The next value if it is a number written as an integer that fits; anything else is skipped (checked)
    /// and the answer is nil.
    public mutating func integerOrSkip() throws(ParseError) -> Int? {
        guard try self.kind() == .number else {
            try self.skip()
            return nil
        }
        return try self.integer()
    }

    /// Walks an object: `member` gets each key and must consume its value. Any other value is skipped
    /// (checked as strictly) and the answer is false, so a caller refusing other types needs no skip of its own.
    @discardableResult
    public mutating func object(_ member: (Key, inout JSONReader) throws(ParseError) -> Void) throws(ParseError) -> Bool {
        try self.container(open: UInt8(ascii: "{"), close: UInt8(ascii: "}")) { (reader) throws(ParseError) in
            guard try reader.parser.peek() == UInt8(ascii: "\"") else {
                throw reader.parser.fail(.unexpectedByte(reader.parser.bytes[reader.parser.index]))
            }
            let key = try reader.parser.skipString()
            reader.parser.skipWhitespace()
            guard try reader.parser.peek() == UInt8(ascii: ":") else {
                throw reader.parser.fail(.unexpectedByte(reader.parser.bytes[reader.parser.index]))
            }
            reader.parser.index += 1
            reader.parser.skipWhitespace()
            let raw = UnsafeBufferPointer(rebasing: reader.parser.bytes[key.range])
            try member(Key(raw: raw, escaped: key.escaped), &reader)
        }
    }

    /// Walks an array: `element` gets each position and must consume the element. Any other value is skipped
    /// and the answer is false.
    @discardableResult
    public mutating func array(_ element: (Int, inout JSONReader) throws(ParseError) -> Void) throws(ParseError) -> Bool {
        var position = 0
        return try self.container(open: UInt8(ascii: "["), close: UInt8(ascii: "]")) { (reader) throws(ParseError) in
            try element(position, &reader)
            position += 1
        }
    }

    /// An object or array: `item` reads one member or element (whitespace around it is handled here), items
    /// separated by commas. Another value is skipped: false.
    private mutating func container(
        open: UInt8, close: UInt8, _ item: (inout JSONReader) throws(ParseError) -> Void
    ) throws(ParseError) -> Bool {
        guard try self.parser.peek() == open else {
            try self.skip()
            return false
        }
        self.depth += 1
        guard self.depth <= JSONNode.maxDepth else { throw self.parser.fail(.tooDeep) }
        defer { self.depth -= 1 }
        self.parser.index += 1
        self.parser.skipWhitespace()
        if try self.parser.peek() == close {
            self.parser.index += 1
            return true
        }
        while true {
            self.parser.skipWhitespace()
            try item(&self)
            self.parser.skipWhitespace()
            switch try self.parser.peek() {
            case UInt8(ascii: ","): self.parser.index += 1
            case close:
                self.parser.index += 1
                return true
            case let byte: throw self.parser.fail(.unexpectedByte(byte))
            }
        }
    }

    /// Consumes the next value, whatever it is, checking it as strictly as reading it would.
    public mutating func skip() throws(ParseError) {
        switch try self.kind() {
        case .object: try self.object { (_, reader) throws(ParseError) in try reader.skip() }
        case .array: try self.array { (_, reader) throws(ParseError) in try reader.skip() }
        case .string: _ = try self.parser.skipString()
        case .number: _ = try self.parser.numberRange()
        case .bool:
            if self.parser.bytes[self.parser.index] == UInt8(ascii: "t") {
                try self.parser.literal("true")
            } else {
                try self.parser.literal("false")
            }
        case .null: try self.parser.literal("null")
        }
    }
}

extension JSONNodeParser {
    /// Checks a string starting at its opening quote without building it; returns the range between the
    /// quotes and whether it holds escapes. Allocates only to check non-ASCII bytes.
    ///
    /// UTF-8 is checked run by run between escapes, as `string()` checks it, so that invalid UTF-8 is reported
    /// at the same offset (the start of its run) whichever of the two reads the string.
    mutating func skipString() throws(ParseError) -> (range: Range<Int>, escaped: Bool) {
        self.index += 1  // "
        let start = self.index
        var runStart = start
        var escaped = false
        var ascii = true
        while self.index < self.bytes.count {
            self.skipPlainStringBytes()
            guard self.index < self.bytes.count else { break }
            let byte = self.bytes[self.index]
            if byte == UInt8(ascii: "\"") {
                if !ascii { _ = try self.validated(runStart..<self.index) }
                let range = start..<self.index
                self.index += 1
                return (range, escaped)
            }
            if byte < 0x20 { throw self.fail(.controlCharacterInString) }
            if byte >= 0x80 { ascii = false }
            if byte == UInt8(ascii: "\\") {
                if !ascii { _ = try self.validated(runStart..<self.index) }
                ascii = true
                escaped = true
                self.index += 1
                guard self.index < self.bytes.count else { throw self.fail(.unexpectedEnd) }
                switch self.bytes[self.index] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    self.index += 1
                case UInt8(ascii: "u"):
                    self.index += 1
                    _ = try self.unicodeEscape()
                default:
                    throw self.fail(.invalidEscape)
                }
                runStart = self.index
                continue
            }
            self.index += 1
        }
        // `string()` checks a run after an escape before it finds the text ended; the first run, not.
        if escaped && !ascii { _ = try self.validated(runStart..<self.index) }
        throw self.fail(.unexpectedEnd)
    }

    /// Moves past the string bytes that need no attention, eight at a time: stops at the first `"`, `\`,
    /// control character or non-ASCII byte, or fewer than eight bytes before the end (the caller's byte loop
    /// reads those). A string's text is most of a chunk's bytes, and this is where a chunk's read spends its time.
    @inline(__always)
    private mutating func skipPlainStringBytes() {
        guard let base = self.bytes.baseAddress else { return }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        while self.bytes.count - self.index >= 8 {
            let word = UInt64(littleEndian: UnsafeRawPointer(base + self.index).loadUnaligned(as: UInt64.self))
            // Per byte, high bit set where: below 0x20; equal to `"`; equal to `\`; 0x80 or above. Borrows may
            // flag bytes above a flagged one too, never below, so the lowest flag is always a real one.
            let quote = word ^ (ones &* 0x22)
            let backslash = word ^ (ones &* 0x5C)
            let special = ((word &- ones &* 0x20) & ~word)
                | ((quote &- ones) & ~quote)
                | ((backslash &- ones) & ~backslash)
                | word
            let flags = special & highs
            if flags != 0 {
                self.index += flags.trailingZeroBitCount / 8
                return
            }
            self.index += 8
        }
    }

    /// The decoded text of a string body (the bytes between the quotes, already checked) up to `end`.
    mutating func stringBody(end: Int) throws(ParseError) -> String {
        // Reuse `string()`, which starts at an opening quote: parse a copy with the quotes around it.
        var quoted: [UInt8] = [UInt8(ascii: "\"")]
        quoted.append(contentsOf: UnsafeBufferPointer(rebasing: self.bytes[self.index..<end]))
        quoted.append(UInt8(ascii: "\""))
        return try quoted.withUnsafeBufferPointer { buffer throws(ParseError) -> String in
            var parser = JSONNodeParser(bytes: buffer)
            return try parser.string()
        }
    }
}
