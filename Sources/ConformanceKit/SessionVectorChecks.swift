import Foundation
import HomebaseCore
import HomebaseCrypto

/// `conformance vectors` for protocol v2 (Protocol/envelope.md §7): the published cacophony vector for
/// `Noise_IK_25519_ChaChaPoly_BLAKE2b`, and the Homebase v2 vectors computed independently with PyNaCl.
extension VectorChecks {
    static let cacophonyFile = "noise-ik-cacophony.json"
    static let sessionFile = "envelope-v2-vectors.json"

    private static func each(_ runner: CheckRunner, _ name: String, _ body: () throws -> CheckOutcome) {
        do { runner.record(name, try body()) } catch { runner.record(name, .fail("\(error)")) }
    }

    private static func number(_ value: Any?, _ field: String) throws -> UInt64 {
        guard let n = value as? NSNumber else { throw CheckFailure("\(field) missing") }
        return n.uint64Value
    }

    // MARK: noise-ik-cacophony.json

    static func cacophony(_ data: Data, _ stem: String, _ runner: CheckRunner) throws {
        guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw CheckFailure("not an object")
        }
        let v = try dict(root["vector"], "vector")
        Self.each(runner, "\(stem)/handshake") {
            guard try string(v["protocol_name"], "protocol_name") == "Noise_IK_25519_ChaChaPoly_BLAKE2b" else {
                return .fail("another protocol")
            }
            guard let messages = v["messages"] as? [[String: Any]], messages.count >= 2 else {
                throw CheckFailure("messages")
            }
            let h = try NoiseIKVectors.handshake(
                prologue: try hex(v["init_prologue"]), initiatorStatic: try hex(v["init_static"]),
                initiatorEphemeral: try hex(v["init_ephemeral"]), responderStatic: try hex(v["resp_static"]),
                responderEphemeral: try hex(v["resp_ephemeral"]), payload1: try hex(messages[0]["payload"]),
                payload2: try hex(messages[1]["payload"]))
            guard h.message1 == (try hex(messages[0]["ciphertext"])) else { return .fail("message 0 differs") }
            guard h.message2 == (try hex(messages[1]["ciphertext"])) else { return .fail("message 1 differs") }
            guard h.payload1 == (try hex(messages[0]["payload"])), h.payload2 == (try hex(messages[1]["payload"])) else {
                return .fail("payloads do not round-trip")
            }
            let hash = try hex(v["handshake_hash"])
            guard h.initiatorKeys.handshakeHash == hash, h.responderKeys.handshakeHash == hash else {
                return .fail("handshake hash differs")
            }
            // Transport messages alternate directions with implicit nonces and empty additional data.
            var n: [UInt64] = [0, 0]
            for (i, m) in messages.dropFirst(2).enumerated() {
                let key = i % 2 == 0 ? h.initiatorKeys.initiatorToResponder : h.responderKeys.responderToInitiator
                let c = NoiseIKVectors.encrypt(key: key, n: n[i % 2], ad: [], plaintext: try hex(m["payload"]))
                n[i % 2] += 1
                guard c == (try hex(m["ciphertext"])) else { return .fail("transport message \(i + 2) differs") }
            }
            return .pass
        }
    }

    // MARK: envelope-v2-vectors.json

    static func sessions(_ data: Data, _ stem: String, _ runner: CheckRunner) throws {
        guard let v = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw CheckFailure("not an object")
        }
        let a = try SigningSecretKey(seed: try hex(v["initiator_seed"]))
        let b = try SigningSecretKey(seed: try hex(v["responder_seed"]))
        var ta = try SessionTable(identity: a)
        var tb = try SessionTable(identity: b)
        let channel = Channel(rawValue: UInt8(try number(v["channel"], "channel")))
        let initiation = try dict(v["initiation"], "initiation"), response = try dict(v["response"], "response")
        let now = try number(initiation["sent_at_ms"], "sent_at_ms")
        let replyID = try hex(response["message_id"])
        var established = false

        Self.each(runner, "\(stem)/handshake") {
            let m1 = try ta.initiate(
                to: b.publicKey, channel: channel, sessionID: try hex(v["session_id"]),
                ephemeral: try NoiseKeyPair(secretBytes: try hex(v["initiator_ephemeral"])),
                messageID: try hex(initiation["message_id"]), sentAtMs: now, nowMs: now)
            guard m1 == (try hex(initiation["envelope"])) else { return .fail("initiation differs") }
            let e = try NoiseKeyPair(secretBytes: try hex(v["responder_ephemeral"]))
            guard case .success(.initiation(let responder)) = tb.receive(
                try SessionEnvelope(decoding: m1[...]), nowMs: now, ephemeral: { e }, replyMessageID: { replyID },
                replySentAtMs: try number(response["sent_at_ms"], "sent_at_ms"))
            else { return .fail("initiation does not open") }
            guard responder.reply == (try hex(response["envelope"])) else { return .fail("response differs") }
            guard responder.handshakeHash == (try hex(v["handshake_hash"])) else { return .fail("hash differs") }
            tb.commit(responder)
            guard case .success(.established) = ta.receive(
                try SessionEnvelope(decoding: responder.reply[...]), nowMs: now, ephemeral: { .generate() },
                replyMessageID: { replyID }, replySentAtMs: now)
            else { return .fail("response does not complete the handshake") }
            established = true
            return .pass
        }
        guard established else { return }
        let (establishedA, establishedB) = (ta, tb)

        var sent: [String: UInt64] = ["initiator": 0, "responder": 0]
        for t in (v["transport"] as? [[String: Any]]) ?? [] {
            let name = (t["name"] as? String) ?? "?"
            Self.each(runner, "\(stem)/transport/\(name)") {
                let from = try string(t["from"], "from")
                let fromA = from == "initiator"
                let counter = try number(t["counter"], "counter")
                let text = Array(try string(t["plaintext_utf8"], "plaintext_utf8").utf8)
                func seal(_ id: [UInt8], _ plaintext: [UInt8], _ at: UInt64) -> [UInt8] {
                    var out: [UInt8] = []
                    _ = fromA
                        ? ta.sealTransport(to: b.publicKey, channel: channel, messageID: id, sentAtMs: at, nowMs: now,
                                           appendingTo: &out) { $0 += plaintext }
                        : tb.sealTransport(to: a.publicKey, channel: channel, messageID: id, sentAtMs: at, nowMs: now,
                                           appendingTo: &out) { $0 += plaintext }
                    return out
                }
                // Filler up to the vector's counter: the sender's nonce is the count of what it sent.
                while sent[from, default: 0] < counter {
                    _ = seal([UInt8](repeating: 0, count: 16), Array("{}".utf8), now)
                    sent[from, default: 0] += 1
                }
                let out = seal(try hex(t["message_id"]), text, try number(t["sent_at_ms"], "sent_at_ms"))
                sent[from, default: 0] += 1
                guard out == (try hex(t["envelope"])) else { return .fail("sealed bytes differ") }
                let env = try SessionEnvelope(decoding: out[...])
                let r = fromA
                    ? tb.receive(env, nowMs: now, ephemeral: { .generate() }, replyMessageID: { replyID },
                                 replySentAtMs: now)
                    : ta.receive(env, nowMs: now, ephemeral: { .generate() }, replyMessageID: { replyID },
                                 replySentAtMs: now)
                guard case .success(.transport(_, let plaintext)) = r,
                    Array(EnvelopePadding.unpad(plaintext)) == text
                else { return .fail("does not open to plaintext_utf8") }
                return .pass
            }
        }

        // Each receiver vector from the state it states (the file's `receiver_state`), on a copy of the tables
        // just after the handshake: never from the vectors before it.
        var named: [String: [UInt8]] = [:]
        for t in ((v["transport"] as? [[String: Any]]) ?? []) + ((v["setup_transport"] as? [[String: Any]]) ?? []) {
            if let name = t["name"] as? String { named[name] = try hex(t["envelope"]) }
        }
        for r in (v["receiver_vectors"] as? [[String: Any]]) ?? [] {
            let name = (r["name"] as? String) ?? "?"
            Self.each(runner, "\(stem)/receiver/\(name)") {
                let bytes = try hex(r["envelope"])
                let expect = try string(r["expect"], "expect")
                let atInitiator = try string(r["receiver"], "receiver") == "initiator"
                let state = try dict(r["state"], "state")
                let at = try number(state["now_ms"], "state.now_ms")
                var table: SessionTable
                switch try string(state["handshake"], "state.handshake") {
                case "established":
                    table = atInitiator ? establishedA : establishedB
                case "initiation_pending":
                    guard atInitiator else { throw CheckFailure("only an initiator has an initiation pending") }
                    table = try SessionTable(identity: a)
                    _ = try table.initiate(
                        to: b.publicKey, channel: channel, sessionID: try hex(v["session_id"]),
                        ephemeral: try NoiseKeyPair(secretBytes: try hex(v["initiator_ephemeral"])),
                        messageID: try hex(initiation["message_id"]), sentAtMs: now, nowMs: now)
                case let other:
                    throw CheckFailure("unknown state.handshake \(other)")
                }
                for opened in (state["opened"] as? [String]) ?? [] {
                    guard let envelope = named[opened] else { throw CheckFailure("state names unknown \(opened)") }
                    guard case .success(.transport) = table.receive(
                        try SessionEnvelope(decoding: envelope[...]), nowMs: now, ephemeral: { .generate() },
                        replyMessageID: { replyID }, replySentAtMs: now)
                    else { return .fail("its state's \(opened) does not open") }
                }
                let got: String
                do throws(EnvelopeError) {
                    let env = try SessionEnvelope(decoding: bytes[...])
                    switch table.receive(env, nowMs: at, ephemeral: { .generate() }, replyMessageID: { replyID },
                                         replySentAtMs: at) {
                    case .success: got = "valid"
                    case .failure(let e): got = e.reason
                    }
                } catch {
                    got = error.reason
                }
                return got == expect ? .pass : .fail("got \(got), expected \(expect)")
            }
        }
    }
}
