import ConformanceKit
import Foundation
import HomebaseCore
import HomebaseCrypto

/// Builds the envelope, message and signed-payload vector files from fixed inputs with our code. Each case states
/// its intended `expect`; `VectorFileTests` re-checks every vector with `VectorChecks` and requires the files to be
/// exactly what this builder produces. Regenerate with
/// `HOMEBASE_WRITE_CONFORMANCE_VECTORS=1 swift test --filter VectorFileTests/regenerate`.
enum VectorGenerator {
    static let seedA = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
    static let seedB = "65666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f8081828384"
    static let seedC = String(repeating: "c3", count: 32)
    static let now: UInt64 = 1_764_400_000_000
    static let nonce = [UInt8](repeating: 0x24, count: 24)
    static let day: UInt64 = 24 * 3600 * 1000

    static func key(_ seed: String) -> SigningSecretKey { try! SigningSecretKey(seed: Hex.decode(seed)!) }

    static func messageID(_ n: UInt8) -> [UInt8] { [UInt8](repeating: 0, count: 15) + [n] }

    // MARK: Envelopes

    static func envelopes() -> EnvelopeVectorFile {
        let a = Self.key(Self.seedA), b = Self.key(Self.seedB), c = Self.key(Self.seedC)
        var out: [EnvelopeVector] = []

        func seal(_ plaintext: [UInt8], version: UInt8 = 1, channel: UInt8 = 2, from: SigningSecretKey = a,
                  to: PublicKey? = nil, id: UInt8 = 1, sentAt: UInt64 = Self.now, keyPeer: SigningSecretKey? = nil)
            -> [UInt8]
        {
            let header = EnvelopeHeader(
                version: version, channel: Channel(rawValue: channel), sender: from.publicKey,
                recipient: to ?? b.publicKey, messageID: Self.messageID(id), sentAtMs: sentAt, nonce: Self.nonce)
            let k = try! E2E.deriveKey(selfSecret: from, peer: (keyPeer ?? b).publicKey)
            return EnvelopeSealer.seal(header: header, plaintext: plaintext, key: k).encoded()
        }
        func add(_ name: String, _ comment: String, _ envelope: [UInt8], expect: String, sender: PublicKey? = nil,
                 relation: String = "contact", now: UInt64 = Self.now, seen: [[UInt8]] = [],
                 plaintext: [UInt8]? = nil, type: String? = nil) {
            out.append(EnvelopeVector(
                name: name, comment: comment,
                inputs: .init(receiverSeed: Self.seedB, deliverSender: (sender ?? a.publicKey).hex, nowMs: now,
                              relation: relation, seenIds: seen.map { Hex.encode($0) }, envelope: Hex.encode(envelope)),
                plaintext: plaintext.map { Hex.encode($0) }, messageType: type, expect: expect))
        }
        let advertRequest = Message.advertRequest.paddedPlaintext()
        let good = seal(advertRequest)
        add("valid-advert-request-from-contact", "contact channel, sender a is a known contact of receiver b", good,
            expect: "valid", plaintext: advertRequest, type: "advert.request")
        let join = Message.contactJoin(name: "guest").paddedPlaintext()
        add("valid-contact-join-from-stranger", "contact.join is the one contact message a stranger may send",
            seal(join, id: 2), expect: "valid", relation: "stranger", plaintext: join, type: "contact.join")
        let pair = Message.pairRequest(secret: String(repeating: "ab", count: 16), name: "phone").paddedPlaintext()
        add("valid-pair-request-from-stranger", "pair.request is the one sync_delta message a stranger may send",
            seal(pair, channel: 1, id: 3), expect: "valid", relation: "stranger", plaintext: pair, type: "pair.request")
        let choice = Message.modelChoice(ModelChoice(modelID: "qwen2.5:7b", vision: false, origin: a.publicKey.hex))
            .paddedPlaintext()
        add("valid-sync-delta-from-sibling", "settings.model_choice between siblings", seal(choice, channel: 1, id: 4),
            expect: "valid", relation: "sibling", plaintext: choice, type: "settings.model_choice")
        let unknownType = EnvelopePadding.pad(Array(#"{"type":"future.thing","x":1}"#.utf8))
        add("valid-unknown-type", "an unknown type passes the envelope rules (the message layer ignores it)",
            seal(unknownType, id: 5), expect: "valid", plaintext: unknownType, type: "future.thing")
        let whitespace = Array(#"{"type":"advert.request"}"#.utf8) + Array(" \t\r\n\n\t ".utf8)
        add("valid-mixed-trailing-whitespace", "receivers accept any trailing JSON whitespace, not only spaces",
            seal(whitespace, id: 6), expect: "valid", plaintext: whitespace, type: "advert.request")
        add("valid-future-edge", "sent_at exactly now + 5 minutes", seal(advertRequest, id: 7, sentAt: Self.now + 300_000),
            expect: "valid", plaintext: advertRequest, type: "advert.request")
        add("valid-expiry-edge", "sent_at exactly 7 days before now",
            seal(advertRequest, id: 8, sentAt: Self.now - 7 * Self.day), expect: "valid", plaintext: advertRequest,
            type: "advert.request")

        add("truncated-129-bytes", "rule 1: one byte short of header + tag", Array(good.prefix(129)), expect: "truncated")
        add("truncated-empty", "rule 1: nothing at all", [], expect: "truncated")
        add("unknown-version-2", "rule 2: version 2, otherwise well sealed", seal(advertRequest, version: 2),
            expect: "unknown_version")
        add("wrong-recipient", "rule 3: addressed to c, received by b",
            seal(advertRequest, to: c.publicKey, keyPeer: c), expect: "wrong_recipient")
        add("sender-mismatch", "rule 4: the relay says c sent it, the header says a", good, expect: "sender_mismatch",
            sender: c.publicKey)
        add("unknown-channel-3", "rule 5: channel 3 does not exist", seal(advertRequest, channel: 3),
            expect: "not_entitled")
        add("from-the-future", "rule 6: sent_at = now + 5 minutes + 1 ms",
            seal(advertRequest, sentAt: Self.now + 300_001), expect: "from_the_future")
        add("expired", "rule 7: sent_at = now - 7 days - 1 ms", seal(advertRequest, sentAt: Self.now - 7 * Self.day - 1),
            expect: "expired")
        var tamperedHeader = good
        tamperedHeader[70] ^= 0x01  // a message_id byte: covered by the additional data
        add("open-failed-tampered-header", "rule 8: one message_id bit flipped", tamperedHeader, expect: "open_failed")
        var tamperedNonce = good
        tamperedNonce[100] ^= 0x01
        add("open-failed-tampered-nonce", "rule 8: one nonce bit flipped", tamperedNonce, expect: "open_failed")
        var tamperedBody = good
        tamperedBody[120] ^= 0x01
        add("open-failed-tampered-ciphertext", "rule 8: one ciphertext bit flipped", tamperedBody, expect: "open_failed")
        add("open-failed-wrong-key", "rule 8: sealed with the a-c key but addressed to b",
            seal(advertRequest, keyPeer: c), expect: "open_failed")
        add("malformed-not-json", "rule 9: the plaintext is not JSON",
            seal(EnvelopePadding.pad(Array("hello there".utf8))), expect: "malformed_plaintext")
        add("malformed-no-type", "rule 9: a JSON object without `type`",
            seal(EnvelopePadding.pad(Array(#"{"id":"x"}"#.utf8))), expect: "malformed_plaintext")
        add("malformed-type-not-string", "rule 9: `type` is a number",
            seal(EnvelopePadding.pad(Array(#"{"type":7}"#.utf8))), expect: "malformed_plaintext")
        add("malformed-array", "rule 9: a JSON array, not an object",
            seal(EnvelopePadding.pad(Array(#"[{"type":"advert.request"}]"#.utf8))), expect: "malformed_plaintext")
        add("malformed-known-type-missing-field", "rule 9: infer.chunk without seq",
            seal(EnvelopePadding.pad(Array(#"{"type":"infer.chunk","id":"x","text":"t"}"#.utf8))),
            expect: "malformed_plaintext")
        let infer = Message.inferRequest(InferRequest(
            id: "00000000-0000-4000-8000-000000000001", model: "qwen2.5:7b",
            messages: [ChatMessage(role: "user", content: "hi")])).paddedPlaintext()
        add("not-entitled-contact-stranger", "rule 10: infer.request on contact from a stranger", seal(infer),
            expect: "not_entitled", relation: "stranger")
        add("not-entitled-sync-delta-contact", "rule 10: settings.model_choice on sync_delta from a contact (not a sibling)",
            seal(choice, channel: 1), expect: "not_entitled", relation: "contact")
        add("not-entitled-contact-join-on-sync-delta", "rule 10: a stranger may send contact.join only on contact",
            seal(join, channel: 1), expect: "not_entitled", relation: "stranger")
        add("replay", "rule 11: message id 1 was already accepted from a", good, expect: "replay",
            seen: [Self.messageID(1)])
        add("not-a-replay-other-id", "rule 11: another id from the same sender is fine", good, expect: "valid",
            seen: [Self.messageID(9)], plaintext: advertRequest, type: "advert.request")
        add("expired-before-replay", "rules run in order: an expired replay is dropped as expired",
            seal(advertRequest, sentAt: Self.now - 8 * Self.day), expect: "expired", seen: [Self.messageID(1)])
        return EnvelopeVectorFile(
            about: "Receiver rules of Protocol/envelope.md section 5, one vector per rule. Receiver b (receiver_seed) "
                + "gets `envelope` in a DELIVER from `deliver_sender` at `now_ms`; `relation` is the sender's place "
                + "in b's roster/contacts, `seen_ids` the message ids already accepted from it. `expect` is valid or "
                + "the drop reason. Sender a's seed is 0102..20; c's is c3 x 32. Regenerated by "
                + "Tests/ConformanceKitTests/VectorGenerator.swift, checked by `conformance vectors`.",
            vectors: out)
    }

    // MARK: Messages

    static func messages() -> MessageVectorFile {
        var out: [MessageVector] = []
        func decode(_ name: String, _ json: String, _ expect: String, type: String? = nil, _ comment: String) {
            out.append(MessageVector(operation: "decode", name: name, comment: comment, inputs: ["json": json],
                                     type: expect == "valid" ? type : nil, expect: expect))
        }
        let id = "00000000-0000-4000-8000-000000000001"
        let b64 = "eyJ2IjoxfQ=="
        let sig = Data(repeating: 7, count: 64).base64EncodedString()
        let valid: [(String, String)] = [
            ("infer.request", #"{"type":"infer.request","id":"\#(id)","model":"qwen2.5:7b","messages":[{"role":"user","content":"hi"}],"options":{"temperature":0.2,"top_p":0.9,"max_tokens":64,"seed":1,"stop":"\n"},"conversation":{"id":"c1","base_count":2,"base_digest":"00"}}"#),
            ("infer.accept", #"{"type":"infer.accept","id":"\#(id)","model":"qwen2.5:7b"}"#),
            ("infer.queued", #"{"type":"infer.queued","id":"\#(id)","position":2}"#),
            ("infer.chunk", #"{"type":"infer.chunk","id":"\#(id)","seq":0,"text":"Hel"}"#),
            ("infer.done", #"{"type":"infer.done","id":"\#(id)","finish_reason":"stop","usage":{"prompt_tokens":3,"completion_tokens":5},"chunks":2}"#),
            ("infer.error", #"{"type":"infer.error","id":"\#(id)","code":"model_unavailable","message":"no such model"}"#),
            ("infer.cancel", #"{"type":"infer.cancel","id":"\#(id)"}"#),
            ("advert", #"{"type":"advert","payload":"\#(b64)","sig":"\#(sig)"}"#),
            ("advert.request", #"{"type":"advert.request"}"#),
            ("pair.request", #"{"type":"pair.request","secret":"00112233445566778899aabbccddeeff","name":"phone"}"#),
            ("pair.accept", #"{"type":"pair.accept","roster":{"payload":"\#(b64)","sig":"\#(sig)"}}"#),
            ("pair.reject", #"{"type":"pair.reject","reason":"expired"}"#),
            ("roster", #"{"type":"roster","payload":"\#(b64)","sig":"\#(sig)"}"#),
            ("settings.model_choice", #"{"type":"settings.model_choice","model_id":"qwen2.5:7b","vision":false,"origin":"ab"}"#),
            ("contact.join", #"{"type":"contact.join","name":"Sam"}"#),
            ("contact.grant", #"{"type":"contact.grant","payload":"\#(b64)","sig":"\#(sig)"}"#),
            ("contact.revoke", #"{"type":"contact.revoke","reason":"revoked"}"#),
            ("contact.leave", #"{"type":"contact.leave"}"#),
        ]
        for (type, json) in valid {
            decode("\(type)-valid", json, "valid", type: type, "every field of \(type)")
        }
        decode("infer.request-minimal", #"{"type":"infer.request","id":"\#(id)","model":"m","messages":[]}"#, "valid",
               type: "infer.request", "options and conversation are optional")
        decode("infer.request-think-effort", #"{"type":"infer.request","id":"x","model":"m","messages":[],"options":{"think":"low"}}"#,
               "valid", type: "infer.request", "think may be an effort: low, medium or high")
        decode("infer.request-think-false", #"{"type":"infer.request","id":"x","model":"m","messages":[],"options":{"think":false}}"#,
               "valid", type: "infer.request", "think may be false (no reasoning) or true (the model's default)")
        decode("infer.chunk-reasoning", #"{"type":"infer.chunk","id":"\#(id)","seq":1,"text":"","reasoning":"Let me think."}"#,
               "valid", type: "infer.chunk", "a chunk may carry the model's reasoning beside its text")
        decode("infer.error-reasoning-budget", #"{"type":"infer.error","id":"x","code":"reasoning_budget","message":"max_tokens spent reasoning"}"#,
               "valid", type: "infer.error", "the budget ran out while the model reasoned")
        decode("infer.request-stop-array", #"{"type":"infer.request","id":"x","model":"m","messages":[],"options":{"stop":["a","b"]}}"#,
               "valid", type: "infer.request", "stop may be an array of strings")
        decode("unknown-field-ignored", #"{"type":"infer.cancel","id":"x","later":true}"#, "valid", type: "infer.cancel",
               "unknown fields are ignored")
        decode("unknown-type", #"{"type":"future.thing"}"#, "valid", type: "future.thing",
               "an unknown type decodes (and is then ignored)")
        decode("padded", #"{"type":"contact.leave"}    "#, "valid", type: "contact.leave", "trailing spaces are accepted")

        let missing: [(String, String, String)] = [
            ("infer.request-missing-model", #"{"type":"infer.request","id":"x","messages":[]}"#, "no model"),
            ("infer.request-missing-messages", #"{"type":"infer.request","id":"x","model":"m"}"#, "no messages"),
            ("infer.accept-missing-model", #"{"type":"infer.accept","id":"x"}"#, "no model"),
            ("infer.chunk-missing-seq", #"{"type":"infer.chunk","id":"x","text":"t"}"#, "no seq"),
            ("infer.queued-missing-position", #"{"type":"infer.queued","id":"x"}"#, "no position"),
            ("infer.done-missing-chunks", #"{"type":"infer.done","id":"x","finish_reason":"stop","usage":{"prompt_tokens":1,"completion_tokens":1}}"#, "no chunks"),
            ("infer.done-missing-usage", #"{"type":"infer.done","id":"x","finish_reason":"stop","chunks":0}"#, "no usage"),
            ("infer.error-missing-code", #"{"type":"infer.error","id":"x","message":"m"}"#, "no code"),
            ("infer.cancel-missing-id", #"{"type":"infer.cancel"}"#, "no id"),
            ("advert-missing-sig", #"{"type":"advert","payload":"\#(b64)"}"#, "no sig"),
            ("pair.request-missing-secret", #"{"type":"pair.request","name":"p"}"#, "no secret"),
            ("pair.accept-missing-roster", #"{"type":"pair.accept"}"#, "no roster"),
            ("pair.reject-missing-reason", #"{"type":"pair.reject"}"#, "no reason"),
            ("roster-missing-payload", #"{"type":"roster","sig":"\#(sig)"}"#, "no payload"),
            ("settings.model_choice-missing-origin", #"{"type":"settings.model_choice","model_id":"m","vision":true}"#, "no origin"),
            ("contact.join-missing-name", #"{"type":"contact.join"}"#, "no name"),
            ("contact.grant-missing-payload", #"{"type":"contact.grant","sig":"\#(sig)"}"#, "no payload"),
            ("contact.revoke-missing-reason", #"{"type":"contact.revoke"}"#, "no reason"),
        ]
        for (name, json, what) in missing { decode(name, json, "invalid_fields", "required field missing: \(what)") }
        let wrongType: [(String, String, String)] = [
            ("infer.request-messages-not-array", #"{"type":"infer.request","id":"x","model":"m","messages":"hi"}"#, "messages is a string"),
            ("infer.request-content-not-string", #"{"type":"infer.request","id":"x","model":"m","messages":[{"role":"user","content":1}]}"#, "content is a number"),
            ("infer.request-max-tokens-not-integer", #"{"type":"infer.request","id":"x","model":"m","messages":[],"options":{"max_tokens":"many"}}"#, "max_tokens is a string"),
            ("infer.chunk-seq-string", #"{"type":"infer.chunk","id":"x","seq":"0","text":"t"}"#, "seq is a string"),
            ("infer.chunk-id-number", #"{"type":"infer.chunk","id":5,"seq":0,"text":"t"}"#, "id is a number"),
            ("infer.chunk-reasoning-number", #"{"type":"infer.chunk","id":"x","seq":0,"text":"","reasoning":1}"#, "reasoning is a number"),
            ("infer.request-think-unknown", #"{"type":"infer.request","id":"x","model":"m","messages":[],"options":{"think":"max"}}"#, "think is neither a boolean nor low, medium or high"),
            ("infer.queued-position-string", #"{"type":"infer.queued","id":"x","position":"2"}"#, "position is a string"),
            ("infer.done-chunks-string", #"{"type":"infer.done","id":"x","finish_reason":"stop","usage":{"prompt_tokens":1,"completion_tokens":1},"chunks":"2"}"#, "chunks is a string"),
            ("settings.model_choice-vision-string", #"{"type":"settings.model_choice","model_id":"m","vision":"no","origin":"o"}"#, "vision is a string"),
            ("contact.join-name-null", #"{"type":"contact.join","name":null}"#, "name is null"),
        ]
        for (name, json, what) in wrongType { decode(name, json, "invalid_fields", "wrong JSON type: \(what)") }
        decode("advert-bad-base64-payload", #"{"type":"advert","payload":"not base64!","sig":"\#(sig)"}"#,
               "invalid_base64", "payload is not base64")
        decode("contact.grant-bad-base64-sig", #"{"type":"contact.grant","payload":"\#(b64)","sig":"%%%"}"#,
               "invalid_base64", "sig is not base64")
        decode("roster-base64-url-alphabet", #"{"type":"roster","payload":"\#(b64)","sig":"ab-_"}"#,
               "invalid_base64", "the URL-safe alphabet is not standard base64")
        decode("not-json", "hello", "not_a_message", "not JSON")
        decode("no-type", #"{"id":"x"}"#, "not_a_message", "no type")
        decode("type-not-string", #"{"type":1}"#, "not_a_message", "type is a number")
        decode("array", #"[{"type":"advert.request"}]"#, "not_a_message", "an array, not an object")
        decode("empty", "", "not_a_message", "nothing")

        func pad(_ name: String, _ input: [UInt8], _ comment: String) {
            out.append(MessageVector(operation: "pad", name: name, comment: comment, inputs: ["hex": Hex.encode(input)],
                                     output: Hex.encode(EnvelopePadding.pad(input)), expect: "valid"))
        }
        let x = UInt8(ascii: "x")
        pad("pad-empty", [], "an empty plaintext becomes 256 spaces")
        pad("pad-1", [x], "1 byte: 255 spaces follow")
        pad("pad-255", [UInt8](repeating: x, count: 255), "255 bytes: one space")
        pad("pad-256", [UInt8](repeating: x, count: 256), "already a multiple of 256: unchanged")
        pad("pad-257", [UInt8](repeating: x, count: 257), "257 bytes: padded to 512")
        func unpad(_ name: String, _ input: String, _ comment: String) {
            let bytes = Array(input.utf8)
            out.append(MessageVector(operation: "unpad", name: name, comment: comment, inputs: ["hex": Hex.encode(bytes)],
                                     output: Hex.encode(Array(EnvelopePadding.unpad(bytes))), expect: "valid"))
        }
        unpad("unpad-spaces", "{}   ", "trailing spaces are removed")
        unpad("unpad-json-whitespace", "{} \t\r\n", "any JSON whitespace")
        unpad("unpad-keeps-inner", "{ }x", "nothing after the last non-whitespace byte is removed")
        unpad("unpad-all-space", "    ", "all whitespace: empty")
        return MessageVectorFile(
            about: "Messages of Protocol/messages.md. `decode`: inputs.json is a plaintext (after unpadding); expect is "
                + "valid (with its type), not_a_message (no JSON object with a string type: malformed_plaintext), "
                + "invalid_fields (a known type with a missing or mistyped field: malformed_plaintext) or "
                + "invalid_base64. `pad`/`unpad`: envelope.md section 4 padding, output in hex.",
            vectors: out)
    }

    // MARK: Signed payloads

    static func signedPayloads() -> SignedPayloadVectorFile {
        let a = Self.key(Self.seedA), b = Self.key(Self.seedB), c = Self.key(Self.seedC)
        var out: [SignedPayloadVector] = []
        let advert = SignedPayloadJSON.encode(AdvertPayload(
            host: a.publicKey, seq: 3, issuedAt: Self.now, runtime: .init(version: "0.12.3"),
            models: [.init(tag: "qwen2.5:7b", family: "qwen2", parameterSize: "7.6B", quantization: "Q4_K_M",
                           capabilities: ["completion"], contextLength: 32768, loaded: true)]))
        let roster = SignedPayloadJSON.encode(RosterPayload(
            account: a.publicKey, version: 2,
            devices: [.init(pk: a.publicKey.hex, name: "homebase", role: "homebase", addedAt: Self.now),
                      .init(pk: b.publicKey.hex, name: "phone", role: "handset", addedAt: Self.now)]))
        let grant = SignedPayloadJSON.encode(GrantPayload(
            host: a.publicKey, guest: b.publicKey, models: .only(["qwen2.5:7b"]), issuedAt: Self.now,
            expiresAt: Self.now + 30 * Self.day))
        let contexts = ["advert": SignatureContext.advert, "roster": SignatureContext.roster,
                        "grant": SignatureContext.grant]

        func add(_ kind: String, _ suffix: String, _ comment: String, payload: [UInt8], signer: SigningSecretKey = a,
                 context: String? = nil, sig: [UInt8]? = nil, expect: String) {
            let ctx = context ?? contexts[kind]!
            let signature = sig ?? signer.sign(payload, context: ctx)
            let blob = SignedBlob(payload: payload, signature: signature)
            let message: Message = kind == "advert" ? .advert(blob) : kind == "roster" ? .roster(blob) : .contactGrant(blob)
            out.append(SignedPayloadVector(
                name: "\(kind)-\(suffix)", comment: comment, kind: kind,
                inputs: .init(signer: a.publicKey.hex, message: String(decoding: message.jsonBytes(), as: UTF8.self),
                              payload: Hex.encode(payload), sig: Hex.encode(signature),
                              signedWithSeed: signer === a ? Self.seedA : (signer === b ? Self.seedB : Self.seedC),
                              signedWithContext: ctx),
                expect: expect))
        }
        for (kind, payload) in [("advert", advert), ("roster", roster), ("grant", grant)] {
            let wrongContext = kind == "advert" ? SignatureContext.grant : SignatureContext.advert
            add(kind, "valid", "signed by a over the exact payload bytes", payload: payload, expect: "valid")
            add(kind, "wrong-context", "signed with \(wrongContext) instead", payload: payload, context: wrongContext,
                expect: "signature_invalid")
            var tampered = payload
            tampered[tampered.count / 2] ^= 0x01
            let sig = a.sign(payload, context: contexts[kind]!)
            add(kind, "tampered-payload", "one payload bit flipped after signing", payload: tampered, sig: sig,
                expect: "signature_invalid")
            add(kind, "wrong-signer", "signed by c, expected a", payload: payload, signer: c, expect: "signature_invalid")
            let reserialized = Array(String(decoding: payload, as: UTF8.self)
                .replacingOccurrences(of: ",", with: ", ").utf8)
            add(kind, "reserialized", "the same JSON with spaces: a's signature over the original bytes does not cover it",
                payload: reserialized, sig: sig, expect: "signature_invalid")
            let v2 = Array(String(decoding: payload, as: UTF8.self)
                .replacingOccurrences(of: #""v":1"#, with: #""v":2"#).utf8)
            add(kind, "v2", "correctly signed, but format version 2", payload: v2, expect: "unknown_version")
        }
        add("advert", "not-json", "correctly signed bytes that are not JSON", payload: Array("advert".utf8),
            expect: "malformed")
        let foreignHost = Array(String(decoding: advert, as: UTF8.self)
            .replacingOccurrences(of: a.publicKey.hex, with: c.publicKey.hex).utf8)
        add("advert", "host-not-signer", "signed by a but names c as host", payload: foreignHost, expect: "malformed")
        add("grant", "missing-guest", "correctly signed grant without a guest",
            payload: Array(#"{"v":1,"host":"\#(a.publicKey.hex)","models":"*","issued_at":1}"#.utf8), expect: "malformed")
        return SignedPayloadVectorFile(
            about: "Signed payloads (envelope.md section 2, messages.md): each vector is a whole message as received. "
                + "A receiver verifies `sig` over the exact payload bytes with the kind's context "
                + "(homebase-advert-v1, homebase-roster-v1, homebase-grant-v1) and the expected `signer`, then "
                + "requires v = 1, then the payload's shape (host/account = signer). expect: valid, "
                + "signature_invalid, unknown_version or malformed.",
            vectors: out)
    }
}
