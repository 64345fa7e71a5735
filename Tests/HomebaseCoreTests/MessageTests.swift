import FoundationEssentials
import Testing
@testable import HomebaseCore

@Suite struct MessageTests {
    static let samples: [Message] = [
        .inferRequest(InferRequest(
            id: "6f1c2a8e-1d2b-4c3d-9e8f-0a1b2c3d4e5f", model: "qwen2.5:7b",
            messages: [ChatMessage(role: "user", content: "héllo \"there\"\n")],
            options: InferOptions(temperature: 0.2, topP: 0.9, maxTokens: 64, stop: ["\n\n"], seed: 7),
            conversation: ConversationRef(id: "c1", baseCount: 2, baseDigest: String(repeating: "ab", count: 32)))),
        .inferAccept(InferAccept(id: "r1", model: "qwen2.5:7b")),
        .inferChunk(InferChunk(id: "r1", seq: 3, text: " world")),
        .inferChunk(InferChunk(id: "r1", seq: 4, text: "", reasoning: "Let me \"think\"")),
        .inferQueued(InferQueued(id: "r1", position: 2)),
        .inferDone(InferDone(id: "r1", finishReason: "stop", usage: Usage(promptTokens: 5, completionTokens: 9), chunks: 4)),
        .inferError(InferError(id: "r1", code: .cacheMiss, message: "no such conversation")),
        .inferCancel(id: "r1"),
        .advert(SignedBlob(payload: Array("{\"v\":1}".utf8), signature: [UInt8](repeating: 9, count: 64))),
        .advertRequest,
        .pairRequest(secret: "s3cret", name: "phone"),
        .pairAccept(roster: SignedBlob(payload: [1, 2, 3], signature: [4, 5])),
        .pairReject(reason: "expired"),
        .roster(SignedBlob(payload: [1], signature: [2])),
        .modelChoice(ModelChoice(modelID: "qwen2.5:7b", vision: false, origin: "handset")),
        .contactJoin(name: "Sam"),
        .contactGrant(SignedBlob(payload: [7], signature: [8])),
        .contactRevoke(reason: "revoked"),
        .contactLeave,
    ]

    @Test(arguments: samples)
    func roundTripsThroughJSON(_ m: Message) throws {
        let json = m.jsonBytes()
        #expect(try Message(json: json) == m)
        #expect(try Message(json: m.paddedPlaintext()) == m)
        #expect(m.paddedPlaintext().count % 256 == 0)
    }

    @Test(arguments: samples)
    func appendingJSONLeavesWhatTheBufferHeld(_ m: Message) {
        // A sender writes the JSON after a frame's head: the object must open after those bytes, not at index 0.
        let head: [UInt8] = [0x03, 0x7B, 0x00]
        var out = head
        m.appendJSON(to: &out)
        #expect(out == head + m.jsonBytes())
        #expect(m.jsonBytes().first == UInt8(ascii: "{") && m.jsonBytes().last == UInt8(ascii: "}"))
    }

    @Test func typeStringsAreTheWireNames() throws {
        let j = String(decoding: Message.inferChunk(InferChunk(id: "x", seq: 0, text: "t")).jsonBytes(), as: UTF8.self)
        #expect(j == #"{"id":"x","seq":0,"text":"t","type":"infer.chunk"}"#)
        let d = String(decoding: Message.inferDone(InferDone(id: "x", finishReason: "length",
            usage: Usage(promptTokens: 1, completionTokens: 2), chunks: 3)).jsonBytes(), as: UTF8.self)
        #expect(d.contains(#""finish_reason":"length""#) && d.contains(#""prompt_tokens":1"#) && d.contains(#""chunks":3"#))
    }

    @Test func toolsAreDetectedNotInterpreted() throws {
        let withTools = #"{"type":"infer.request","id":"1","model":"m","messages":[],"tools":[{"type":"function"}]}"#
        let emptyTools = #"{"type":"infer.request","id":"1","model":"m","messages":[],"tools":[]}"#
        let none = #"{"type":"infer.request","id":"1","model":"m","messages":[{"role":"user","content":"x"}]}"#
        guard case .inferRequest(let r1) = try Message(json: Array(withTools.utf8)) else { Issue.record(); return }
        #expect(r1.hasTools)
        guard case .inferRequest(let r2) = try Message(json: Array(emptyTools.utf8)) else { Issue.record(); return }
        #expect(!r2.hasTools)
        guard case .inferRequest(let r3) = try Message(json: Array(none.utf8)) else { Issue.record(); return }
        #expect(!r3.hasTools && r3.options == InferOptions())
    }

    @Test func stopMayBeOneString() throws {
        let j = #"{"type":"infer.request","id":"1","model":"m","messages":[],"options":{"stop":"END"}}"#
        guard case .inferRequest(let r) = try Message(json: Array(j.utf8)) else { Issue.record(); return }
        #expect(r.options.stop == ["END"])
    }

    @Test(arguments: [
        ("", MessageDecodingError.notAMessage),
        ("[]", .notAMessage),
        ("{\"type\":5}", .notAMessage),
        ("{\"typ\":\"advert\"}", .notAMessage),
        ("{\"type\":\"infer.chunk\",\"id\":\"x\",\"seq\":\"0\",\"text\":\"t\"}", .invalidFields(type: "infer.chunk")),
        ("{\"type\":\"infer.request\",\"id\":\"x\"}", .invalidFields(type: "infer.request")),
        ("{\"type\":\"advert\",\"payload\":\"***\",\"sig\":\"AA==\"}", .invalidBase64(field: "payload")),
        ("{\"type\":\"roster\",\"payload\":\"AA==\",\"sig\":\"%%\"}", .invalidBase64(field: "sig")),
        ("{\"type\":\"pair.request\",\"secret\":\"s\"", .notAMessage),
        ("\u{FF}\u{FE}", .notAMessage),
    ])
    func malformedPlaintextsAreRejected(json: String, error: MessageDecodingError) {
        #expect(throws: error) { _ = try Message(json: Array(json.utf8)) }
    }

    /// Issue 23: the type is read without building the rest, and a type with only small fields that comes with
    /// 256 KiB of JSON is refused unread (JSONDecoder took 25 ms to map such a text, twice); a repeated `type`
    /// is no message, and nesting past the reader's depth is refused before any decoder sees it.
    @Test func hugeTextsOfSmallTypesAreRefusedAndTheTypeIsReadOnce() throws {
        let zeros = "[" + Array(repeating: "0", count: 120_000).joined(separator: ",") + "]"
        #expect(throws: MessageDecodingError.invalidFields(type: "contact.join")) {
            _ = try Message(json: Array(#"{"name":"wide","pad":\#(zeros),"type":"contact.join"}"#.utf8))
        }
        let keys = (0..<20_000).map { #""k\#($0)":0"# }.joined(separator: ",")
        #expect(throws: MessageDecodingError.invalidFields(type: "advert.request")) {
            _ = try Message(json: Array(#"{\#(keys),"type":"advert.request"}"#.utf8))
        }
        #expect(throws: MessageDecodingError.notAMessage) {
            _ = try Message(json: Array(#"{"type":"advert.request","type":"contact.leave"}"#.utf8))
        }
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: MessageDecodingError.notAMessage) {
            _ = try Message(json: Array(#"{"name":"x","pad":\#(deep),"type":"contact.join"}"#.utf8))
        }
        // Within the limit, unknown fields of any size are still skipped.
        let some = "[" + Array(repeating: "0", count: 1_000).joined(separator: ",") + "]"
        #expect(try Message(json: Array(#"{"name":"ok","pad":\#(some),"type":"contact.join"}"#.utf8))
            == .contactJoin(name: "ok"))
        #expect(try Message(json: Array(#"{"pad":\#(zeros),"type":"future.thing"}"#.utf8)) == .unknown(type: "future.thing"))
    }

    @Test func unknownTypesAreKept() throws {
        #expect(try Message(json: Array(#"{"type":"future.thing","x":1}"#.utf8)) == .unknown(type: "future.thing"))
    }

    @Test func crosscheckAdvertMessageDecodes() throws {
        struct Cross: Decodable {
            struct Adv: Decodable { var payload_utf8: String; var sig: String; var message_json: [String: String] }
            var advert_signed_by_a: Adv
        }
        let c = try Fixtures.load("crosscheck-v1.json", as: Cross.self).advert_signed_by_a
        let json = try JSONEncoder().encode(c.message_json)
        guard case .advert(let blob) = try Message(json: Array(json)) else { Issue.record(); return }
        #expect(blob.payload == Array(c.payload_utf8.utf8))
        #expect(blob.signature == unhex(c.sig))
        let p = try #require(SignedPayloadJSON.decode(AdvertPayload.self, from: blob.payload))
        #expect(p.seq == 7 && p.issuedAt == 1_764_400_000_000 && p.models.first?.contextLength == 32768)
        #expect(p.models.first?.loaded == true && p.runtime.version == "0.12.3")
    }

    @Test func grantModelsAreStarOrAList() throws {
        let host = PublicKey(bytes: [UInt8](repeating: 1, count: 32))!
        let guest = PublicKey(bytes: [UInt8](repeating: 2, count: 32))!
        let all = GrantPayload(host: host, guest: guest, models: .all, issuedAt: 1, expiresAt: nil)
        let s = String(decoding: SignedPayloadJSON.encode(all), as: UTF8.self)
        #expect(s.contains(#""models":"*""#) && !s.contains("expires_at"))
        #expect(SignedPayloadJSON.decode(GrantPayload.self, from: SignedPayloadJSON.encode(all)) == all)
        let some = GrantPayload(host: host, guest: guest, models: .only(["a"]), issuedAt: 1, expiresAt: 2)
        #expect(SignedPayloadJSON.decode(GrantPayload.self, from: SignedPayloadJSON.encode(some)) == some)
        #expect(some.models.allows("a") && !some.models.allows("b") && all.models.allows("zzz"))
        let bad = Array(#"{"v":1,"host":"h","guest":"g","models":"all","issued_at":1}"#.utf8)
        #expect(SignedPayloadJSON.decode(GrantPayload.self, from: bad) == nil)
        let v2 = Array(#"{"v":2,"host":"h","guest":"g","models":"*","issued_at":1}"#.utf8)
        #expect(SignedPayloadJSON.decode(GrantPayload.self, from: v2) == nil)
    }
}

/// The one-pass infer.chunk path of `Message(json:)` answers exactly as the general decoder, or defers to it.
@Suite struct MessageChunkFastPathTests {
    static func general(_ text: String) -> Result<Message, MessageDecodingError> {
        Result { () throws(MessageDecodingError) in try Message(generalJSON: Array(text.utf8)) }
    }

    static func full(_ text: String) -> Result<Message, MessageDecodingError> {
        Result { () throws(MessageDecodingError) in try Message(json: Array(text.utf8)) }
    }

    static let chunks = [
        #"{"id":"r1","seq":0,"text":"Hel","type":"infer.chunk"}"#,
        #"{"type":"infer.chunk","text":"a\n\u00e9\"\ud83d\ude00","seq":41,"id":"x"}"#,
        #"{"id":"r1","seq":-3,"text":"","type":"infer.chunk","extra":{"a":[1,2,{"b":null}]}}"#,
        #"{"id":"r1","seq":1.0,"text":"a","type":"infer.chunk"}"#,
        #"{"id":"r1","seq":1e2,"text":"a","type":"infer.chunk"}"#,
        #"{"id":"r1","seq":9223372036854775808,"text":"a","type":"infer.chunk"}"#,
        #"{"id":"r1","seq":"1","text":"a","type":"infer.chunk"}"#,
        #"{"id":"r1","id":"r2","seq":1,"text":"a","type":"infer.chunk"}"#,
        #"{"id":"r1","seq":1,"text":5,"text":"a","type":"infer.chunk"}"#,
        #"{"id":"r1","seq":1,"type":"infer.chunk"}"#,
        #"{"id":"r1","seq":1,"text":"a","type":"infer.done"}"#,
        #"{"id":null,"seq":1,"text":"a","type":"infer.chunk"}"#,
        #"{"id":"r1","seq":1,"text":"a","type":"infer.chunk"}   "#,
        #"[{"id":"r1","seq":1,"text":"a","type":"infer.chunk"}]"#,
        #"{"id":"r1","seq":1,"text":"a","type":"infer.chunk"} x"#,
    ]

    @Test func agreesWithTheGeneralDecoder() {
        var inputs = Self.chunks
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array(#"{}[]:,"\ 0123456789.-enul"#.utf8)
        for chunk in Self.chunks {
            let bytes = Array(chunk.utf8)
            for _ in 0..<300 {
                var mutated = bytes
                mutated[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
                inputs.append(String(decoding: mutated, as: UTF8.self))
            }
        }
        var taken = 0
        for text in inputs {
            #expect(Self.full(text) == Self.general(text), "\(text.debugDescription)")
            if Array(text.utf8).withUnsafeBufferPointer({ Message.fastChunk($0) }) != nil { taken += 1 }
        }
        // Our own chunks (padded too) end as the fast path expects, so receivers take it for them.
        let ours = Message.inferChunk(InferChunk(id: "r9", seq: 3, text: "hi")).jsonBytes() + [0x20, 0x20]
        #expect(ours.withUnsafeBufferPointer { Message.endsLikeAChunk($0) })
        #expect(!Array(#"{"type":"infer.chunk","id":"r1","seq":1,"text":"a"}"#.utf8).withUnsafeBufferPointer {
            Message.endsLikeAChunk($0)
        })
        // The fast path did answer for the common shapes.
        #expect(taken >= 4)
        #expect(Array(Self.chunks[0].utf8).withUnsafeBufferPointer { Message.fastChunk($0) }
            == InferChunk(id: "r1", seq: 0, text: "Hel"))
    }
}

/// The one-pass infer.request path of `Message(json:)` answers exactly as the general decoder, or defers to it.
@Suite struct MessageRequestFastPathTests {
    static func general(_ bytes: [UInt8]) -> Result<Message, MessageDecodingError> {
        Result { () throws(MessageDecodingError) in try Message(generalJSON: bytes) }
    }

    static func full(_ bytes: [UInt8]) -> Result<Message, MessageDecodingError> {
        Result { () throws(MessageDecodingError) in try Message(json: bytes) }
    }

    static let handWritten = [
        #"{"id":"r1","messages":[{"content":"hi","role":"user"}],"model":"m","options":{},"type":"infer.request"}"#,
        #"{"id":"r1","messages":[],"model":"m","type":"infer.request"}"#,
        #"{"id":"r1","messages":[{"role":"user","content":"a\n\u00e9\"\ud83d\ude00","name":"x"}],"model":"m","options":null,"tools":null,"conversation":null,"type":"infer.request"}"#,
        #"{"id":"r1","messages":[{"content":"hi","role":"user"}],"model":"m","options":{"temperature":0.5},"type":"infer.request"}"#,
        #"{"id":"r1","messages":[{"content":"hi","role":"user"}],"model":"m","tools":[{"type":"function"}],"type":"infer.request"}"#,
        #"{"id":"r1","messages":[{"content":"hi","role":"user"}],"model":"m","tools":[],"type":"infer.request"}"#,
        #"{"conversation":{"id":"c"},"id":"r1","messages":[{"content":"hi","role":"user"}],"model":"m","type":"infer.request"}"#,
        #"{"id":"r1","id":"r2","messages":[],"model":"m","type":"infer.request"}"#,
        #"{"id":"r1","messages":[{"content":"a","content":"b","role":"user"}],"model":"m","type":"infer.request"}"#,
        #"{"id":"r1","messages":[{"content":5,"role":"user"}],"model":"m","type":"infer.request"}"#,
        #"{"id":"r1","messages":[{"role":"user"}],"model":"m","type":"infer.request"}"#,
        #"{"id":"r1","messages":{},"model":"m","type":"infer.request"}"#,
        #"{"id":7,"messages":[],"model":"m","type":"infer.request"}"#,
        #"{"messages":[],"model":"m","type":"infer.request"}"#,
        #"{"id":"r1","messages":[],"model":"m","extra":[1,{"a":null}],"type":"infer.request"}"#,
        #"{"id":"r1","messages":[],"model":"m","type":"infer.chunk","type":"infer.request"}"#,
        #"{"id":"r1","messages":[],"model":"m","type":"infer.request"}  "#,
        #"{"i\u0064":"r1","messages":[],"model":"m","type":"infer.request"}"#,
    ]

    static func ours(_ generator: inout SystemRandomNumberGenerator) -> [UInt8] {
        let texts = ["", "hi", "a\"b\\c/d\n\t", "héllo 中 😀", "\u{1}\u{7F}", String(repeating: "long ", count: 50)]
        let messages = (0..<Int.random(in: 0...4, using: &generator)).map { _ in
            ChatMessage(role: ["system", "user", "assistant"].randomElement(using: &generator)!,
                        content: texts.randomElement(using: &generator)!)
        }
        var options = InferOptions()
        if Int.random(in: 0..<4, using: &generator) == 0 { options.maxTokens = 64 }
        let conversation = Int.random(in: 0..<4, using: &generator) == 0 ? ConversationRef(id: "c1", baseCount: 2) : nil
        let request = InferRequest(id: "req-" + texts.randomElement(using: &generator)!, model: "qwen2.5:7b",
                                   messages: messages, options: options, conversation: conversation)
        return Message.inferRequest(request).paddedPlaintext()
    }

    @Test func agreesWithTheGeneralDecoder() {
        var generator = SystemRandomNumberGenerator()
        var inputs = Self.handWritten.map { Array($0.utf8) }
        for _ in 0..<300 { inputs.append(Self.ours(&generator)) }
        let alphabet = Array(#"{}[]:,"\ 0123456789.-enul"#.utf8)
        for bytes in inputs {
            for _ in 0..<40 {
                var mutated = bytes
                mutated[Int.random(in: 0..<bytes.count, using: &generator)] = alphabet.randomElement(using: &generator)!
                inputs.append(mutated)
            }
        }
        var taken = 0
        for bytes in inputs {
            let general = Self.general(bytes)
            #expect(Self.full(bytes) == general, "\(String(decoding: bytes, as: UTF8.self).debugDescription)")
            if let fast = bytes.withUnsafeBufferPointer({ Message.fastRequest($0) }) {
                taken += 1
                #expect(general == .success(.inferRequest(fast)), "\(String(decoding: bytes, as: UTF8.self).debugDescription)")
            }
        }
        // Our own requests (padded) end as the fast path expects, and it answered for the common shapes.
        #expect(Self.ours(&generator).withUnsafeBufferPointer { Message.endsLikeARequest($0) })
        #expect(taken >= 300)
        #expect(Array(Self.handWritten[0].utf8).withUnsafeBufferPointer { Message.fastRequest($0) }
            == InferRequest(id: "r1", model: "m", messages: [ChatMessage(role: "user", content: "hi")]))
        // Options, a conversation or tools are left to the general decoder.
        for index in [3, 4, 5, 6] {
            #expect(Array(Self.handWritten[index].utf8).withUnsafeBufferPointer { Message.fastRequest($0) } == nil)
        }
    }
}
