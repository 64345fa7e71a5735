import FoundationEssentials
import Testing
@testable import HomebaseCore

struct RelayFrameVectorFile: Decodable {
    var vectors: [RelayFrameVector]
}

struct RelayFrameVector: Decodable, CustomTestStringConvertible, Sendable {
    var name: String
    var comment: String
    var hex: String
    var expect: String
    var frame: FrameFields?
    var testDescription: String { self.name }

    struct FrameFields: Decodable, Sendable {
        var type: String
        var version: UInt8?
        var nonce: String?
        var relay_time_ms: UInt64?
        var pk: String?
        var sig: String?
        var stored: UInt32?
        var max_payload: UInt32?
        var send_id: UInt32?
        var recipient: String?
        var flags: UInt8?
        var payload: String?
        var sender: String?
        var delivery_id: UInt64?
        var status: UInt8?
        var code: UInt16?
        var message: String?

        var relayFrame: RelayFrame {
            switch self.type {
            case "challenge": .challenge(version: self.version!, nonce: unhex(self.nonce!), relayTimeMs: self.relay_time_ms!)
            case "auth": .auth(publicKey: PublicKey(hex: self.pk!)!, signature: unhex(self.sig!))
            case "ready": .ready(stored: self.stored!, maxPayload: self.max_payload!)
            case "send":
                .send(sendID: self.send_id!, recipient: PublicKey(hex: self.recipient!)!, flags: self.flags!,
                      payload: unhex(self.payload!)[...])
            case "deliver":
                .deliver(sender: PublicKey(hex: self.sender!)!, deliveryID: self.delivery_id!, payload: unhex(self.payload!)[...])
            case "ack": .ack(deliveryID: self.delivery_id!)
            case "receipt": .receipt(sendID: self.send_id!, status: ReceiptStatus(rawValue: self.status!))
            case "error": .error(code: self.code!, message: self.message!)
            default: preconditionFailure("unknown vector frame type \(self.type)")
            }
        }
    }
}

let relayFrameVectors: [RelayFrameVector] = (try? Fixtures.load("relay-frames.json", as: RelayFrameVectorFile.self).vectors) ?? []

@Suite struct RelayFrameTests {
    @Test func vectorFileIsPresent() {
        #expect(relayFrameVectors.count >= 30)
    }

    @Test(arguments: relayFrameVectors)
    func vector(_ v: RelayFrameVector) throws {
        let bytes = unhex(v.hex)
        if v.expect == "valid" {
            let expected = v.frame!.relayFrame
            let decoded = try RelayFrame(decoding: bytes)
            #expect(decoded == expected)
            #expect(expected.encoded() == bytes)
            #expect(expected.encodedCount == bytes.count)
        } else {
            #expect {
                _ = try RelayFrame(decoding: bytes)
            } throws: { error in
                let e = error as! RelayFrameError
                switch (e, v.expect) {
                case (.empty, "empty"), (.unknownType, "unknownType"), (.truncated, "truncated"),
                    (.trailingBytes, "trailingBytes"), (.invalidUTF8, "invalidUTF8"): return true
                default: return false
                }
            }
        }
    }

    @Test func everyPrefixOfAValidFrameIsTruncatedNotATrap() throws {
        for v in relayFrameVectors where v.expect == "valid" {
            let bytes = unhex(v.hex)
            let type = v.frame!.type
            // SEND and DELIVER carry a payload of any length, so only prefixes shorter than their header fail.
            let minimum = type == "send" ? RelayFrame.sendHeaderByteCount
                : type == "deliver" ? RelayFrame.deliverHeaderByteCount : type == "error" ? 3 : bytes.count
            for n in 0..<minimum {
                #expect(throws: RelayFrameError.self) { _ = try RelayFrame(decoding: Array(bytes[0..<n])) }
            }
        }
    }

    @Test func aSendBuiltInPlaceIsTheEncodedFrame() throws {
        let recipient = PublicKey(bytes: (0..<32).map { UInt8($0) })!
        let payload: [UInt8] = [9, 8, 7, 6]
        var built: [UInt8] = []
        RelayFrame.appendSendHead(sendID: 0, recipient: recipient, flags: SendFlags.store, to: &built)
        #expect(built.count == RelayFrame.sendHeaderByteCount)
        built += payload
        RelayFrame.setSendID(0xA1B2_C3D4, inEncodedSend: &built)
        let frame = RelayFrame.send(sendID: 0xA1B2_C3D4, recipient: recipient, flags: SendFlags.store, payload: payload[...])
        #expect(built == frame.encoded())
        #expect(try RelayFrame(decoding: built[...]) == frame)
    }

    @Test func decodingASliceWithANonZeroStartIndexKeepsOffsets() throws {
        let frame = RelayFrame.send(sendID: 9, recipient: PublicKey(bytes: [UInt8](repeating: 7, count: 32))!,
                                    flags: 1, payload: [1, 2, 3][...])
        let padded = [0xEE, 0xEE] + frame.encoded()
        let decoded = try RelayFrame(decoding: padded[2...])
        #expect(decoded == frame)
    }

    @Test func randomBytesNeverTrap() {
        var rng = SplitMix(seed: 42)
        for _ in 0..<20_000 {
            let n = Int(rng.next() % 120)
            var b = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            if n > 0, rng.next() % 2 == 0 {
                b[0] = RelayFrameType.allCases[Int(rng.next() % 8)].rawValue
            }
            _ = try? RelayFrame(decoding: b)
        }
    }

    @Test func receiptStatusKeepsUnknownValues() {
        #expect(ReceiptStatus(rawValue: 9) == .unknown(9))
        #expect(ReceiptStatus(rawValue: 9).rawValue == 9)
        #expect(ReceiptStatus.recipientOffline.isFailure)
        #expect(!ReceiptStatus.stored.isFailure)
        for raw in UInt8(0)...6 { #expect(ReceiptStatus(rawValue: raw).rawValue == raw) }
    }
}

/// A tiny deterministic PRNG for hostile-input tests.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
