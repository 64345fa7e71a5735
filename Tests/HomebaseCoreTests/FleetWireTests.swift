import Testing
@testable import HomebaseCore

@Suite struct FleetWireTests {
    let key = PublicKey(bytes: [UInt8](repeating: 0xAB, count: 32))!

    @Test func messagesRoundTrip() throws {
        let messages: [FleetMessage] = [
            .live(sender: self.key, payload: [1, 2, 3][...]),
            .live(sender: self.key, payload: [][...]),
            .stored(deliveryID: 0x0102_0304_0506_0708),
            .claim(FleetClaim(atMs: 1_700_000_000_123, edge: "edge-1.eu", connection: 42)),
        ]
        for m in messages {
            let decoded = try FleetMessage.decode(m.encoded()[...])
            #expect(decoded == m)
        }
    }

    @Test func theEncodingIsFixed() {
        #expect(FleetMessage.stored(deliveryID: 258).encoded() == [1, 2, 0, 0, 0, 0, 0, 0, 1, 2])
        #expect(FleetMessage.claim(FleetClaim(atMs: 1, edge: "e", connection: 2)).encoded()
            == [1, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1, UInt8(ascii: "e")])
    }

    @Test func malformedMessagesAreErrors() {
        let cases: [([UInt8], FleetMessage.DecodeError)] = [
            ([], .truncated),
            ([1], .truncated),
            ([2, 1], .unknownVersion(2)),
            ([1, 9], .unknownKind(9)),
            ([1, 1] + [UInt8](repeating: 0, count: 31), .truncated),
            ([1, 2, 0, 0, 0], .truncated),
            ([1, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0], .trailingBytes),
            ([1, 3] + [UInt8](repeating: 0, count: 16) + [0], .badEdgeID),
            ([1, 3] + [UInt8](repeating: 0, count: 16) + [65], .badEdgeID),
            ([1, 3] + [UInt8](repeating: 0, count: 16) + [2, 0x65], .truncated),
            ([1, 3] + [UInt8](repeating: 0, count: 16) + [1, 0x65, 0x65], .trailingBytes),
            ([1, 3] + [UInt8](repeating: 0, count: 16) + [1, 0xFF], .badEdgeID),
        ]
        for (bytes, expected) in cases {
            #expect(throws: expected, "\(bytes)") { try FleetMessage.decode(bytes[...]) }
        }
    }

    @Test func everyPrefixOfAValidMessageDecodesOrFailsCleanly() {
        let full = FleetMessage.claim(FleetClaim(atMs: 9, edge: "edge", connection: 1)).encoded()
        for n in 0..<full.count { #expect(throws: FleetMessage.DecodeError.self) { try FleetMessage.decode(full[..<n]) } }
    }

    @Test func theNewestClaimWinsAndTheOlderHolderYields() {
        let old = FleetClaim(atMs: 100, edge: "b", connection: 1)
        let new = FleetClaim(atMs: 200, edge: "a", connection: 1)
        #expect(old.verdict(on: new) == .yield)
        #expect(new.verdict(on: old) == .reassert)
        #expect(new.verdict(on: new) == .ignore)
        // Same millisecond: the edge name, then the connection, break the tie the same way on both sides.
        let x = FleetClaim(atMs: 5, edge: "a", connection: 9), y = FleetClaim(atMs: 5, edge: "b", connection: 1)
        #expect(x.verdict(on: y) == .yield && y.verdict(on: x) == .reassert)
        let p = FleetClaim(atMs: 5, edge: "a", connection: 1)
        #expect(p.verdict(on: x) == .yield && x.verdict(on: p) == .reassert)
    }

    @Test func storedFramesKeepSenderTimeAndPayload() throws {
        let bytes = FleetStoredFrame.encode(sender: self.key, storedAtMs: 77, payload: [5, 6])
        let f = try #require(FleetStoredFrame.decode(bytes))
        #expect(f.sender == self.key && f.storedAtMs == 77 && f.payload == [5, 6])
        #expect(FleetStoredFrame.decode(Array(bytes.prefix(39))) == nil)
        #expect(FleetStoredFrame.decode([]) == nil)
    }

    @Test func subjectsNameTheKey() {
        #expect(FleetSubjects.key(self.key) == "hb.key." + self.key.hex)
        #expect(FleetSubjects.recipient(ofMailbox: FleetSubjects.mailbox(self.key)) == self.key)
        #expect(FleetSubjects.recipient(ofMailbox: "hb.mbox.zz") == nil)
        #expect(FleetSubjects.recipient(ofMailbox: "hb.key." + self.key.hex) == nil)
    }
}

/// Replies as nats-server 2.9.10 sent them (recorded on loopback), and broken ones.
@Suite struct JetStreamWireTests {
    func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func publishAcknowledgements() throws {
        #expect(try JetStreamWire.parsePublishAck(self.bytes(#"{"stream":"HBX", "seq":4}"#)).get() == 4)
        let full = JetStreamWire.parsePublishAck(self.bytes(
            #"{"error":{"code":503,"err_code":10077,"description":"maximum messages per subject exceeded"},"stream":"HBX","seq":0}"#))
        guard case .failure(let e) = full else { Issue.record("a refusal parsed as success"); return }
        #expect(e.isSubjectFull && e.code == 503 && e.text == "maximum messages per subject exceeded")
        for broken in ["", "{", "[]", #"{"stream":"HBX"}"#, #"{"seq":0}"#, #"{"seq":-1}"#, #"{"seq":"4"}"#,
                       #"{"seq":1e3}"#, #"{"seq":99999999999999999999999}"#]
        {
            guard case .failure(let e) = JetStreamWire.parsePublishAck(self.bytes(broken)) else {
                Issue.record("accepted \(broken)")
                continue
            }
            #expect(e.code == 0 && !e.isSubjectFull)
        }
    }

    @Test func storedMessages() throws {
        let m = try JetStreamWire.parseMessage(self.bytes(
            #"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","message":{"subject":"hb.mbox.aa","seq":1,"data":"ZnJhbWUw","time":"2026-12-04T18:57:43.544329868Z"}}"#)).get()
        #expect(m == JetStreamWire.Message(subject: "hb.mbox.aa", sequence: 1, data: Array("frame0".utf8)))
        let empty = try JetStreamWire.parseMessage(self.bytes(#"{"message":{"subject":"s","seq":2}}"#)).get()
        #expect(empty.data.isEmpty)
        let missing = JetStreamWire.parseMessage(self.bytes(
            #"{"type":"io.nats.jetstream.api.v1.stream_msg_get_response","error":{"code":404,"err_code":10037,"description":"no message found"}}"#))
        guard case .failure(let e) = missing else { Issue.record("no error"); return }
        #expect(e.isNotFound && e.errCode == 10037)
        for broken in [#"{"message":{"subject":"s","seq":1,"data":"!!"}}"#, #"{"message":{"seq":1}}"#, #"{"message":3}"#] {
            if case .success = JetStreamWire.parseMessage(self.bytes(broken)) { Issue.record("accepted \(broken)") }
        }
    }

    /// A server answering "the next message from N" with another subject, an earlier sequence or the last one
    /// would send the mailbox reader round in a loop or past the end of `UInt64` (`seq + 1`): an error instead.
    @Test func theNextMessageIsOnItsSubjectAndMovesForward() throws {
        func reply(_ subject: String, _ seq: String) -> [UInt8] {
            self.bytes(#"{"message":{"subject":"\#(subject)","seq":\#(seq),"data":"ZnJhbWUw"}}"#)
        }
        let ok = try JetStreamWire.parseNextMessage(reply("hb.mbox.aa", "7"), from: 5, subject: "hb.mbox.aa").get()
        #expect(ok.sequence == 7)
        #expect((try? JetStreamWire.parseNextMessage(reply("hb.mbox.aa", "5"), from: 5, subject: "hb.mbox.aa").get()) != nil)
        for (subject, seq) in [("hb.mbox.bb", "7"), ("hb.mbox.aa", "4"), ("hb.mbox.aa", "18446744073709551615")] {
            guard case .failure(let e) = JetStreamWire.parseNextMessage(reply(subject, seq), from: 5, subject: "hb.mbox.aa")
            else { Issue.record("accepted \(subject) at \(seq)"); continue }
            #expect(e.code == 0 && !e.isNotFound)
        }
    }

    @Test func negativeCountsInStreamInfoAreRefused() {
        for state in [#"{"messages":-1,"bytes":0}"#, #"{"messages":1,"bytes":-5}"#,
                      #"{"messages":1,"bytes":5,"subjects":{"hb.mbox.aa":-1}}"#,
                      #"{"messages":1,"bytes":5,"num_subjects":-2}"#] {
            if case .success = JetStreamWire.parseStreamInfo(self.bytes(#"{"state":"# + state + "}")) {
                Issue.record("accepted \(state)")
            }
        }
    }

    @Test func deletesAndStreamInfo() throws {
        #expect((try? JetStreamWire.parseSuccess(self.bytes(
            #"{"type":"io.nats.jetstream.api.v1.stream_msg_delete_response","success":true}"#)).get()) != nil)
        if case .success = JetStreamWire.parseSuccess(self.bytes(
            #"{"type":"x","error":{"code":400,"err_code":10043,"description":"sequence 2 not found"}}"#))
        {
            Issue.record("a failed delete parsed as success")
        }
        if case .success = JetStreamWire.parseSuccess(self.bytes(#"{"success":"yes"}"#)) { Issue.record("accepted") }
        let info = try JetStreamWire.parseStreamInfo(self.bytes(
            #"{"state":{"messages":3,"bytes":120,"first_seq":1,"last_seq":4,"num_subjects":2,"subjects":{"hb.mbox.aa":2},"num_deleted":1}}"#)).get()
        #expect(info == JetStreamWire.StreamState(messages: 3, bytes: 120, subjectCount: 2, subjects: ["hb.mbox.aa": 2]))
        if case .success = JetStreamWire.parseStreamInfo(self.bytes(#"{"state":{"messages":"3"}}"#)) { Issue.record("accepted") }
    }

    @Test func deeplyNestedOrHugeRepliesAreRefusedNotCrashed() throws {
        let deep = String(repeating: "[", count: 10_000)
        if case .success = JetStreamWire.parsePublishAck(self.bytes(deep)) { Issue.record("accepted") }
        let huge = #"{"seq":1,"pad":""# + String(repeating: "x", count: 1 << 20) + #""}"#
        #expect((try? JetStreamWire.parsePublishAck(self.bytes(huge)).get()) == 1)
    }

    @Test func requestsAreTheAPIsJSON() {
        #expect(String(decoding: JetStreamWire.nextMessageRequest(from: 5, subject: "hb.mbox.aa"), as: UTF8.self)
            == #"{"seq":5,"next_by_subj":"hb.mbox.aa"}"#)
        #expect(String(decoding: JetStreamWire.deleteRequest(sequence: 9), as: UTF8.self) == #"{"seq":9,"no_erase":true}"#)
        #expect(String(decoding: JetStreamWire.infoRequest(subjectsFilter: nil), as: UTF8.self) == "{}")
        let config = JetStreamWire.StreamConfig(name: "M", subjects: ["hb.mbox.*"], maxMessagesPerSubject: 1_000,
                                                maxAgeMs: 1_000, maxMessageBytes: 300_000, replicas: 3)
        let text = String(decoding: config.json(), as: UTF8.self)
        #expect(text.contains(#""max_msgs_per_subject":1000"#) && text.contains(#""discard_new_per_subject":true"#))
        #expect(text.contains(#""max_age":1000000000"#) && text.contains(#""num_replicas":3"#))
        #expect(text.contains(#""subjects":["hb.mbox.*"]"#) && text.contains(#""storage":"file""#))
    }
}
