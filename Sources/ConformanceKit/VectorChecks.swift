import Foundation
import HomebaseCore
import HomebaseCrypto

/// `conformance vectors [DIR]`: every vector in the fixture files, checked against our codecs and crypto.
/// One result line per vector (named `file-stem/vector-name`), or per group for crosscheck-v1.json.
public enum VectorChecks {
    public static let fileNames = [
        "relay-frames.json", "crypto-vectors.json", "crosscheck-v1.json", EnvelopeVectorFile.fileName,
        MessageVectorFile.fileName, SignedPayloadVectorFile.fileName, Self.cacophonyFile, Self.sessionFile,
    ]

    /// Checks every file in `directory` into `runner`. A missing or unreadable file is one failed check that
    /// names the path it tried and what to pass instead.
    public static func run(directory: String, into runner: CheckRunner) {
        Self.run(into: runner) { file in
            let path = (directory as NSString).appendingPathComponent(file)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw CheckFailure("cannot read \(path); pass the folder holding the vector files "
                                   + "(conformance vectors DIR), or no DIR for the ones built in")
            }
            return data
        }
    }

    /// Checks the vector files built into this binary (`EmbeddedVectors`, generated from Fixtures/).
    public static func runEmbedded(into runner: CheckRunner) {
        Self.run(into: runner) { file in
            guard let text = EmbeddedVectors.base64[file],
                  let data = Data(base64Encoded: text.filter { !$0.isNewline }) else {
                throw CheckFailure("\(file) is not built into this binary")
            }
            return data
        }
    }

    /// The embedded copy of `file` (tests compare it with Fixtures/).
    public static func embedded(_ file: String) -> Data? {
        EmbeddedVectors.base64[file].flatMap { Data(base64Encoded: $0.filter { !$0.isNewline }) }
    }

    static func run(into runner: CheckRunner, load: (String) throws -> Data) {
        for file in Self.fileNames {
            let stem = String(file.dropLast(".json".count))
            let data: Data
            do {
                data = try load(file)
            } catch {
                runner.record("\(stem)/load", .fail("\(error)"))
                continue
            }
            do {
                switch file {
                case "relay-frames.json": try Self.relayFrames(data, stem, runner)
                case "crypto-vectors.json": try Self.crypto(data, stem, runner)
                case "crosscheck-v1.json": try Self.crosscheck(data, stem, runner)
                case EnvelopeVectorFile.fileName: try Self.envelopes(data, stem, runner)
                case MessageVectorFile.fileName: try Self.messages(data, stem, runner)
                case Self.cacophonyFile: try Self.cacophony(data, stem, runner)
                case Self.sessionFile: try Self.sessions(data, stem, runner)
                default: try Self.signedPayloads(data, stem, runner)
                }
            } catch {
                runner.record("\(stem)/load", .fail("\(file) does not parse: \(error)"))
            }
        }
    }

    /// Runs `body` for one vector, turning thrown `CheckFailure`s (missing fields, bad hex) into failures.
    private static func each(_ runner: CheckRunner, _ name: String, _ body: () throws -> CheckOutcome) {
        do { runner.record(name, try body()) } catch { runner.record(name, .fail("\(error)")) }
    }

    private static func vectors(_ data: Data) throws -> [[String: Any]] {
        guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let vectors = root["vectors"] as? [[String: Any]], !vectors.isEmpty
        else { throw CheckFailure("no `vectors` array") }
        return vectors
    }

    // MARK: relay-frames.json

    static func relayFrames(_ data: Data, _ stem: String, _ runner: CheckRunner) throws {
        for v in try Self.vectors(data) {
            let name = (v["name"] as? String) ?? "?"
            Self.each(runner, "\(stem)/\(name)") {
                let bytes = try hex(v["hex"])
                let expect = try string(v["expect"], "expect")
                if expect == "valid" {
                    let fields = try dict(v["frame"], "frame")
                    let expected = try Self.frame(fields)
                    let decoded: RelayFrame
                    do { decoded = try RelayFrame(decoding: bytes) } catch { return .fail("does not decode: \(error)") }
                    guard decoded == expected else { return .fail("decodes to \(decoded), expected \(expected)") }
                    guard expected.encoded() == bytes else { return .fail("re-encoding differs") }
                    return .pass
                }
                do throws(RelayFrameError) {
                    let f = try RelayFrame(decoding: bytes)
                    return .fail("decoded as \(f.type), expected \(expect)")
                } catch {
                    let got: String
                    switch error {
                    case .empty: got = "empty"
                    case .unknownType: got = "unknownType"
                    case .truncated: got = "truncated"
                    case .trailingBytes: got = "trailingBytes"
                    case .invalidUTF8: got = "invalidUTF8"
                    }
                    return got == expect ? .pass : .fail("rejected as \(got), expected \(expect)")
                }
            }
        }
    }

    private static func frame(_ f: [String: Any]) throws -> RelayFrame {
        /// A whole number that fits `T`; a vector file from the user with a bad one fails, it does not trap.
        func u<T: FixedWidthInteger>(_ k: String, as _: T.Type = UInt64.self) throws -> T {
            guard let n = f[k] as? NSNumber, let whole = UInt64(n.stringValue), let value = T(exactly: whole) else {
                throw CheckFailure("frame.\(k) is missing or not a \(T.self)")
            }
            return value
        }
        func pk(_ k: String) throws -> PublicKey {
            guard let p = PublicKey(bytes: try hex(f[k])) else { throw CheckFailure("frame.\(k) is not 32 bytes") }
            return p
        }
        switch try string(f["type"], "frame.type") {
        case "challenge":
            let nonce = try hex(f["nonce"])
            guard nonce.count == 32 else { throw CheckFailure("nonce is not 32 bytes") }
            return .challenge(version: try u("version", as: UInt8.self), nonce: nonce, relayTimeMs: try u("relay_time_ms"))
        case "auth":
            let sig = try hex(f["sig"])
            guard sig.count == 64 else { throw CheckFailure("sig is not 64 bytes") }
            return .auth(publicKey: try pk("pk"), signature: sig)
        case "ready": return .ready(stored: try u("stored", as: UInt32.self), maxPayload: try u("max_payload", as: UInt32.self))
        case "send":
            return .send(sendID: try u("send_id", as: UInt32.self), recipient: try pk("recipient"), flags: try u("flags", as: UInt8.self),
                         payload: try hex(f["payload"])[...])
        case "deliver":
            return .deliver(sender: try pk("sender"), deliveryID: try u("delivery_id"), payload: try hex(f["payload"])[...])
        case "ack": return .ack(deliveryID: try u("delivery_id"))
        case "receipt":
            return .receipt(sendID: try u("send_id", as: UInt32.self), status: ReceiptStatus(rawValue: try u("status", as: UInt8.self)))
        case "error": return .error(code: try u("code", as: UInt16.self), message: try string(f["message"], "frame.message"))
        case let t: throw CheckFailure("unknown frame type \(t)")
        }
    }

    // MARK: crypto-vectors.json

    static func crypto(_ data: Data, _ stem: String, _ runner: CheckRunner) throws {
        for v in try Self.vectors(data) {
            let name = (v["name"] as? String) ?? "?"
            Self.each(runner, "\(stem)/\(name)") { try Self.cryptoVector(v) }
        }
    }

    private static func cryptoName(_ e: CryptoError) -> String {
        switch e {
        case .wrongLength: "wrongLength"
        case .invalidPublicKey: "invalidPublicKey"
        case .allZeroSharedSecret: "allZeroSharedSecret"
        case .authenticationFailure: "authenticationFailure"
        case .libsodium: "libsodium"
        }
    }

    private static func outcome<T>(_ expect: String, _ body: () throws(CryptoError) -> T, _ check: (T) -> CheckOutcome)
        -> CheckOutcome
    {
        do {
            let value = try body()
            return expect == "valid" ? check(value) : .fail("succeeded, expected \(expect)")
        } catch {
            let got = Self.cryptoName(error)
            return got == expect ? .pass : .fail("failed with \(got), expected \(expect)")
        }
    }

    private static func cryptoVector(_ v: [String: Any]) throws -> CheckOutcome {
        let inputs = try dict(v["inputs"], "inputs")
        let expect = try string(v["expect"], "expect")
        let expectedHex = v["hex"] as? String
        switch try string(v["operation"], "operation") {
        case "ed25519_seed_keypair":
            let seed = try hex(inputs["seed"])
            return Self.outcome(expect, { () throws(CryptoError) in try SigningSecretKey(seed: seed) }) { key in
                // x25519_sk/x25519_pk are checked by HomebaseCryptoTests: the conversion is not public API.
                let pk = (v["output"] as? [String: Any])?["ed25519_pk"] as? String
                return key.publicKey.hex == pk ? .pass : .fail("ed25519_pk \(key.publicKey.hex) != \(pk ?? "-")")
            }
        case "e2e_key":
            let me = try SigningSecretKey(seed: try hex(inputs["self_seed"]))
            guard let peer = PublicKey(bytes: try hex(inputs["peer_pk"])) else { throw CheckFailure("peer_pk size") }
            return Self.outcome(expect, { () throws(CryptoError) in try E2E.deriveKey(selfSecret: me, peer: peer) }) {
                // The key's bytes are not public API; compare through SymmetricKey's constant-time equality.
                let expected = expectedHex.flatMap { Hex.decode($0) }.flatMap { try? SymmetricKey(bytes: $0) }
                return $0 == expected ? .pass : .fail("derived key differs from \(expectedHex ?? "-")")
            }
        case "e2e_key_from_x25519":
            return .skip("the X25519-level entry point is internal to HomebaseCrypto (checked by its tests)")
        case "signature":
            guard let pk = PublicKey(bytes: try hex(inputs["pk"])) else { throw CheckFailure("pk size") }
            let context = try string(inputs["context"], "context")
            let message = try hex(inputs["message"])
            let sig = try hex(inputs["sig"])
            let ok = Signature.verify(sig, message: message, context: context, publicKey: pk)
            if expect == "signatureInvalid" { return ok ? .fail("signature verifies, expected invalid") : .pass }
            guard ok else { return .fail("signature does not verify") }
            if let seed = inputs["seed"] {
                let key = try SigningSecretKey(seed: try hex(seed))
                guard key.sign(message, context: context) == sig else { return .fail("re-signing gives other bytes") }
            }
            return .pass
        case "base_digest":
            guard let messages = inputs["messages"] as? [[String: String]] else { throw CheckFailure("messages") }
            let got = ConversationDigest.compute(messages: messages.map { ($0["role"] ?? "", $0["content"] ?? "") })
            return got == expectedHex ? .pass : .fail("digest \(got) != \(expectedHex ?? "-")")
        case "aead_xchacha20poly1305_ietf":
            let key = try SymmetricKey(bytes: try hex(inputs["key"]))
            let nonce = try hex(inputs["nonce"])
            let ad = try hex(inputs["ad"])
            if expect == "valid" {
                let plaintext = try hex(inputs["plaintext"])
                let sealed = try AEAD.seal(plaintext: plaintext, ad: ad, nonce: nonce, key: key)
                guard Hex.encode(sealed) == expectedHex else { return .fail("ciphertext differs") }
                guard try AEAD.open(ciphertext: sealed, ad: ad, nonce: nonce, key: key) == plaintext else {
                    return .fail("does not open to the plaintext")
                }
                return .pass
            }
            let ciphertext = try hex(inputs["ciphertext"])
            return Self.outcome(expect, { () throws(CryptoError) in
                try AEAD.open(ciphertext: ciphertext, ad: ad, nonce: nonce, key: key)
            }) { _ in .pass }
        case let op:
            return .fail("unknown operation \(op)")
        }
    }

    // MARK: crosscheck-v1.json

    static func crosscheck(_ data: Data, _ stem: String, _ runner: CheckRunner) throws {
        guard let c = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw CheckFailure("not an object")
        }
        func key(_ id: String) throws -> SigningSecretKey {
            try SigningSecretKey(seed: try hex(try dict(c[id], id)["ed25519_seed"]))
        }
        Self.each(runner, "\(stem)/identities") {
            for id in ["identity_a", "identity_b"] {
                let pk = try string(try dict(c[id], id)["ed25519_pk"], "\(id).ed25519_pk")
                guard try key(id).publicKey.hex == pk else { return .fail("\(id): seed does not give ed25519_pk") }
            }
            return .pass
        }
        Self.each(runner, "\(stem)/relay_auth") {
            let auth = try dict(c["relay_auth"], "relay_auth")
            let a = try key("identity_a")
            guard case .challenge(1, let nonce, _) = try RelayFrame(decoding: try hex(auth["challenge_frame"])),
                nonce == (try hex(auth["challenge_nonce"]))
            else { return .fail("challenge_frame is not a v1 CHALLENGE carrying challenge_nonce") }
            let frame = RelayFrame.auth(publicKey: a.publicKey, signature: a.sign(nonce, context: SignatureContext.relayAuth))
            return frame.encoded() == (try hex(auth["auth_frame_from_a"])) ? .pass : .fail("AUTH frame differs")
        }
        Self.each(runner, "\(stem)/frames") {
            for (name, value) in try dict(c["frames"], "frames") {
                let bytes = try hex(value)
                guard let f = try? RelayFrame(decoding: bytes), f.encoded() == bytes else {
                    return .fail("\(name) does not round-trip")
                }
            }
            return .pass
        }
        Self.each(runner, "\(stem)/e2e_key_a_b") {
            let a = try key("identity_a"), b = try key("identity_b")
            let ab = try E2E.deriveKey(selfSecret: a, peer: b.publicKey)
            let ba = try E2E.deriveKey(selfSecret: b, peer: a.publicKey)
            let expected = try SymmetricKey(bytes: try hex(c["e2e_key_a_b"]))
            return ab == expected && ba == expected ? .pass : .fail("derived key differs from e2e_key_a_b")
        }
        Self.each(runner, "\(stem)/envelope_a_to_b") {
            let e = try dict(c["envelope_a_to_b"], "envelope_a_to_b")
            let a = try key("identity_a"), b = try key("identity_b")
            guard let channel = e["channel"] as? NSNumber, let sentAt = e["sent_at_ms"] as? NSNumber else {
                throw CheckFailure("channel/sent_at_ms missing")
            }
            let header = EnvelopeHeader(
                channel: Channel(rawValue: channel.uint8Value), sender: a.publicKey, recipient: b.publicKey,
                messageID: try hex(e["message_id"]), sentAtMs: sentAt.uint64Value, nonce: try hex(e["nonce"]))
            let plaintext = Array(try string(e["plaintext_utf8"], "plaintext_utf8").utf8)
            let sealed = EnvelopeSealer.seal(
                header: header, plaintext: plaintext, key: try E2E.deriveKey(selfSecret: a, peer: b.publicKey))
            let expected = try hex(e["bytes"])
            guard sealed.encoded() == expected else { return .fail("sealed bytes differ") }
            let opened = try EnvelopeSealer.open(
                try Envelope(decoding: expected), key: try E2E.deriveKey(selfSecret: b, peer: a.publicKey))
            return opened == plaintext ? .pass : .fail("does not open to plaintext_utf8")
        }
        Self.each(runner, "\(stem)/advert_signed_by_a") {
            let ad = try dict(c["advert_signed_by_a"], "advert_signed_by_a")
            let a = try key("identity_a")
            let payload = Array(try string(ad["payload_utf8"], "payload_utf8").utf8)
            let sig = a.sign(payload, context: SignatureContext.advert)
            guard Hex.encode(sig) == (try string(ad["sig"], "sig")) else { return .fail("signature differs") }
            let json = try JSONSerialization.data(withJSONObject: try dict(ad["message_json"], "message_json"))
            guard case .advert(let blob) = try Message(json: Array(json)), blob.payload == payload,
                blob.signature == sig
            else { return .fail("message_json does not decode to the advert") }
            let verdict = ReceiverRules.verifySigned(kind: "advert", payload: payload, signature: sig, signer: a.publicKey)
            return verdict == "valid" ? .pass : .fail("advert verifies as \(verdict)")
        }
        Self.each(runner, "\(stem)/conversation_base_digest") {
            let d = try dict(c["conversation_base_digest"], "conversation_base_digest")
            guard let messages = d["messages"] as? [[String: String]] else { throw CheckFailure("messages") }
            let got = ConversationDigest.compute(messages: messages.map { ($0["role"] ?? "", $0["content"] ?? "") })
            let expected = try string(d["base_digest"], "base_digest")
            return got == expected ? .pass : .fail("digest \(got) != \(expected)")
        }
    }

    // MARK: envelope-vectors.json

    static func envelopes(_ data: Data, _ stem: String, _ runner: CheckRunner) throws {
        let file = try JSONDecoder().decode(EnvelopeVectorFile.self, from: data)
        for v in file.vectors {
            Self.each(runner, "\(stem)/\(v.name)") { try Self.check(v) }
        }
    }

    public static func check(_ v: EnvelopeVector) throws -> CheckOutcome {
        let receiver = try SigningSecretKey(seed: try hex(v.inputs.receiverSeed))
        guard let deliverSender = PublicKey(hex: v.inputs.deliverSender) else { throw CheckFailure("deliver_sender") }
        guard let relation = ReceiverRules.relation(named: v.inputs.relation) else { throw CheckFailure("relation") }
        let seen = Set(try v.inputs.seenIds.map { try hex($0) })
        let result = ReceiverRules.receive(
            envelope: try hex(v.inputs.envelope), receiver: receiver, deliverSender: deliverSender,
            nowMs: v.inputs.nowMs, relation: relation, seenIDs: seen)
        switch result {
        case .success(let accepted):
            guard v.expect == "valid" else { return .fail("accepted, expected drop \(v.expect)") }
            if let p = v.plaintext, Hex.encode(accepted.plaintext) != p { return .fail("plaintext differs") }
            if let t = v.messageType, accepted.message.type != t {
                return .fail("message type \(accepted.message.type), expected \(t)")
            }
            return .pass
        case .failure(let e):
            return e.reason == v.expect ? .pass : .fail("dropped as \(e.reason), expected \(v.expect)")
        }
    }

    // MARK: message-vectors.json

    static func messages(_ data: Data, _ stem: String, _ runner: CheckRunner) throws {
        let file = try JSONDecoder().decode(MessageVectorFile.self, from: data)
        for v in file.vectors {
            Self.each(runner, "\(stem)/\(v.name)") { try Self.check(v) }
        }
    }

    public static func check(_ v: MessageVector) throws -> CheckOutcome {
        switch v.operation {
        case "decode":
            let json = Array(try string(v.inputs["json"], "inputs.json").utf8)
            do {
                let m = try Message(json: json)
                guard v.expect == "valid" else { return .fail("decoded as \(m.type), expected \(v.expect)") }
                if let t = v.type, m.type != t { return .fail("type \(m.type), expected \(t)") }
                // What we encode must decode back to the same message.
                guard (try? Message(json: m.jsonBytes())) == m else { return .fail("does not round-trip") }
                return .pass
            } catch {
                let got = ReceiverRules.name(of: error)
                return got == v.expect ? .pass : .fail("rejected as \(got), expected \(v.expect)")
            }
        case "pad":
            let got = Hex.encode(EnvelopePadding.pad(try hex(v.inputs["hex"])))
            return got == v.output ? .pass : .fail("padded to \(got.count / 2) bytes, expected \((v.output ?? "").count / 2)")
        case "unpad":
            let got = Hex.encode(Array(EnvelopePadding.unpad(try hex(v.inputs["hex"]))))
            return got == v.output ? .pass : .fail("unpadded to \(got), expected \(v.output ?? "-")")
        default:
            return .fail("unknown operation \(v.operation)")
        }
    }

    // MARK: signed-payload-vectors.json

    static func signedPayloads(_ data: Data, _ stem: String, _ runner: CheckRunner) throws {
        let file = try JSONDecoder().decode(SignedPayloadVectorFile.self, from: data)
        for v in file.vectors {
            Self.each(runner, "\(stem)/\(v.name)") { try Self.check(v) }
        }
    }

    public static func check(_ v: SignedPayloadVector) throws -> CheckOutcome {
        guard let signer = PublicKey(hex: v.inputs.signer) else { throw CheckFailure("signer") }
        let blob: SignedBlob
        switch try Message(json: Array(v.inputs.message.utf8)) {
        case .advert(let b) where v.kind == "advert": blob = b
        case .roster(let b) where v.kind == "roster": blob = b
        case .contactGrant(let b) where v.kind == "grant": blob = b
        case let m: return .fail("message is \(m.type), not a \(v.kind)")
        }
        guard Hex.encode(blob.payload) == v.inputs.payload, Hex.encode(blob.signature) == v.inputs.sig else {
            return .fail("the message's base64 does not match payload/sig")
        }
        let got = ReceiverRules.verifySigned(kind: v.kind, payload: blob.payload, signature: blob.signature,
                                             signer: signer)
        return got == v.expect ? .pass : .fail("verified as \(got), expected \(v.expect)")
    }
}

// MARK: Field helpers

func hex(_ value: Any?) throws -> [UInt8] {
    guard let s = value as? String else { throw CheckFailure("missing hex field") }
    guard let b = Hex.decode(s) else { throw CheckFailure("bad hex: \(s.prefix(40))") }
    return b
}

func string(_ value: Any?, _ field: String) throws -> String {
    guard let s = value as? String else { throw CheckFailure("missing \(field)") }
    return s
}

func dict(_ value: Any?, _ field: String) throws -> [String: Any] {
    guard let d = value as? [String: Any] else { throw CheckFailure("missing \(field)") }
    return d
}
