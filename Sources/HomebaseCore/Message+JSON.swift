import FoundationEssentials

/// Why a plaintext is not a protocol-v1 message. A receiver drops such a message (counted as
/// `malformed_plaintext`); a host answering a request with a usable `id` may answer `bad_request`.
public enum MessageDecodingError: Error, Equatable, Sendable {
    /// Not a JSON object with a string `type`.
    case notAMessage
    /// The `type` is known but a required field is missing or has the wrong JSON type.
    case invalidFields(type: String)
    /// A base64 field does not decode.
    case invalidBase64(field: String)
}

extension Message {
    /// Decodes an unpadded or padded plaintext (trailing whitespace is accepted).
    public init(json bytes: some Collection<UInt8>) throws(MessageDecodingError) {
        try self.init(anyJSON: bytes)
    }

    /// `init(json:)` for the unpadded slice a receiver opens (`EnvelopeReceiver`): not generic, so a caller in
    /// another module runs code specialized here, where the generic entry ran through the runtime's witnesses.
    public init(json bytes: ArraySlice<UInt8>) throws(MessageDecodingError) {
        try self.init(anyJSON: bytes)
    }

    private init(anyJSON bytes: some Collection<UInt8>) throws(MessageDecodingError) {
        // infer.chunk, one per coalesced read of every stream a device receives, is read in one pass; anything
        // the fast path is not sure of (another type, a repeated or mistyped field) takes the general path.
        // Tried only for text ending as our writer ends a chunk (keys sorted: `"type":"infer.chunk"}`), so other
        // messages (an infer.request of up to 1 MiB) are not parsed twice; a chunk written otherwise still decodes,
        // by the general path.
        // infer.request, one per answer a Homebase serves, likewise: JSONDecoder read it twice (type probe, then
        // the whole), the largest cost of a short answer on the relay link's thread.
        let fast = bytes.withContiguousStorageIfAvailable { buffer -> Message? in
            if Self.endsLike(Self.chunkEnding, buffer) { return Self.fastChunk(buffer).map { .inferChunk($0) } }
            if Self.endsLike(Self.requestEnding, buffer) { return Self.fastRequest(buffer).map { .inferRequest($0) } }
            return nil
        } ?? nil
        if let fast {
            self = fast
            return
        }
        try self.init(generalJSON: bytes)
    }

    private static let chunkEnding = Array(#""type":"infer.chunk"}"#.utf8)
    private static let requestEnding = Array(#""type":"infer.request"}"#.utf8)

    static func endsLikeAChunk(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { Self.endsLike(Self.chunkEnding, bytes) }

    static func endsLikeARequest(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { Self.endsLike(Self.requestEnding, bytes) }

    /// Whether the text, trailing whitespace (padding) aside, ends with `ending`: how our writer, keys sorted,
    /// ends that message.
    private static func endsLike(_ ending: [UInt8], _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var end = bytes.count
        while end > 0, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[end - 1]) { end -= 1 }
        return end >= ending.count && bytes[(end - ending.count)..<end].elementsEqual(ending)
    }

    /// `infer.request` in the shape devices send it — `id`, `model`, `messages` of `role` and `content`, `options`
    /// absent, null or empty, `conversation` and `tools` absent or null, other keys skipped, any order — or nil
    /// for anything else (a repeated or mistyped field, options or a conversation to read, tools), which the
    /// general decoder then answers.
    static func fastRequest(_ bytes: UnsafeBufferPointer<UInt8>) -> InferRequest? {
        var fields: (type: String?, id: String?, model: String?, messages: [ChatMessage]?) = (nil, nil, nil, nil)
        var seen = 0
        var unsure = false
        func mark(_ bit: Int) {
            unsure = unsure || seen & bit != 0
            seen |= bit
        }
        let read = try? JSONReader.read(bytes) { (reader: inout JSONReader) throws(JSONReader.ParseError) -> Bool in
            try reader.object { (key, reader) throws(JSONReader.ParseError) in
                if key.matches("type") {
                    mark(1)
                    fields.type = try reader.stringOrSkip()
                } else if key.matches("id") {
                    mark(2)
                    fields.id = try reader.stringOrSkip()
                } else if key.matches("model") {
                    mark(4)
                    fields.model = try reader.stringOrSkip()
                } else if key.matches("messages") {
                    mark(8)
                    var messages: [ChatMessage] = []
                    let isArray = try reader.array { (_, reader) throws(JSONReader.ParseError) in
                        var role: String?
                        var content: String?
                        var keys = 0
                        let isObject = try reader.object { (key, reader) throws(JSONReader.ParseError) in
                            if key.matches("role") {
                                unsure = unsure || keys & 1 != 0
                                keys |= 1
                                role = try reader.stringOrSkip()
                            } else if key.matches("content") {
                                unsure = unsure || keys & 2 != 0
                                keys |= 2
                                content = try reader.stringOrSkip()
                            } else {
                                try reader.skip()
                            }
                        }
                        guard isObject, let role, let content else {
                            unsure = true
                            return
                        }
                        messages.append(ChatMessage(role: role, content: content))
                    }
                    fields.messages = isArray ? messages : nil
                } else if key.matches("options") {
                    mark(16)
                    // Absent, null or `{}` are the defaults; any option is the general decoder's to read.
                    if try !reader.null() {
                        var empty = true
                        let isObject = try reader.object { (_, reader) throws(JSONReader.ParseError) in
                            empty = false
                            try reader.skip()
                        }
                        unsure = unsure || !isObject || !empty
                    }
                } else if let bit = key.matches("tools") ? 32 : key.matches("conversation") ? 64 : nil {
                    // Null is the default; anything else is the general decoder's to read.
                    mark(bit)
                    if try !reader.null() {
                        unsure = true
                        try reader.skip()
                    }
                } else {
                    try reader.skip()
                }
            }
        }
        guard read == true, !unsure, fields.type == MessageType.inferRequest, let id = fields.id,
            let model = fields.model, let messages = fields.messages
        else { return nil }
        return InferRequest(id: id, model: model, messages: messages)
    }

    /// `{"type":"infer.chunk","id":…,"seq":…,"text":…}` (any key order, other keys skipped), or nil: for a
    /// repeated field, a field of another JSON type, a `seq` not written as an integer, or another message.
    static func fastChunk(_ bytes: UnsafeBufferPointer<UInt8>) -> InferChunk? {
        var fields: (type: String?, id: String?, seq: Int?, text: String?, reasoning: String?) = (nil, nil, nil, nil, nil)
        var seen = 0
        var unsure = false
        /// A field, marking it seen: seen twice, or nil (another type, or a number that is no integer), is unsure.
        func field<T>(_ bit: Int, _ value: T?) -> T? {
            unsure = unsure || seen & bit != 0 || value == nil
            seen |= bit
            return value
        }
        let read = try? JSONReader.read(bytes) { (reader: inout JSONReader) throws(JSONReader.ParseError) -> Bool in
            try reader.object { (key, reader) throws(JSONReader.ParseError) in
                if key.matches("type") {
                    fields.type = field(1, try reader.stringOrSkip())
                } else if key.matches("id") {
                    fields.id = field(2, try reader.stringOrSkip())
                } else if key.matches("text") {
                    fields.text = field(4, try reader.stringOrSkip())
                } else if key.matches("seq") {
                    fields.seq = field(8, try reader.integerOrSkip())
                } else if key.matches("reasoning") {
                    fields.reasoning = field(16, try reader.stringOrSkip())
                } else {
                    try reader.skip()
                }
            }
        }
        guard read == true, !unsure, fields.type == MessageType.inferChunk, let id = fields.id, let seq = fields.seq,
            let text = fields.text
        else { return nil }
        return InferChunk(id: id, seq: seq, text: text, reasoning: fields.reasoning)
    }

    /// Largest plaintext of a message type with no large field (a name, a reason, an id): anything longer is
    /// refused as `invalidFields` without being decoded.
    static let maxSmallMessageBytes = 16 * 1024

    /// Types whose fields are all small (`maxSmallMessageBytes`); the others carry a conversation, a chunk of
    /// text or a signed payload.
    static let smallTypes: Set<String> = [
        MessageType.inferAccept, MessageType.inferQueued, MessageType.inferDone, MessageType.inferError, MessageType.inferCancel,
        MessageType.advertRequest, MessageType.pairRequest, MessageType.pairReject, MessageType.modelChoice,
        MessageType.contactJoin, MessageType.contactRevoke, MessageType.contactLeave,
    ]

    /// The top-level `type` of a JSON object, read in one pass that skips every other value without building
    /// it; nil unless the text is one JSON object with exactly one `type`, a string.
    static func typeField(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var type: String?
        var count = 0
        let isObject = try? JSONReader.read(bytes) { (reader: inout JSONReader) throws(JSONReader.ParseError) -> Bool in
            try reader.object { (key, reader) throws(JSONReader.ParseError) in
                if key.matches("type") {
                    count += 1
                    type = try reader.stringOrSkip()
                } else {
                    try reader.skip()
                }
            }
        }
        return isObject == true && count == 1 ? type : nil
    }

    /// The general decoder (JSONDecoder), for every type. The type is read first by `typeField`: JSONDecoder
    /// built a map of the whole text to find it, and then another for the fields, 25 ms for 256 KiB of numbers
    /// in a message a peer may send at will (issue 23); a small type that is not small is refused unread.
    init(generalJSON bytes: some Collection<UInt8>) throws(MessageDecodingError) {
        let typeField = bytes.withContiguousStorageIfAvailable { Self.typeField($0) }
            ?? Array(bytes).withUnsafeBufferPointer { Self.typeField($0) }
        guard let type = typeField else { throw .notAMessage }
        if Self.smallTypes.contains(type), bytes.count > Self.maxSmallMessageBytes { throw .invalidFields(type: type) }
        let data = Data(bytes)
        let decoder = JSONDecoder()
        func decode<T: Decodable>(_: T.Type) throws(MessageDecodingError) -> T {
            do { return try decoder.decode(T.self, from: data) } catch { throw .invalidFields(type: type) }
        }
        switch type {
        case MessageType.inferRequest:
            let w = try decode(InferRequestWire.self)
            self = .inferRequest(InferRequest(
                id: w.id, model: w.model, messages: w.messages, options: w.options ?? InferOptions(),
                conversation: w.conversation, hasTools: w.tools?.isEmpty == false))
        case MessageType.inferAccept: self = .inferAccept(try decode(InferAccept.self))
        case MessageType.inferQueued: self = .inferQueued(try decode(InferQueued.self))
        case MessageType.inferChunk: self = .inferChunk(try decode(InferChunk.self))
        case MessageType.inferDone: self = .inferDone(try decode(InferDone.self))
        case MessageType.inferError: self = .inferError(try decode(InferError.self))
        case MessageType.inferCancel: self = .inferCancel(id: try decode(IDWire.self).id)
        case MessageType.advert: self = .advert(try Self.signedBlob(try decode(SignedWire.self)))
        case MessageType.advertRequest: self = .advertRequest
        case MessageType.pairRequest:
            let w = try decode(PairRequestWire.self)
            self = .pairRequest(secret: w.secret, name: w.name)
        case MessageType.pairAccept:
            self = .pairAccept(roster: try Self.signedBlob(try decode(PairAcceptWire.self).roster))
        case MessageType.pairReject: self = .pairReject(reason: try decode(ReasonWire.self).reason)
        case MessageType.roster: self = .roster(try Self.signedBlob(try decode(SignedWire.self)))
        case MessageType.modelChoice: self = .modelChoice(try decode(ModelChoice.self))
        case MessageType.contactJoin: self = .contactJoin(name: try decode(NameWire.self).name)
        case MessageType.contactGrant: self = .contactGrant(try Self.signedBlob(try decode(SignedWire.self)))
        case MessageType.contactRevoke: self = .contactRevoke(reason: try decode(ReasonWire.self).reason)
        case MessageType.contactLeave: self = .contactLeave
        default: self = .unknown(type: type)
        }
    }

    /// The message as compact JSON (unpadded; the sender pads with `EnvelopePadding.pad`).
    public func jsonBytes() -> [UInt8] {
        // The streamed messages (accept, chunk, done) are written by hand below; only the others need an
        // encoder, and making one per chunk was the largest cost of sealing it.
        func enc<T: Encodable>(_ value: T) -> [UInt8] {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            // Encoding our own value types cannot fail: every field is a string, number, bool or array of them.
            do { return Array(try encoder.encode(value)) } catch { preconditionFailure("JSON encoding failed: \(error)") }
        }
        switch self {
        case .inferAccept, .inferChunk, .inferDone:
            var out: [UInt8] = []
            out.reserveCapacity(self.jsonCapacityHint)
            self.appendJSON(to: &out)
            return out
        case .inferRequest(let r):
            return enc(InferRequestWire(
                type: self.type, id: r.id, model: r.model, messages: r.messages, options: r.options,
                conversation: r.conversation, tools: nil))
        case .inferError(let e): return enc(Typed(type: self.type, body: e))
        case .inferQueued(let q): return enc(Typed(type: self.type, body: q))
        case .inferCancel(let id): return enc(IDWire(type: self.type, id: id))
        case .advert(let b), .roster(let b), .contactGrant(let b): return enc(SignedWire(type: self.type, blob: b))
        case .advertRequest, .contactLeave: return enc(TypeProbe(type: self.type))
        case .pairRequest(let secret, let name):
            return enc(PairRequestWire(type: self.type, secret: secret, name: name))
        case .pairAccept(let roster):
            return enc(PairAcceptWire(type: self.type, roster: SignedWire(type: nil, blob: roster)))
        case .pairReject(let reason), .contactRevoke(let reason): return enc(ReasonWire(type: self.type, reason: reason))
        case .modelChoice(let m): return enc(Typed(type: self.type, body: m))
        case .contactJoin(let name): return enc(NameWire(type: self.type, name: name))
        case .unknown(let t): return enc(TypeProbe(type: t))
        }
    }

    /// `jsonBytes()` appended to `out`, for a sender that builds a whole frame in one buffer. The streamed
    /// messages (accept, chunk, done) are written straight into it by hand, in the encoder's sorted key order.
    public func appendJSON(to out: inout [UInt8]) {
        switch self {
        case .inferAccept(let accept):
            JSONObjectWriter.write(appendingTo: &out) { w in
                w.string("id", accept.id)
                w.string("model", accept.model)
                w.string("type", MessageType.inferAccept)
            }
        case .inferChunk(let chunk):
            JSONObjectWriter.write(appendingTo: &out) { w in
                w.string("id", chunk.id)
                if let reasoning = chunk.reasoning { w.string("reasoning", reasoning) }
                w.int("seq", chunk.seq)
                w.string("text", chunk.text)
                w.string("type", MessageType.inferChunk)
            }
        case .inferDone(let done):
            JSONObjectWriter.write(appendingTo: &out) { w in
                w.int("chunks", done.chunks)
                w.string("finish_reason", done.finishReason)
                w.string("id", done.id)
                w.string("type", MessageType.inferDone)
                w.object("usage") { u in
                    u.int("completion_tokens", done.usage.completionTokens)
                    u.int("prompt_tokens", done.usage.promptTokens)
                }
            }
        default:
            out += self.jsonBytes()
        }
    }

    /// About how many bytes `jsonBytes()` takes, for reserving a buffer: for the streamed messages at least
    /// their size (fixed text, strings, and 20 bytes for each number), short only by strings' escapes; a
    /// guess for the others.
    public var jsonCapacityHint: Int {
        switch self {
        case .inferAccept(let a): 48 + a.id.utf8.count + a.model.utf8.count
        case .inferChunk(let c): 48 + 20 + c.id.utf8.count + c.text.utf8.count + (c.reasoning.map { 16 + $0.utf8.count } ?? 0)
        case .inferDone(let d): 110 + 3 * 20 + d.id.utf8.count + d.finishReason.utf8.count
        default: 256
        }
    }

    /// The padded plaintext a sender seals.
    public func paddedPlaintext() -> [UInt8] { EnvelopePadding.pad(self.jsonBytes()) }

    private static func signedBlob(_ w: SignedWire) throws(MessageDecodingError) -> SignedBlob {
        guard let p = Data(base64Encoded: w.payload) else { throw .invalidBase64(field: "payload") }
        guard let s = Data(base64Encoded: w.sig) else { throw .invalidBase64(field: "sig") }
        return SignedBlob(payload: Array(p), signature: Array(s))
    }
}

// MARK: Wire shapes

private struct TypeProbe: Codable { var type: String }

/// Encodes `{"type": …}` merged with the fields of `body`.
private struct Typed<Body: Encodable>: Encodable {
    var type: String
    var body: Body
    enum K: String, CodingKey { case type }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: K.self)
        try c.encode(self.type, forKey: .type)
        try self.body.encode(to: encoder)
    }
}

private struct IDWire: Codable {
    var type: String?
    var id: String
}

private struct ReasonWire: Codable {
    var type: String?
    var reason: String
}

private struct NameWire: Codable {
    var type: String?
    var name: String
}

private struct PairRequestWire: Codable {
    var type: String?
    var secret: String
    var name: String
}

private struct PairAcceptWire: Codable {
    var type: String?
    var roster: SignedWire
}

private struct SignedWire: Codable {
    var type: String?
    var payload: String
    var sig: String
    init(type: String?, blob: SignedBlob) {
        self.type = type
        self.payload = Data(blob.payload).base64EncodedString()
        self.sig = Data(blob.signature).base64EncodedString()
    }
}

/// Any JSON value, so a `tools` field of any shape can be detected without being interpreted.
private enum AnyJSON: Codable {
    case null, bool(Bool), number(Double), string(String), array([AnyJSON]), object([String: AnyJSON])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([AnyJSON].self) { self = .array(a) }
        else { self = .object(try c.decode([String: AnyJSON].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n): try c.encode(n)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    var isEmpty: Bool {
        switch self {
        case .null: true
        case .array(let a): a.isEmpty
        case .object(let o): o.isEmpty
        default: false
        }
    }
}

private struct InferRequestWire: Codable {
    var type: String?
    var id: String
    var model: String
    var messages: [ChatMessage]
    var options: InferOptions?
    var conversation: ConversationRef?
    var tools: AnyJSON?
}

/// A JSON object written member by member, in the order given (callers give keys sorted, as JSONEncoder's
/// `.sortedKeys` writes them); keys are static and need no escaping, strings go through `JSONStringWriter`.
struct JSONObjectWriter {
    private var bytes: [UInt8]
    /// Where the object starts in `bytes` (after whatever the buffer held before).
    private let start: Int

    private init(bytes: [UInt8], start: Int) {
        self.bytes = bytes
        self.start = start
    }

    /// Writes one object, its members from `body`, at the end of `out`. The buffer moves into the writer and
    /// back, so appending never copies it.
    static func write(appendingTo out: inout [UInt8], _ body: (inout JSONObjectWriter) -> Void) {
        var w = JSONObjectWriter(bytes: [], start: out.count)
        swap(&w.bytes, &out)
        body(&w)
        w.close()
        swap(&w.bytes, &out)
    }

    mutating func string(_ key: StaticString, _ value: String) {
        self.key(key)
        JSONStringWriter.append(value, to: &self.bytes)
    }

    mutating func int(_ key: StaticString, _ value: Int) {
        self.key(key)
        self.bytes.append(contentsOf: String(value).utf8)
    }

    /// A member whose value is an object, its members from `body`.
    mutating func object(_ key: StaticString, _ body: (inout JSONObjectWriter) -> Void) {
        self.key(key)
        Self.write(appendingTo: &self.bytes, body)
    }

    private mutating func close() {
        if self.bytes.count == self.start { self.bytes.append(UInt8(ascii: "{")) }
        self.bytes.append(UInt8(ascii: "}"))
    }

    /// `{"key":` for the first member, `,"key":` for the others.
    private mutating func key(_ key: StaticString) {
        self.bytes.append(self.bytes.count == self.start ? UInt8(ascii: "{") : UInt8(ascii: ","))
        self.bytes.append(UInt8(ascii: "\""))
        self.bytes.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        self.bytes.append(UInt8(ascii: "\""))
        self.bytes.append(UInt8(ascii: ":"))
    }
}
