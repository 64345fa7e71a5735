/// The JetStream API requests the relay fleet makes and the replies it reads (NATS JetStream's JSON API over
/// request/reply: `$JS.API.STREAM.*` subjects, and the publish acknowledgement). Pure: bytes in, values out,
/// so every reply shape is tested without a server, and a malformed reply is an error, never a trap.
public enum JetStreamWire {
    public struct APIError: Error, Equatable, Sendable, CustomStringConvertible {
        /// HTTP-like code (404, 503, …); 0 when the reply was not JSON of the expected shape.
        public var code: Int
        /// JetStream's own error number (10077 "maximum messages per subject exceeded", 10037 "no message found").
        public var errCode: Int
        public var text: String
        public var description: String { "JetStream \(self.code)/\(self.errCode): \(self.text)" }

        public init(code: Int, errCode: Int, text: String) {
            self.code = code
            self.errCode = errCode
            self.text = text
        }

        static func malformed(_ why: String) -> APIError { APIError(code: 0, errCode: 0, text: "malformed reply: " + why) }

        /// The stream refused a message because its subject holds `max_msgs_per_subject` (discard new per
        /// subject): the recipient's mailbox is full.
        public var isSubjectFull: Bool { self.errCode == 10077 }
        public var isNotFound: Bool { self.code == 404 }
    }

    /// The stream holding every mailbox. One subject per recipient; limits per subject and age are the
    /// server's to enforce, so they hold whichever edge publishes.
    public struct StreamConfig: Equatable, Sendable {
        public var name: String
        public var subjects: [String]
        public var maxMessagesPerSubject: Int
        public var maxAgeMs: UInt64
        public var maxMessageBytes: Int
        public var replicas: Int
        public init(name: String, subjects: [String], maxMessagesPerSubject: Int, maxAgeMs: UInt64,
                    maxMessageBytes: Int, replicas: Int)
        {
            self.name = name
            self.subjects = subjects
            self.maxMessagesPerSubject = maxMessagesPerSubject
            self.maxAgeMs = maxAgeMs
            self.maxMessageBytes = maxMessageBytes
            self.replicas = replicas
        }

        /// The body of `$JS.API.STREAM.CREATE.<name>` / `UPDATE`: file storage, limits retention, new messages
        /// refused per subject when it is full (RECEIPT 3, not the oldest frame silently dropped).
        public func json() -> [UInt8] {
            var o = JetStreamJSONObject()
            o.string("name", self.name)
            o.raw("subjects", "[" + self.subjects.map { JetStreamJSONObject.quoted($0) }.joined(separator: ",") + "]")
            o.string("retention", "limits")
            o.raw("max_consumers", "-1")
            o.raw("max_msgs", "-1")
            o.raw("max_bytes", "-1")
            o.raw("max_age", String(self.maxAgeMs &* 1_000_000))
            o.raw("max_msgs_per_subject", String(self.maxMessagesPerSubject))
            o.raw("max_msg_size", String(self.maxMessageBytes))
            o.string("discard", "new")
            o.raw("discard_new_per_subject", "true")
            o.string("storage", "file")
            o.raw("num_replicas", String(self.replicas))
            o.raw("duplicate_window", String(UInt64(120_000) * 1_000_000))
            return o.finish()
        }
    }

    /// `$JS.API.STREAM.MSG.GET.<stream>`: the first message on `subject` at or after `sequence`.
    public static func nextMessageRequest(from sequence: UInt64, subject: String) -> [UInt8] {
        var o = JetStreamJSONObject()
        o.raw("seq", String(sequence))
        o.string("next_by_subj", subject)
        return o.finish()
    }

    /// `$JS.API.STREAM.MSG.GET.<stream>`: the message at `sequence`.
    public static func messageRequest(sequence: UInt64) -> [UInt8] {
        var o = JetStreamJSONObject()
        o.raw("seq", String(sequence))
        return o.finish()
    }

    /// `$JS.API.STREAM.MSG.DELETE.<stream>` (no erase: overwriting on delete costs disk writes for frames that
    /// are ciphertext anyway).
    public static func deleteRequest(sequence: UInt64) -> [UInt8] {
        var o = JetStreamJSONObject()
        o.raw("seq", String(sequence))
        o.raw("no_erase", "true")
        return o.finish()
    }

    /// `$JS.API.STREAM.INFO.<stream>` asking for the per-subject counts of `subjectsFilter`.
    public static func infoRequest(subjectsFilter: String?) -> [UInt8] {
        guard let f = subjectsFilter else { return Array("{}".utf8) }
        var o = JetStreamJSONObject()
        o.string("subjects_filter", f)
        return o.finish()
    }

    /// A stored message as `STREAM.MSG.GET` returns it.
    public struct Message: Equatable, Sendable {
        public var subject: String
        public var sequence: UInt64
        public var data: [UInt8]
    }

    /// A publish acknowledgement: the stream sequence, or the refusal.
    public static func parsePublishAck(_ bytes: [UInt8]) -> Result<UInt64, APIError> {
        Self.parse(bytes).flatMap { root in
            guard let seq = Self.uint64(root["seq"]), seq > 0 else { return .failure(.malformed("no seq")) }
            return .success(seq)
        }
    }

    public static func parseMessage(_ bytes: [UInt8]) -> Result<Message, APIError> {
        Self.parse(bytes).flatMap { root in
            guard let m = root["message"], let subject = m["subject"]?.stringValue, let seq = Self.uint64(m["seq"])
            else { return .failure(.malformed("no message")) }
            // A message without a body has no "data" member.
            let text = m["data"]?.stringValue ?? ""
            guard let data = Base64.decode(text) else { return .failure(.malformed("data is not base64")) }
            return .success(Message(subject: subject, sequence: seq, data: data))
        }
    }

    /// The reply to `nextMessageRequest(from: sequence, subject: subject)`: the message, which must be on that
    /// subject, at or after `sequence`, and below the last sequence (the caller asks for the next one after it).
    /// A server breaking this would send the mailbox reader backwards or round in a loop: it is an error.
    public static func parseNextMessage(_ bytes: [UInt8], from sequence: UInt64, subject: String)
        -> Result<Message, APIError>
    {
        Self.parseMessage(bytes).flatMap { m in
            guard m.subject == subject else { return .failure(.malformed("message on \(m.subject), not \(subject)")) }
            guard m.sequence >= sequence, m.sequence < UInt64.max else {
                return .failure(.malformed("sequence \(m.sequence) asked from \(sequence)"))
            }
            return .success(m)
        }
    }

    /// A `success` reply (message delete).
    public static func parseSuccess(_ bytes: [UInt8]) -> Result<Void, APIError> {
        Self.parse(bytes).flatMap { root in
            root["success"] == .bool(true) ? .success(()) : .failure(.malformed("no success"))
        }
    }

    /// What `STREAM.INFO` says about the stream's state.
    public struct StreamState: Equatable, Sendable {
        public var messages: Int
        public var bytes: Int
        public var subjectCount: Int
        /// Per-subject counts, present when the request gave a subjects filter.
        public var subjects: [String: Int]
    }

    public static func parseStreamInfo(_ bytes: [UInt8]) -> Result<StreamState, APIError> {
        Self.parse(bytes).flatMap { root in
            // Counts are never negative: one that is would reach the READY frame and the metrics.
            guard let state = root["state"], let messages = state["messages"]?.intValue, messages >= 0,
                  let byteCount = state["bytes"]?.intValue, byteCount >= 0
            else { return .failure(.malformed("no state")) }
            var subjects: [String: Int] = [:]
            if case .object(let members) = state["subjects"] ?? .null {
                for m in members {
                    guard let n = m.value.intValue, n >= 0 else { return .failure(.malformed("subject count")) }
                    subjects[m.key] = n
                }
            }
            let subjectCount = state["num_subjects"]?.intValue ?? subjects.count
            guard subjectCount >= 0 else { return .failure(.malformed("num_subjects")) }
            return .success(StreamState(messages: messages, bytes: byteCount, subjectCount: subjectCount,
                                        subjects: subjects))
        }
    }

    /// The reply as JSON with its `error` member turned into a failure.
    public static func parse(_ bytes: [UInt8]) -> Result<JSONNode, APIError> {
        let node: JSONNode
        do {
            node = try bytes.withUnsafeBufferPointer { b throws(JSONNode.ParseError) in try JSONNode.parse(b) }
        } catch {
            return .failure(.malformed("not JSON (\(error.reason) at \(error.offset))"))
        }
        guard node.isObject else { return .failure(.malformed("not an object")) }
        if let e = node["error"] {
            return .failure(APIError(code: e["code"]?.intValue ?? 0, errCode: e["err_code"]?.intValue ?? 0,
                                     text: e["description"]?.stringValue ?? "no description"))
        }
        return .success(node)
    }

    static func uint64(_ node: JSONNode?) -> UInt64? {
        if case .number(let text) = node ?? .null { return UInt64(text) }
        return nil
    }
}

/// Writes one flat JSON object, members in call order.
struct JetStreamJSONObject {
    private var out: [UInt8] = [UInt8(ascii: "{")]

    mutating func string(_ key: String, _ value: String) { self.raw(key, Self.quoted(value)) }

    mutating func raw(_ key: String, _ json: String) {
        if self.out.count > 1 { self.out.append(UInt8(ascii: ",")) }
        JSONStringWriter.append(key, to: &self.out)
        self.out.append(UInt8(ascii: ":"))
        self.out.append(contentsOf: json.utf8)
    }

    static func quoted(_ s: String) -> String {
        var b: [UInt8] = []
        JSONStringWriter.append(s, to: &b)
        return String(decoding: b, as: UTF8.self)
    }

    mutating func finish() -> [UInt8] {
        self.out.append(UInt8(ascii: "}"))
        return self.out
    }
}
