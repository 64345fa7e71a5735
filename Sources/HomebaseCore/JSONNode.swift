/// A JSON value parsed by `JSONNode.parse`, a small strict RFC 8259 parser for hot paths: one streamed chunk
/// per token is parsed with it where Foundation's `JSONDecoder` cost tens of microseconds.
///
/// Objects keep their members in order, duplicates included; `subscript(key)` answers the last one, as
/// Foundation's parsers do. Numbers keep their text, so an integer is read exactly or not at all.
public enum JSONNode: Equatable, Sendable {
    case null
    case bool(Bool)
    /// The number's text as it appeared, already checked against the JSON number grammar.
    case number(String)
    case string(String)
    case array([JSONNode])
    case object([Member])

    public struct Member: Equatable, Sendable {
        public var key: String
        public var value: JSONNode
        public init(key: String, value: JSONNode) {
            self.key = key
            self.value = value
        }
    }

    /// Why a text is not JSON; `offset` is the byte where parsing stopped.
    public struct ParseError: Error, Equatable, Sendable {
        public enum Reason: Equatable, Sendable {
            case unexpectedEnd
            case unexpectedByte(UInt8)
            case invalidNumber
            case invalidEscape
            case invalidUnicode
            case controlCharacterInString
            case tooDeep
            case trailingBytes
        }

        public var reason: Reason
        public var offset: Int
    }

    /// Nesting deeper than this is refused (`tooDeep`), so hostile input cannot exhaust the stack.
    public static let maxDepth = 64

    /// Parses one JSON text (surrounding whitespace allowed, nothing else after it).
    public static func parse(_ text: String) throws(ParseError) -> JSONNode {
        var text = text
        let result: Result<JSONNode, ParseError> = text.withUTF8 { bytes in
            do throws(ParseError) { return .success(try Self.parse(bytes)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Parses one JSON text from UTF-8 bytes; invalid UTF-8 inside a string is `invalidUnicode`.
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws(ParseError) -> JSONNode {
        var parser = JSONNodeParser(bytes: bytes)
        parser.skipWhitespace()
        let value = try parser.value(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw ParseError(reason: .trailingBytes, offset: parser.index) }
        return value
    }

    // MARK: Reading

    /// The last member named `key` of an object; nil for a missing key or a value that is not an object.
    public subscript(key: String) -> JSONNode? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.key == key })?.value
    }

    public var isNull: Bool { self == .null }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The number as an `Int` when its text is an integer that fits (`1.0` and `1e3` are not).
    public var intValue: Int? {
        if case .number(let text) = self { return Int(text) }
        return nil
    }

    public var arrayValue: [JSONNode]? {
        if case .array(let items) = self { return items }
        return nil
    }

    public var isObject: Bool {
        if case .object = self { return true }
        return false
    }
}

/// The recursive-descent parser behind `JSONNode.parse` and `JSONReader`, over a byte buffer that outlives it.
struct JSONNodeParser {
    typealias ParseError = JSONNode.ParseError

    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    func fail(_ reason: ParseError.Reason) -> ParseError {
        ParseError(reason: reason, offset: self.index)
    }

    mutating func skipWhitespace() {
        while self.index < self.bytes.count {
            switch self.bytes[self.index] {
            case 0x20, 0x09, 0x0A, 0x0D: self.index += 1
            default: return
            }
        }
    }

    func peek() throws(ParseError) -> UInt8 {
        guard self.index < self.bytes.count else { throw self.fail(.unexpectedEnd) }
        return self.bytes[self.index]
    }

    mutating func value(depth: Int) throws(ParseError) -> JSONNode {
        switch try self.peek() {
        case UInt8(ascii: "{"): return try self.object(depth: depth + 1)
        case UInt8(ascii: "["): return try self.array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try self.string())
        case UInt8(ascii: "t"): try self.literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try self.literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try self.literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try self.number())
        case let byte: throw self.fail(.unexpectedByte(byte))
        }
    }

    mutating func literal(_ word: StaticString) throws(ParseError) {
        let count = word.utf8CodeUnitCount
        guard self.bytes.count - self.index >= count else { throw self.fail(.unexpectedEnd) }
        for offset in 0..<count where self.bytes[self.index + offset] != word.utf8Start[offset] {
            self.index += offset
            throw self.fail(.unexpectedByte(self.bytes[self.index]))
        }
        self.index += count
    }

    private mutating func object(depth: Int) throws(ParseError) -> JSONNode {
        guard depth <= JSONNode.maxDepth else { throw self.fail(.tooDeep) }
        self.index += 1  // {
        var members: [JSONNode.Member] = []
        self.skipWhitespace()
        if try self.peek() == UInt8(ascii: "}") {
            self.index += 1
            return .object(members)
        }
        while true {
            self.skipWhitespace()
            guard try self.peek() == UInt8(ascii: "\"") else { throw self.fail(.unexpectedByte(self.bytes[self.index])) }
            let key = try self.string()
            self.skipWhitespace()
            guard try self.peek() == UInt8(ascii: ":") else { throw self.fail(.unexpectedByte(self.bytes[self.index])) }
            self.index += 1
            self.skipWhitespace()
            members.append(JSONNode.Member(key: key, value: try self.value(depth: depth)))
            self.skipWhitespace()
            switch try self.peek() {
            case UInt8(ascii: ","): self.index += 1
            case UInt8(ascii: "}"): self.index += 1; return .object(members)
            case let byte: throw self.fail(.unexpectedByte(byte))
            }
        }
    }

    private mutating func array(depth: Int) throws(ParseError) -> JSONNode {
        guard depth <= JSONNode.maxDepth else { throw self.fail(.tooDeep) }
        self.index += 1  // [
        var items: [JSONNode] = []
        self.skipWhitespace()
        if try self.peek() == UInt8(ascii: "]") {
            self.index += 1
            return .array(items)
        }
        while true {
            self.skipWhitespace()
            items.append(try self.value(depth: depth))
            self.skipWhitespace()
            switch try self.peek() {
            case UInt8(ascii: ","): self.index += 1
            case UInt8(ascii: "]"): self.index += 1; return .array(items)
            case let byte: throw self.fail(.unexpectedByte(byte))
            }
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, returned as its text.
    mutating func number() throws(ParseError) -> String {
        let start = try self.numberRange()
        return String(decoding: UnsafeBufferPointer(rebasing: self.bytes[start..<self.index]), as: UTF8.self)
    }

    /// Checks a number (as `number()`) without keeping its text: returns where it starts; `index` is past it.
    /// Short plain integers, nearly all numbers in practice, cost no allocation.
    mutating func numberRange() throws(ParseError) -> Int {
        let start = self.index
        if self.bytes[self.index] == UInt8(ascii: "-") { self.index += 1 }
        guard self.index < self.bytes.count else { throw self.fail(.unexpectedEnd) }
        if self.bytes[self.index] == UInt8(ascii: "0") {
            self.index += 1
        } else {
            guard self.digits() > 0 else { throw self.fail(.invalidNumber) }
        }
        if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: ".") {
            self.index += 1
            guard self.digits() > 0 else { throw self.fail(.invalidNumber) }
        }
        if self.index < self.bytes.count, self.bytes[self.index] | 0x20 == UInt8(ascii: "e") {
            self.index += 1
            if self.index < self.bytes.count, self.bytes[self.index] == UInt8(ascii: "+") || self.bytes[self.index] == UInt8(ascii: "-") {
                self.index += 1
            }
            guard self.digits() > 0 else { throw self.fail(.invalidNumber) }
        }
        // Foundation refuses numbers a Double cannot hold (1e400); so do we. Short plain integers always fit.
        let span = UnsafeBufferPointer(rebasing: self.bytes[start..<self.index])
        if span.count > 15 || span.contains(where: { $0 == UInt8(ascii: ".") || $0 | 0x20 == UInt8(ascii: "e") }) {
            guard let value = Double(String(decoding: span, as: UTF8.self)), value.isFinite else {
                self.index = start
                throw self.fail(.invalidNumber)
            }
        }
        return start
    }

    private mutating func digits() -> Int {
        let start = self.index
        while self.index < self.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self.bytes[self.index]) {
            self.index += 1
        }
        return self.index - start
    }

    /// A string starting at its opening quote. Without escapes the bytes are taken in one piece.
    mutating func string() throws(ParseError) -> String {
        self.index += 1  // "
        let start = self.index
        while self.index < self.bytes.count {
            let byte = self.bytes[self.index]
            if byte == UInt8(ascii: "\"") {
                let text = try self.validated(start..<self.index)
                self.index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw self.fail(.controlCharacterInString) }
            self.index += 1
        }
        guard self.index < self.bytes.count else { throw self.fail(.unexpectedEnd) }
        // Escapes: build the text piece by piece.
        var out = try self.validated(start..<self.index)
        while true {
            let runStart = self.index
            while self.index < self.bytes.count {
                let byte = self.bytes[self.index]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw self.fail(.controlCharacterInString) }
                self.index += 1
            }
            out += try self.validated(runStart..<self.index)
            guard self.index < self.bytes.count else { throw self.fail(.unexpectedEnd) }
            if self.bytes[self.index] == UInt8(ascii: "\"") {
                self.index += 1
                return out
            }
            self.index += 1  // backslash
            guard self.index < self.bytes.count else { throw self.fail(.unexpectedEnd) }
            let escape = self.bytes[self.index]
            self.index += 1
            switch escape {
            case UInt8(ascii: "\""): out += "\""
            case UInt8(ascii: "\\"): out += "\\"
            case UInt8(ascii: "/"): out += "/"
            case UInt8(ascii: "b"): out += "\u{08}"
            case UInt8(ascii: "f"): out += "\u{0C}"
            case UInt8(ascii: "n"): out += "\n"
            case UInt8(ascii: "r"): out += "\r"
            case UInt8(ascii: "t"): out += "\t"
            case UInt8(ascii: "u"): out.unicodeScalars.append(try self.unicodeEscape())
            default:
                self.index -= 1
                throw self.fail(.invalidEscape)
            }
        }
    }

    /// After `\u`: four hex digits, and for a high surrogate the `\uDC00`-`\uDFFF` that must follow it.
    mutating func unicodeEscape() throws(ParseError) -> Unicode.Scalar {
        let first = try self.hex4()
        switch first {
        case 0xD800...0xDBFF:
            guard self.bytes.count - self.index >= 2, self.bytes[self.index] == UInt8(ascii: "\\"),
                self.bytes[self.index + 1] == UInt8(ascii: "u")
            else { throw self.fail(.invalidUnicode) }
            self.index += 2
            let second = try self.hex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw self.fail(.invalidUnicode) }
            let value = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            guard let scalar = Unicode.Scalar(value) else { throw self.fail(.invalidUnicode) }
            return scalar
        case 0xDC00...0xDFFF:
            throw self.fail(.invalidUnicode)
        default:
            guard let scalar = Unicode.Scalar(first) else { throw self.fail(.invalidUnicode) }
            return scalar
        }
    }

    private mutating func hex4() throws(ParseError) -> UInt32 {
        guard self.bytes.count - self.index >= 4 else { throw self.fail(.unexpectedEnd) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = self.bytes[self.index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw self.fail(.invalidEscape)
            }
            value = value << 4 | UInt32(digit)
            self.index += 1
        }
        return value
    }

    /// The bytes as a String, refusing invalid UTF-8.
    func validated(_ range: Range<Int>) throws(ParseError) -> String {
        let slice = UnsafeBufferPointer(rebasing: self.bytes[range])
        // ASCII needs no validation; the common case for model output is mostly ASCII.
        if slice.allSatisfy({ $0 < 0x80 }) {
            return String(decoding: slice, as: UTF8.self)
        }
        guard let text = String(validating: slice, as: UTF8.self) else {
            throw ParseError(reason: .invalidUnicode, offset: range.lowerBound)
        }
        return text
    }
}

// MARK: Writing

extension JSONNode {
    /// A number node for a finite `Double` (Swift's shortest round-trip text, which is valid JSON); nil for
    /// infinities and NaN, which JSON cannot express.
    public static func number(_ value: Double) -> JSONNode? {
        guard value.isFinite else { return nil }
        if value == value.rounded(), abs(value) < 1e15 { return .number(String(Int64(value))) }
        return .number(value.description)
    }

    public static func number(_ value: Int) -> JSONNode { .number(String(value)) }

    /// Compact JSON: members in their order, strings as `JSONStringWriter` writes them.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        self.write(to: &out)
        return out
    }

    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: out += "null".utf8
        case .bool(let value): out += (value ? "true" : "false").utf8
        case .number(let text): out += text.utf8
        case .string(let text): JSONStringWriter.append(text, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, member) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONStringWriter.append(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }
}
