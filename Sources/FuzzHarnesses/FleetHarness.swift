import HomebaseCore

/// What relay edges read from NATS when the relay runs as a fleet: the edges' own messages (`FleetMessage`,
/// `FleetStoredFrame`, mailbox subjects) and the JetStream API's JSON replies (`JetStreamWire`). Another edge,
/// or a server, sends these bytes; a broken or hostile one must get an error, never a trap or a loop.
///
/// Input: `mode || bytes`. Mode bits 0-1 pick what `bytes` is:
/// - 0: a message on a key's subject. It decodes exactly when it is the canonical encoding of what it
///   decodes to (`encoded()` gives the bytes back), at any slice offset; a claim has a 1-64 byte UTF-8 edge.
///   With bit 2, the bytes are two claims cut at a point from the input: their verdicts on each other agree
///   (one yields and the other reasserts, or they are the same claim).
/// - 1: a frame from the mailbox stream: it decodes exactly when it holds the 40-byte header, and encodes back.
/// - 2: a subject: a mailbox subject names a key exactly when it is `hb.mbox.` and 64 hex digits.
/// - 3: a JetStream API reply, read as each of the replies the mailbox reads. An `error` member fails every
///   reader alike; an accepted value says the same thing written again; a next message asked for from a
///   sequence (bits 2-7 of the mode and the first byte, 0 to 16,383) is on the asked subject, at or after the
///   sequence, and below the last; counts are not negative.
enum FleetHarness {
    static let target = FuzzTarget(
        "fleet-wire", "fleet edge messages, stored frames, subjects and JetStream replies: canonical, no traps",
        seeds: Self.seeds, run: Self.run)

    static let subject = "hb.mbox." + String(repeating: "ab", count: 32)

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard let mode = input.first else { return }
        let bytes = Array(input.dropFirst())
        switch mode & 3 {
        case 0 where mode & 4 != 0: try Self.claims(bytes)
        case 0: try Self.message(bytes)
        case 1: try Self.storedFrame(bytes)
        case 2: try Self.mailboxSubject(bytes)
        default: try Self.jetStreamReply(bytes, mode: mode)
        }
    }

    static func message(_ bytes: [UInt8]) throws(InvariantViolation) {
        let result = Result { () throws(FleetMessage.DecodeError) in try FleetMessage.decode(bytes[...]) }
        // The same bytes inside a larger buffer: slice indices must not leak into the verdict.
        let padded = [0xEE, 0xEE, 0xEE] + bytes + [0xEE]
        let shifted = Result { () throws(FleetMessage.DecodeError) in
            try FleetMessage.decode(padded[3..<(padded.count - 1)])
        }
        try checkEqual(shifted, result, "the verdict depends on where the bytes sit")
        guard case .success(let message) = result else { return }
        try checkEqual(message.encoded(), bytes, "a decoded message does not encode to its bytes")
        if case .claim(let claim) = message {
            let edge = claim.edge.utf8.count
            try check(edge > 0 && edge <= FleetMessage.maxEdgeIDBytes, "edge id of \(edge) bytes")
        }
    }

    static func claims(_ bytes: [UInt8]) throws(InvariantViolation) {
        guard let cut = bytes.first else { return }
        let rest = bytes.dropFirst()
        let at = rest.startIndex + min(Int(cut), rest.count)
        guard case .claim(let a)? = try? FleetMessage.decode(rest[..<at]),
              case .claim(let b)? = try? FleetMessage.decode(rest[at...])
        else { return }
        switch (a.verdict(on: b), b.verdict(on: a)) {
        case (.ignore, .ignore): try check(a == b, "different claims ignore each other")
        case (.yield, .reassert), (.reassert, .yield): try check(a != b, "a claim yields to itself")
        case let (x, y): throw InvariantViolation("claims \(a) and \(b) disagree: \(x) against \(y)")
        }
    }

    static func storedFrame(_ bytes: [UInt8]) throws(InvariantViolation) {
        guard let frame = FleetStoredFrame.decode(bytes) else {
            try check(bytes.count < FleetStoredFrame.headerBytes, "refused a frame of \(bytes.count) bytes")
            return
        }
        try checkEqual(FleetStoredFrame.encode(sender: frame.sender, storedAtMs: frame.storedAtMs,
                                               payload: frame.payload), bytes, "a stored frame does not encode back")
    }

    static func mailboxSubject(_ bytes: [UInt8]) throws(InvariantViolation) {
        let text = String(decoding: bytes, as: UTF8.self)
        let hex = text.utf8.dropFirst("hb.mbox.".count)
        let expected = text.hasPrefix("hb.mbox.") && hex.count == 64
            && hex.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0 | 0x20) }
        guard let key = FleetSubjects.recipient(ofMailbox: text) else {
            try check(!expected, "refused the mailbox subject \(text.debugDescription)")
            return
        }
        try check(expected, "read a key from \(text.debugDescription)")
        try checkEqual(FleetSubjects.mailbox(key), text.lowercased(), "the key's subject")
    }

    static func jetStreamReply(_ bytes: [UInt8], mode: UInt8) throws(InvariantViolation) {
        let root = JetStreamWire.parse(bytes)
        let ack = JetStreamWire.parsePublishAck(bytes)
        let message = JetStreamWire.parseMessage(bytes)
        let success = JetStreamWire.parseSuccess(bytes)
        let info = JetStreamWire.parseStreamInfo(bytes)
        let from = UInt64(mode >> 2) << 8 | UInt64(bytes.first ?? 0)
        let next = JetStreamWire.parseNextMessage(bytes, from: from, subject: Self.subject)
        if case .failure(let error) = root {
            // Whatever the reply is, every reader reports the same failure.
            try checkEqual(ack.failed, error, "publish ack")
            try checkEqual(message.failed, error, "message")
            try checkEqual(success.failed, error, "delete")
            try checkEqual(info.failed, error, "stream info")
            try checkEqual(next.failed, error, "next message")
            return
        }
        if case .success(let seq) = ack {
            try check(seq > 0, "a publish acknowledged at sequence 0")
            try checkEqual(JetStreamWire.parsePublishAck(Array(#"{"seq":\#(seq)}"#.utf8)).succeeded, seq, "ack again")
        }
        if case .success(let m) = message {
            let written = JSONNode.object([.init(key: "message", value: .object([
                .init(key: "subject", value: .string(m.subject)), .init(key: "seq", value: .number(String(m.sequence))),
                .init(key: "data", value: .string(Base64.encode(m.data))),
            ]))])
            let again = JetStreamWire.parseMessage(written.serialized())
            try checkEqual(again.succeeded, m, "the message written again")
        }
        switch next {
        case .success(let m):
            try checkEqual(message.succeeded, m, "next message against message")
            try check(m.subject == Self.subject && m.sequence >= from && m.sequence < UInt64.max,
                      "next message \(m.subject) at \(m.sequence) from \(from)")
        case .failure:
            if let m = message.succeeded {
                try check(m.subject != Self.subject || m.sequence < from || m.sequence == UInt64.max,
                          "refused the next message \(m.sequence) from \(from)")
            }
        }
        if case .success(let s) = info {
            try check(s.messages >= 0 && s.bytes >= 0 && s.subjectCount >= 0 && s.subjects.values.allSatisfy { $0 >= 0 },
                      "a negative count in \(s)")
        }
    }

    static func seeds() -> [[UInt8]] {
        let a = PublicKey(bytes: [UInt8](repeating: 0xAB, count: 32))!
        let b = PublicKey(bytes: (0..<32).map { UInt8($0) })!
        let older = FleetMessage.claim(FleetClaim(atMs: 1_764_400_000_000, edge: "edge-a", connection: 7)).encoded()
        let newer = FleetMessage.claim(FleetClaim(atMs: 1_764_400_000_001, edge: "edge-b", connection: 1)).encoded()
        var out: [[UInt8]] = [
            FleetMessage.live(sender: a, payload: [1, 2, 3][...]).encoded().prefixed(0),
            FleetMessage.stored(deliveryID: 42).encoded().prefixed(0),
            older.prefixed(0),
            ([UInt8(older.count)] + older + newer).prefixed(4),
            FleetStoredFrame.encode(sender: b, storedAtMs: 1_764_400_000_000, payload: Array("frame".utf8)).prefixed(1),
            Array(FleetSubjects.mailbox(b).utf8).prefixed(2),
            Array(FleetSubjects.key(a).utf8).prefixed(2),
        ]
        for reply in [
            #"{"stream":"HOMEBASE_MAILBOX","seq":4}"#,
            #"{"stream":"HOMEBASE_MAILBOX","seq":5,"duplicate":true}"#,
            #"{"error":{"code":503,"err_code":10077,"description":"maximum messages per subject exceeded"},"stream":"HOMEBASE_MAILBOX","seq":0}"#,
            #"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"\#(Self.subject)","seq":9,"data":"ZnJhbWUw","time":"2026-12-04T18:00:00.000000001Z"}}"#,
            #"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":404,"err_code":10037,"description":"no message found"}}"#,
            #"{"type":"io.nats.jetstream.api.v1.stream_msg_delete_response","success":true}"#,
            #"{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{"name":"HOMEBASE_MAILBOX"},"state":{"messages":3,"bytes":120,"first_seq":1,"last_seq":3,"num_subjects":2,"subjects":{"\#(Self.subject)":2}}}"#,
        ] {
            out.append(Array(reply.utf8).prefixed(3))
        }
        return out
    }
}

extension Result {
    var succeeded: Success? {
        if case .success(let s) = self { return s }
        return nil
    }

    var failed: Failure? {
        if case .failure(let f) = self { return f }
        return nil
    }
}
