import Foundation
import HomebaseCore

/// The JSON reader (`JSONNode.parse` and the tree-less `JSONReader`), alone and against Foundation's
/// `JSONSerialization`. Input: the JSON text itself.
enum JSONHarness {
    static let readerTarget = FuzzTarget(
        "json-reader", "JSONReader against JSONNode: same verdict and error, same values; serialize→parse",
        seeds: Self.seeds, run: Self.runReader)

    static let differentialTarget = FuzzTarget(
        "json-differential", "JSONNode against Foundation's JSONSerialization: same verdict, same values",
        seeds: Self.seeds, run: Self.runDifferential)

    // MARK: JSONReader against JSONNode

    /// A JSON value with object keys left out (`JSONReader` compares keys, it does not hand them out).
    indirect enum Shape: Equatable {
        case null, bool(Bool), number(String), string(String), array([Shape]), object([Shape])

        init(_ node: JSONNode) {
            switch node {
            case .null: self = .null
            case .bool(let b): self = .bool(b)
            case .number(let text): self = .number(text)
            case .string(let s): self = .string(s)
            case .array(let items): self = .array(items.map(Shape.init))
            case .object(let members): self = .object(members.map { Shape($0.value) })
            }
        }
    }

    /// `JSONNode.parse`, `JSONReader` skipping the value and `JSONReader` reading all of it must agree:
    /// the same verdict, the same error (reason and offset), the same values; `integer()` is the number's
    /// text as an `Int` exactly when that fits. An accepted text, serialized, parses to the same tree.
    static func runReader(_ input: [UInt8]) throws(InvariantViolation) {
        let node: Result<JSONNode, JSONNode.ParseError> = Self.parseNode(input)
        let skipped: Result<Void, JSONReader.ParseError> = input.withUnsafeBufferPointer { bytes in
            Result { () throws(JSONReader.ParseError) in try JSONReader.read(bytes) { (r) throws(JSONReader.ParseError) in try r.skip() } }
        }
        var integerMismatch: String?
        let walked: Result<Shape, JSONReader.ParseError> = input.withUnsafeBufferPointer { bytes in
            Result { () throws(JSONReader.ParseError) in
                try JSONReader.read(bytes) { (r) throws(JSONReader.ParseError) in
                    try Self.walk(&r, bytes, integerMismatch: &integerMismatch)
                }
            }
        }
        if let integerMismatch { throw InvariantViolation(integerMismatch) }
        switch (node, skipped, walked) {
        case (.success(let tree), .success, .success(let shape)):
            try checkEqual(shape, Shape(tree), "JSONReader reads other values than JSONNode")
            let text = tree.serialized()
            let again = Self.parseNode(text)
            try checkEqual(again, .success(tree), "serialized JSON parses differently")
        case (.failure(let a), .failure(let b), .failure(let c)):
            try checkEqual(b, a, "JSONReader.skip fails otherwise than JSONNode")
            try checkEqual(c, a, "a JSONReader walk fails otherwise than JSONNode")
        default:
            throw InvariantViolation("verdicts differ: JSONNode \(node), skip \(skipped), walk \(walked)")
        }
    }

    static func parseNode(_ bytes: [UInt8]) -> Result<JSONNode, JSONNode.ParseError> {
        bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONNode.ParseError) in try JSONNode.parse(buffer) }
        }
    }

    /// Reads the next value whole with `JSONReader`'s typed calls.
    static func walk(
        _ r: inout JSONReader, _ bytes: UnsafeBufferPointer<UInt8>, integerMismatch: inout String?
    ) throws(JSONReader.ParseError) -> Shape {
        switch try r.kind() {
        case .null:
            _ = try r.null()
            return .null
        case .bool:
            let start = r.offset
            try r.skip()
            return .bool(bytes[start] == UInt8(ascii: "t"))
        case .number:
            let start = r.offset
            let integer = try r.integer()
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<r.offset]), as: UTF8.self)
            if integer != Int(text) { integerMismatch = "integer() of \(text) is \(String(describing: integer))" }
            return .number(text)
        case .string:
            return .string(try r.string())
        case .array:
            var items: [Shape] = []
            try r.array { (_, r) throws(JSONReader.ParseError) in
                items.append(try Self.walk(&r, bytes, integerMismatch: &integerMismatch))
            }
            return .array(items)
        case .object:
            var values: [Shape] = []
            try r.object { (_, r) throws(JSONReader.ParseError) in
                values.append(try Self.walk(&r, bytes, integerMismatch: &integerMismatch))
            }
            return .object(values)
        }
    }

    // MARK: JSONNode against JSONSerialization

    /// Where our reader and Foundation's may disagree, on purpose. Each rule says which side the harness
    /// trusts; everything else must agree exactly.
    enum Deliberate {
        /// RFC 8259 §8.1: JSON exchanged between systems is UTF-8 without a byte order mark. Foundation also
        /// guesses UTF-16 and UTF-32 (from NUL bytes at the start, or a BOM); we read UTF-8 only, so such a
        /// text is refused by us, whatever Foundation makes of it.
        static func isOtherEncoding(_ bytes: [UInt8]) -> Bool {
            bytes.prefix(4).contains(0) || bytes.starts(with: [0xEF, 0xBB, 0xBF]) || bytes.starts(with: [0xFE, 0xFF])
                || bytes.starts(with: [0xFF, 0xFE])
        }

        /// Our depth limit (`JSONNode.maxDepth`, 64) is far below Foundation's: hostile nesting is refused
        /// before it costs stack. A text we refuse as too deep may be accepted by Foundation.
        static func isTooDeep(_ error: JSONNode.ParseError) -> Bool { error.reason == .tooDeep }

        /// Foundation reads a long number through `Decimal` (38 significant digits), whose conversion to `Double`
        /// may differ from the correctly rounded value of the text in the last bits; we keep the text, and
        /// `Double(text)` is correctly rounded. The two must agree to 1e-12, relatively.
        static func sameNumber(_ text: String, _ theirs: Double) -> Bool {
            guard let ours = Double(text) else { return false }
            return ours == theirs || abs(ours - theirs) <= 1e-12 * max(abs(ours), abs(theirs))
        }

        /// Foundation accepts a comma before a closing `}` or `]` (`{"a":1,}`); RFC 8259 does not, and neither
        /// do we. Returns the text without such commas (outside strings), or nil if it has none: that text
        /// must then be one we accept, with Foundation's values.
        static func withoutTrailingCommas(_ bytes: [UInt8]) -> [UInt8]? {
            var out: [UInt8] = []
            var inString = false
            var escaped = false
            var removed = false
            for (i, byte) in bytes.enumerated() {
                if inString {
                    if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") {
                        inString = false
                    }
                } else if byte == UInt8(ascii: "\"") {
                    inString = true
                } else if byte == UInt8(ascii: ",") {
                    let next = bytes[(i + 1)...].first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
                    if next == UInt8(ascii: "}") || next == UInt8(ascii: "]") {
                        removed = true
                        continue
                    }
                }
                out.append(byte)
            }
            return removed ? out : nil
        }
    }

    static func runDifferential(_ input: [UInt8]) throws(InvariantViolation) {
        let ours = Self.parseNode(input)
        let theirs = try? JSONSerialization.jsonObject(with: Data(input), options: [.fragmentsAllowed])
        if Deliberate.isOtherEncoding(input) {
            try check(ours.isFailure, "accepted a text that is not plain UTF-8: \(ours)")
            return
        }
        switch (ours, theirs) {
        case (.success(let node), let value?):
            try Self.compare(node, value, path: "$")
        case (.failure, nil):
            break
        case (.failure(let error), let value?):
            if Deliberate.isTooDeep(error) { return }
            if let stripped = Deliberate.withoutTrailingCommas(input), case .success(let node) = Self.parseNode(stripped) {
                try Self.compare(node, value, path: "$")
                return
            }
            throw InvariantViolation("we refuse (\(error)) what Foundation accepts")
        case (.success(let node), nil):
            throw InvariantViolation("we accept what Foundation refuses: \(node)")
        }
    }

    /// Throws where Foundation's value differs from ours.
    static func compare(_ node: JSONNode, _ value: Any, path: String) throws(InvariantViolation) {
        switch node {
        case .null:
            try check(value is NSNull, "\(path): null against \(value)")
        case .bool(let b):
            try check((value as? NSNumber)?.boolValue == b && !(value is String), "\(path): \(b) against \(value)")
        case .number(let text):
            guard let number = value as? NSNumber else { throw InvariantViolation("\(path): \(text) against \(value)") }
            // We keep the text; Foundation reads a number. An integer that fits in 64 bits must be read exactly;
            // others are the same number up to Foundation's precision (Deliberate.sameNumber).
            if let exact = Int64(text) {
                try check(number.int64Value == exact, "\(path): \(text) read as \(number) (int64 \(number.int64Value))")
            } else {
                try check(Deliberate.sameNumber(text, number.doubleValue), "\(path): \(text) read as \(number)")
            }
        case .string(let s):
            guard let theirs = value as? String else { throw InvariantViolation("\(path): string against \(value)") }
            try check(Array(theirs.unicodeScalars) == Array(s.unicodeScalars), "\(path): \(s.debugDescription) against \(theirs.debugDescription)")
        case .array(let items):
            guard let theirs = value as? [Any], theirs.count == items.count else {
                throw InvariantViolation("\(path): array of \(items.count) against \(value)")
            }
            for (i, item) in items.enumerated() { try Self.compare(item, theirs[i], path: "\(path)[\(i)]") }
        case .object(let members):
            guard let theirs = value as? [String: Any] else { throw InvariantViolation("\(path): object against \(value)") }
            // A repeated key: the last one counts, on both sides (and `String` keys collapse canonically
            // equivalent spellings on both sides alike).
            var last: [String: JSONNode] = [:]
            for member in members { last[member.key] = member.value }
            try check(last.count == theirs.count, "\(path): \(last.count) distinct keys against \(theirs.count)")
            for (key, mine) in last {
                guard let other = theirs[key] else { throw InvariantViolation("\(path): key \(key.debugDescription) missing") }
                try Self.compare(mine, other, path: "\(path).\(key)")
            }
        }
    }

    static func seeds() -> [[UInt8]] {
        var out = FixtureFiles.textValues("json", in: "message-vectors.json")
        out += FixtureFiles.textValues("message", in: "signed-payload-vectors.json")
        out += FixtureFiles.hexValues("payload", in: "signed-payload-vectors.json")
        out.append(FixtureFiles.bytes("ollama/api-tags.json.txt"))
        out.append(FixtureFiles.bytes("ollama/v1-error-not-found.txt"))
        let sse = FixtureFiles.bytes("ollama/v1-stream-v0.32.6.txt")
        for line in sse.split(separator: UInt8(ascii: "\n")) where line.starts(with: Array("data: {".utf8)) {
            out.append(Array(line.dropFirst(6)))
        }
        for text in [
            #"[-0, 0.5e-3, 1E+2, 123456789012345678901234567890, -9223372036854775808, 9223372036854775807, 1e308]"#,
            #"["\u00e9e\u0301", "\ud83d\ude00", "\/\b\f\n\r\t\"\\", "\u0000"]"#,
            #"{"a":1,"a":2,"é":3,"é":4}"#, " \t\r\n true ", "null", #""""#, "[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]",
        ] {
            out.append(Array(text.utf8))
        }
        return out
    }
}

extension Result {
    /// `Result.init(catching:)` for a typed-throwing body.
    init(_ body: () throws(Failure) -> Success) {
        do { self = .success(try body()) } catch { self = .failure(error) }
    }

    var isFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}
