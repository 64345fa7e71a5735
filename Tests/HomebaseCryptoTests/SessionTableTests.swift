import Foundation
import HomebaseCore
import Testing

@testable import HomebaseCrypto

/// The v2 session layer (Protocol/envelope.md §7): Python vectors replayed, epochs, lifetimes, concurrent
/// handshakes, and forward secrecy against the long-term keys.
@Suite struct SessionTableTests {
    static let t0: UInt64 = 1_764_400_000_000

    /// Two devices and their tables, with helpers that move envelopes between them.
    final class Pair {
        let a = SigningSecretKey.generate()
        let b = SigningSecretKey.generate()
        var ta: SessionTable
        var tb: SessionTable
        var counter: UInt8 = 0

        init() throws {
            self.ta = try SessionTable(identity: self.a)
            self.tb = try SessionTable(identity: self.b)
        }

        func id() -> [UInt8] {
            self.counter &+= 1
            return [UInt8](repeating: self.counter, count: 16)
        }

        /// a initiates, b answers, a completes; returns both handshake envelopes.
        func handshake(now: UInt64, sessionID: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]) throws -> [[UInt8]] {
            let m1 = try self.ta.initiate(to: self.b.publicKey, channel: .sibling, sessionID: sessionID,
                                          ephemeral: .generate(), messageID: self.id(), sentAtMs: now, nowMs: now)
            let replyID = self.id()
            guard case .success(.initiation(let responder)) = self.tb.receive(
                try SessionEnvelope(decoding: m1[...]), nowMs: now, ephemeral: { .generate() },
                replyMessageID: { replyID }, replySentAtMs: now)
            else { throw Fixtures.Malformed(description: "initiation did not open") }
            self.tb.commit(responder)
            guard case .success(.established) = self.ta.receive(
                try SessionEnvelope(decoding: responder.reply[...]), nowMs: now, ephemeral: { .generate() },
                replyMessageID: { [] }, replySentAtMs: 0)
            else { throw Fixtures.Malformed(description: "response did not complete") }
            return [m1, responder.reply]
        }

        func seal(fromA: Bool, _ text: String, now: UInt64) -> [UInt8]? {
            var out: [UInt8] = []
            let id = self.id()
            let ok = fromA
                ? self.ta.sealTransport(to: self.b.publicKey, channel: .sibling, messageID: id, sentAtMs: now,
                                        nowMs: now, appendingTo: &out) { $0 += Array(text.utf8) }
                : self.tb.sealTransport(to: self.a.publicKey, channel: .sibling, messageID: id, sentAtMs: now,
                                        nowMs: now, appendingTo: &out) { $0 += Array(text.utf8) }
            return ok ? out : nil
        }

        func open(atA: Bool, _ bytes: [UInt8], now: UInt64) -> Result<String, EnvelopeError> {
            let envelope: SessionEnvelope
            do { envelope = try SessionEnvelope(decoding: bytes[...]) } catch { return .failure(error) }
            let replyID = self.id()
            let result = atA
                ? self.ta.receive(envelope, nowMs: now, ephemeral: { .generate() }, replyMessageID: { replyID },
                                  replySentAtMs: now)
                : self.tb.receive(envelope, nowMs: now, ephemeral: { .generate() }, replyMessageID: { replyID },
                                  replySentAtMs: now)
            switch result {
            case .success(.transport(_, let plaintext)):
                return .success(String(decoding: EnvelopePadding.unpad(plaintext), as: UTF8.self))
            case .success: return .failure(.malformedPlaintext)
            case .failure(let e): return .failure(e)
            }
        }
    }

    // MARK: Vectors from tools/vectors/envelope_v2.py

    struct V2: Decodable {
        struct Step: Decodable {
            var messageId: String
            var sentAtMs: UInt64
            var envelope: String
        }
        struct Transport: Decodable {
            var name: String
            var from: String
            var counter: UInt64
            var messageId: String
            var sentAtMs: UInt64
            var plaintextUtf8: String
            var epochKey: String
            var envelope: String
        }
        struct Setup: Decodable {
            var name: String
            var envelope: String
        }
        /// The receiver's starting state (the file's `receiver_state` says what each field means).
        struct State: Decodable {
            var handshake: String
            var opened: [String]
            var nowMs: UInt64
        }
        struct ReceiverVector: Decodable {
            var name: String
            var receiver: String
            var state: State
            var envelope: String
            var expect: String
        }
        var initiatorSeed: String
        var responderSeed: String
        var initiatorEphemeral: String
        var responderEphemeral: String
        var sessionId: String
        var channel: UInt8
        var initiation: Step
        var response: Step
        var handshakeHash: String
        var keyInitiatorToResponder: String
        var keyResponderToInitiator: String
        var transport: [Transport]
        var setupTransport: [Setup]
        var receiverVectors: [ReceiverVector]
    }

    @Test func pythonVectorsReplay() throws {
        let v = try Fixtures.load("envelope-v2-vectors.json", as: V2.self)
        let a = try SigningSecretKey(seed: unhex(v.initiatorSeed))
        let b = try SigningSecretKey(seed: unhex(v.responderSeed))
        var ta = try SessionTable(identity: a)
        var tb = try SessionTable(identity: b)
        let channel = Channel(rawValue: v.channel)
        let now = v.initiation.sentAtMs

        let m1 = try ta.initiate(to: b.publicKey, channel: channel, sessionID: unhex(v.sessionId),
                                 ephemeral: NoiseKeyPair(secretBytes: unhex(v.initiatorEphemeral)),
                                 messageID: unhex(v.initiation.messageId), sentAtMs: now, nowMs: now)
        #expect(Hex.encode(m1) == v.initiation.envelope)
        #expect(try SessionEnvelope(decoding: m1[...]).encoded() == m1)  // the codec round-trips
        let responderEphemeral = try NoiseKeyPair(secretBytes: unhex(v.responderEphemeral))
        let replyID = try unhex(v.response.messageId)
        guard case .success(.initiation(let responder)) = tb.receive(
            try SessionEnvelope(decoding: m1[...]), nowMs: now, ephemeral: { responderEphemeral },
            replyMessageID: { replyID }, replySentAtMs: v.response.sentAtMs)
        else { Issue.record("initiation did not open"); return }
        #expect(Hex.encode(responder.reply) == v.response.envelope)
        #expect(Hex.encode(responder.handshakeHash) == v.handshakeHash)
        tb.commit(responder)
        guard case .success(.established) = ta.receive(
            try SessionEnvelope(decoding: responder.reply[...]), nowMs: now, ephemeral: { .generate() },
            replyMessageID: { [] }, replySentAtMs: 0)
        else { Issue.record("response did not complete"); return }
        #expect(ta.handshakeHashes(with: b.publicKey).map { Hex.encode($0) } == [v.handshakeHash])
        let (establishedA, establishedB) = (ta, tb)

        // Transports: each side seals its messages in counter order (filler up to a vector's counter), and the
        // bytes equal Python's; the other side opens them.
        var sent: [String: UInt64] = ["initiator": 0, "responder": 0]
        for t in v.transport {
            let fromA = t.from == "initiator"
            while sent[t.from]! < t.counter {
                var filler: [UInt8] = []
                _ = fromA
                    ? ta.sealTransport(to: b.publicKey, channel: channel, messageID: [UInt8](repeating: 0, count: 16),
                                       sentAtMs: now, nowMs: now, appendingTo: &filler) { $0 += [0x7B, 0x7D] }
                    : tb.sealTransport(to: a.publicKey, channel: channel, messageID: [UInt8](repeating: 0, count: 16),
                                       sentAtMs: now, nowMs: now, appendingTo: &filler) { $0 += [0x7B, 0x7D] }
                sent[t.from]! += 1
            }
            var out: [UInt8] = []
            let ok = fromA
                ? ta.sealTransport(to: b.publicKey, channel: channel, messageID: try unhex(t.messageId),
                                   sentAtMs: t.sentAtMs, nowMs: now, appendingTo: &out) { $0 += Array(t.plaintextUtf8.utf8) }
                : tb.sealTransport(to: a.publicKey, channel: channel, messageID: try unhex(t.messageId),
                                   sentAtMs: t.sentAtMs, nowMs: now, appendingTo: &out) { $0 += Array(t.plaintextUtf8.utf8) }
            sent[t.from]! += 1
            #expect(ok)
            #expect(Hex.encode(out) == t.envelope, "\(t.name)")
            let env = try SessionEnvelope(decoding: try unhex(t.envelope)[...])
            let result = fromA
                ? tb.receive(env, nowMs: now, ephemeral: { .generate() }, replyMessageID: { [] }, replySentAtMs: 0)
                : ta.receive(env, nowMs: now, ephemeral: { .generate() }, replyMessageID: { [] }, replySentAtMs: 0)
            guard case .success(.transport(_, let plaintext)) = result else {
                Issue.record("\(t.name) did not open: \(result)")
                continue
            }
            #expect(Array(EnvelopePadding.unpad(plaintext)) == Array(t.plaintextUtf8.utf8))
        }

        // Each receiver vector from the state it states, on a copy of the tables just after the handshake.
        let named = Dictionary(uniqueKeysWithValues: v.transport.map { ($0.name, $0.envelope) }
            + v.setupTransport.map { ($0.name, $0.envelope) })
        for r in v.receiverVectors {
            let atA = r.receiver == "initiator"
            var table: SessionTable
            switch r.state.handshake {
            case "established":
                table = atA ? establishedA : establishedB
            case "initiation_pending":
                #expect(atA, "\(r.name): only the initiator has an initiation pending")
                table = try SessionTable(identity: a)
                _ = try table.initiate(to: b.publicKey, channel: channel, sessionID: unhex(v.sessionId),
                                       ephemeral: NoiseKeyPair(secretBytes: unhex(v.initiatorEphemeral)),
                                       messageID: unhex(v.initiation.messageId), sentAtMs: now, nowMs: now)
            default:
                Issue.record("\(r.name): unknown handshake state \(r.state.handshake)")
                continue
            }
            for name in r.state.opened {
                let env = try SessionEnvelope(decoding: try unhex(try #require(named[name], "\(r.name): \(name)"))[...])
                guard case .success(.transport) = table.receive(env, nowMs: now, ephemeral: { .generate() },
                                                                replyMessageID: { [] }, replySentAtMs: 0)
                else { Issue.record("\(r.name): its state's \(name) does not open"); break }
            }
            let bytes = try unhex(r.envelope)
            let got: String
            do {
                let env = try SessionEnvelope(decoding: bytes[...])
                switch table.receive(env, nowMs: r.state.nowMs, ephemeral: { .generate() }, replyMessageID: { replyID },
                                     replySentAtMs: r.state.nowMs) {
                case .success: got = "valid"
                case .failure(let e): got = e.reason
                }
            } catch {
                got = error.reason
            }
            #expect(got == r.expect, "\(r.name)")
        }
    }

    // MARK: Behaviour

    @Test func bothDirectionsOpenAndTheHandshakeHashesAgree() throws {
        let p = try Pair()
        _ = try p.handshake(now: Self.t0)
        #expect(p.ta.handshakeHashes(with: p.b.publicKey) == p.tb.handshakeHashes(with: p.a.publicKey))
        let m = try #require(p.seal(fromA: true, "{\"type\":\"infer.request\"}", now: Self.t0))
        #expect(m.count == SessionEnvelopeHeader.byteCount + 256 + 16)  // padded as v1
        #expect(p.open(atA: false, m, now: Self.t0) == .success("{\"type\":\"infer.request\"}"))
        let r = try #require(p.seal(fromA: false, "{\"type\":\"infer.chunk\"}", now: Self.t0))
        #expect(p.open(atA: true, r, now: Self.t0) == .success("{\"type\":\"infer.chunk\"}"))
        // Each direction has its own key: B's message with A's sender and recipient swapped in does not open.
        var reflected = r
        reflected.replaceSubrange(2..<34, with: p.a.publicKey.bytes)
        reflected.replaceSubrange(34..<66, with: p.b.publicKey.bytes)
        #expect(p.open(atA: true, reflected, now: Self.t0) == .failure(.noSession))
        #expect(p.open(atA: false, reflected, now: Self.t0) == .failure(.openFailed))
    }

    @Test func noSessionMeansHandshakeThenPendingThenReady() throws {
        let p = try Pair()
        #expect(p.ta.readiness(for: p.b.publicKey, nowMs: Self.t0) == .needsHandshake)
        #expect(p.seal(fromA: true, "{}", now: Self.t0) == nil)
        _ = try p.ta.initiate(to: p.b.publicKey, channel: .sibling, sessionID: [9, 9, 9, 9, 9, 9, 9, 9],
                              ephemeral: .generate(), messageID: p.id(), sentAtMs: Self.t0, nowMs: Self.t0)
        #expect(p.ta.readiness(for: p.b.publicKey, nowMs: Self.t0 + 1) == .handshakePending)
        // Unanswered for the timeout: the sweep reports it and the peer needs a handshake again.
        #expect(p.ta.sweep(nowMs: Self.t0 + SessionTable.handshakeTimeoutMs) == [p.b.publicKey])
        #expect(p.ta.readiness(for: p.b.publicKey, nowMs: Self.t0 + SessionTable.handshakeTimeoutMs)
                == .needsHandshake)
        _ = try p.handshake(now: Self.t0 + 20_000)
        #expect(p.ta.readiness(for: p.b.publicKey, nowMs: Self.t0 + 20_000) == .ready(rekeyDue: false))
    }

    @Test func keysMoveForwardEvery1024MessagesAndOldEpochsAreErased() throws {
        let p = try Pair()
        _ = try p.handshake(now: Self.t0)
        var sealed: [[UInt8]] = []
        for i in 0..<(3 * 1024 + 1) { sealed.append(try #require(p.seal(fromA: true, "{\"n\":\(i)}", now: Self.t0))) }
        // Reordered across an epoch boundary: 1024 (epoch 1) before 1023 (epoch 0) both open.
        #expect(p.open(atA: false, sealed[1024], now: Self.t0) == .success("{\"n\":1024}"))
        #expect(p.open(atA: false, sealed[1023], now: Self.t0) == .success("{\"n\":1023}"))
        // Jumping to epoch 3 keeps epochs 3 and 2; epochs 0 and 1 are erased: their messages no longer open.
        #expect(p.open(atA: false, sealed[3072], now: Self.t0) == .success("{\"n\":3072}"))
        #expect(p.open(atA: false, sealed[2048], now: Self.t0) == .success("{\"n\":2048}"))
        #expect(p.open(atA: false, sealed[1500], now: Self.t0) == .failure(.openFailed))
        #expect(p.open(atA: false, sealed[5], now: Self.t0) == .failure(.openFailed))
        // A forged far-ahead counter is not adopted: epoch 3 still opens afterwards.
        var forged = sealed[3072]
        forged[SessionEnvelopeHeader.byteCount - 2] = 0x30  // counter 12288 + ...: epoch 12
        #expect(p.open(atA: false, forged, now: Self.t0) == .failure(.openFailed))
        #expect(p.open(atA: false, sealed[3000], now: Self.t0) == .success("{\"n\":3000}"))
    }

    @Test func sessionsRekeyAfterFiveMinutesStopSendingAtTenAndAreErasedAtEleven() throws {
        let p = try Pair()
        _ = try p.handshake(now: Self.t0)
        let early = try #require(p.seal(fromA: true, "{}", now: Self.t0))
        #expect(p.ta.readiness(for: p.b.publicKey, nowMs: Self.t0 + SessionTable.rekeyAfterMs)
                == .ready(rekeyDue: true))
        let tooOld = Self.t0 + SessionTable.rejectAfterMs
        #expect(p.ta.readiness(for: p.b.publicKey, nowMs: tooOld) == .needsHandshake)
        #expect(p.seal(fromA: true, "{}", now: tooOld) == nil)
        // Between reject and erase a straggler still opens; after erase the session is gone.
        #expect(p.open(atA: false, early, now: tooOld) == .success("{}"))
        let erased = Self.t0 + SessionTable.eraseAfterMs
        #expect(p.open(atA: false, early, now: erased) == .failure(.noSession))
        _ = p.tb.sweep(nowMs: erased)
        #expect(p.tb.sessionCount(with: p.a.publicKey) == 0)
    }

    @Test func aRekeyHandshakeMakesANewSessionAndTheOldOneStillOpens() throws {
        let p = try Pair()
        _ = try p.handshake(now: Self.t0, sessionID: [1, 1, 1, 1, 1, 1, 1, 1])
        let old = try #require(p.seal(fromA: true, "{\"old\":1}", now: Self.t0))
        let later = Self.t0 + SessionTable.rekeyAfterMs
        _ = try p.handshake(now: later, sessionID: [2, 2, 2, 2, 2, 2, 2, 2])
        #expect(p.ta.readiness(for: p.b.publicKey, nowMs: later) == .ready(rekeyDue: false))
        let new = try #require(p.seal(fromA: true, "{\"new\":1}", now: later))
        #expect(Array(new[91..<99]) == [2, 2, 2, 2, 2, 2, 2, 2])  // sent on the newest session
        #expect(p.open(atA: false, new, now: later) == .success("{\"new\":1}"))
        #expect(p.open(atA: false, old, now: later) == .success("{\"old\":1}"))
    }

    @Test func concurrentInitiationsBothEstablishAndEachSideMaySendOnEither() throws {
        let p = try Pair()
        let sa: [UInt8] = [0xA, 0, 0, 0, 0, 0, 0, 0], sb: [UInt8] = [0xB, 0, 0, 0, 0, 0, 0, 0]
        let m1a = try p.ta.initiate(to: p.b.publicKey, channel: .sibling, sessionID: sa, ephemeral: .generate(),
                                    messageID: p.id(), sentAtMs: Self.t0, nowMs: Self.t0)
        let m1b = try p.tb.initiate(to: p.a.publicKey, channel: .sibling, sessionID: sb, ephemeral: .generate(),
                                    messageID: p.id(), sentAtMs: Self.t0, nowMs: Self.t0)
        // Each answers the other's initiation.
        guard case .success(.initiation(let rb)) = p.tb.receive(
            try SessionEnvelope(decoding: m1a[...]), nowMs: Self.t0, ephemeral: { .generate() },
            replyMessageID: { [UInt8](repeating: 1, count: 16) }, replySentAtMs: Self.t0),
            case .success(.initiation(let ra)) = p.ta.receive(
                try SessionEnvelope(decoding: m1b[...]), nowMs: Self.t0, ephemeral: { .generate() },
                replyMessageID: { [UInt8](repeating: 2, count: 16) }, replySentAtMs: Self.t0)
        else { Issue.record("initiations did not open"); return }
        p.tb.commit(rb)
        p.ta.commit(ra)
        guard case .success(.established) = p.ta.receive(try SessionEnvelope(decoding: rb.reply[...]), nowMs: Self.t0,
                                                          ephemeral: { .generate() }, replyMessageID: { [] },
                                                          replySentAtMs: 0),
            case .success(.established) = p.tb.receive(try SessionEnvelope(decoding: ra.reply[...]), nowMs: Self.t0,
                                                        ephemeral: { .generate() }, replyMessageID: { [] },
                                                        replySentAtMs: 0)
        else { Issue.record("responses did not complete"); return }
        #expect(p.ta.sessionCount(with: p.b.publicKey) == 2)
        #expect(p.tb.sessionCount(with: p.a.publicKey) == 2)
        let fromA = try #require(p.seal(fromA: true, "{\"x\":1}", now: Self.t0))
        let fromB = try #require(p.seal(fromA: false, "{\"y\":1}", now: Self.t0))
        #expect(p.open(atA: false, fromA, now: Self.t0) == .success("{\"x\":1}"))
        #expect(p.open(atA: true, fromB, now: Self.t0) == .success("{\"y\":1}"))
    }

    /// Bad input is normal input: truncations, bit flips and random bytes in any position of every kind of v2
    /// envelope give a defined drop, never a trap, and never open.
    @Test func mutatedEnvelopesAreDroppedNeverOpened() throws {
        let p = try Pair()
        let handshake = try p.handshake(now: Self.t0)
        let transport = try #require(p.seal(fromA: true, "{\"type\":\"infer.cancel\",\"id\":\"m\"}", now: Self.t0))
        var rng = SystemRandomNumberGenerator()
        for original in handshake + [transport] {
            for _ in 0..<300 {
                var bytes = original
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: bytes.removeLast(Int.random(in: 1...bytes.count, using: &rng))
                case 1: bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
                default: bytes = (0..<Int.random(in: 0..<400, using: &rng)).map { _ in UInt8.random(in: 0...255) }
                }
                if bytes == original { continue }
                for atA in [true, false] {
                    if case .success(let text) = p.open(atA: atA, bytes, now: Self.t0) {
                        Issue.record("a mutated envelope opened: \(text)")
                    }
                }
            }
        }
    }

    @Test func atMostFourSessionsPerPeerAreHeldAndTheOldestIsErased() throws {
        let p = try Pair()
        _ = try p.handshake(now: Self.t0, sessionID: [0, 0, 0, 0, 0, 0, 0, 1])
        let first = try #require(p.seal(fromA: true, "{\"first\":1}", now: Self.t0))
        for i in 2...5 { _ = try p.handshake(now: Self.t0 + UInt64(i), sessionID: [0, 0, 0, 0, 0, 0, 0, UInt8(i)]) }
        #expect(p.ta.sessionCount(with: p.b.publicKey) == SessionTable.sessionsPerPeer)
        #expect(p.tb.sessionCount(with: p.a.publicKey) == SessionTable.sessionsPerPeer)
        #expect(p.open(atA: false, first, now: Self.t0 + 10) == .failure(.noSession))
    }

    @Test func anInitiationFromAnotherStaticKeyThanTheSenderIsRefused() throws {
        let p = try Pair()
        let c = SigningSecretKey.generate()
        var tc = try SessionTable(identity: c)
        var m1 = try tc.initiate(to: p.b.publicKey, channel: .sibling, sessionID: [3, 3, 3, 3, 3, 3, 3, 3],
                                 ephemeral: .generate(), messageID: p.id(), sentAtMs: Self.t0, nowMs: Self.t0)
        // Rewriting the sender breaks the header payload check first.
        m1.replaceSubrange(2..<34, with: p.a.publicKey.bytes)
        #expect(p.open(atA: false, m1, now: Self.t0) == .failure(.openFailed))
    }

    /// The issue's "done when": a recorded transcript of the relay's traffic cannot be opened with the long-term
    /// keys alone. The attacker holds both devices' Ed25519 keys and every envelope, and tries every way in.
    @Test func aRecordedTranscriptCannotBeOpenedWithTheLongTermKeys() throws {
        let p = try Pair()
        var transcript = try p.handshake(now: Self.t0)
        let secret = "{\"type\":\"infer.request\",\"messages\":[{\"role\":\"user\",\"content\":\"my diagnosis\"}]}"
        let request = try #require(p.seal(fromA: true, secret, now: Self.t0))
        let answer = try #require(p.seal(fromA: false, "{\"type\":\"infer.chunk\",\"text\":\"the answer\"}",
                                         now: Self.t0))
        transcript += [request, answer]
        // The devices themselves open them while the session lives.
        #expect(p.open(atA: false, request, now: Self.t0) == .success(secret))
        // The session is erased on both devices (its lifetime ended).
        _ = p.ta.sweep(nowMs: Self.t0 + SessionTable.eraseAfterMs)
        _ = p.tb.sweep(nowMs: Self.t0 + SessionTable.eraseAfterMs)
        #expect(p.open(atA: false, request, now: Self.t0 + SessionTable.eraseAfterMs) == .failure(.noSession))

        // 1. Fresh tables from the stolen long-term keys hold no session.
        var stolenA = try SessionTable(identity: p.a), stolenB = try SessionTable(identity: p.b)
        for bytes in [request, answer] {
            let env = try SessionEnvelope(decoding: bytes[...])
            for table in [0, 1] {
                let r = table == 0
                    ? stolenA.receive(env, nowMs: Self.t0, ephemeral: { .generate() }, replyMessageID: { [] },
                                      replySentAtMs: 0)
                    : stolenB.receive(env, nowMs: Self.t0, ephemeral: { .generate() }, replyMessageID: { [] },
                                      replySentAtMs: 0)
                guard case .failure(.noSession) = r else { Issue.record("opened with a fresh table: \(r)"); return }
            }
        }
        // 2. Replaying the recorded message 1 into B's stolen key (the most an attacker can do with it) makes a
        //    session, but with a new responder ephemeral: the recorded transport messages do not open in it.
        guard case .success(.initiation(let replayed)) = stolenB.receive(
            try SessionEnvelope(decoding: transcript[0][...]), nowMs: Self.t0, ephemeral: { .generate() },
            replyMessageID: { [UInt8](repeating: 5, count: 16) }, replySentAtMs: Self.t0)
        else { Issue.record("the recorded initiation should still open with B's key (IK message 1 is not FS)"); return }
        stolenB.commit(replayed)
        let r = stolenB.receive(try SessionEnvelope(decoding: request[...]), nowMs: Self.t0,
                                ephemeral: { .generate() }, replyMessageID: { [] }, replySentAtMs: 0)
        guard case .failure(.openFailed) = r else { Issue.record("recorded request opened: \(r)"); return }
        // 3. The v1 static-static key opens none of it, under any nonce layout of the body.
        let e2e = try E2E.deriveKey(selfSecret: p.a, peer: p.b.publicKey)
        for bytes in transcript {
            let env = try SessionEnvelope(decoding: bytes[...])
            #expect((try? Noise.decrypt(key: e2e, n: env.header.counter, ad: env.header.encoded(),
                                        ciphertext: env.body)) == nil)
            #expect((try? AEAD.open(ciphertext: env.body.dropFirst(24), ad: env.header.encoded(),
                                    nonce: env.body.prefix(24), key: e2e)) == nil)
        }
        // 4. Nowhere in the transcript is the plaintext visible.
        for bytes in transcript {
            #expect(Hex.encode(bytes).range(of: Hex.encode(Array("my diagnosis".utf8))) == nil)
        }
    }
}
