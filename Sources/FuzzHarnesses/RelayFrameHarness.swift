import HomebaseCore

/// `RelayFrame(decoding:)` (Protocol/relay.md §3). Input: one WebSocket message's payload.
///
/// Checks: a frame that decodes encodes back to exactly its bytes (the layout has one spelling), with
/// `encodedCount` bytes, and decodes again to itself; a slice that does not start at index 0 (how the relay
/// hands a frame over) decodes as the array does; a SEND rebuilt with `appendSendHead` and `setSendID` is the
/// same bytes; a refusal names the first rule broken (`empty` only for no bytes).
enum RelayFrameHarness {
    static let target = FuzzTarget(
        "relay-frame", "relay frame codec: decode→encode is the identity, slices, SEND head writer",
        seeds: Self.seeds, run: Self.run)

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        let decoded = Result { () throws(RelayFrameError) in try RelayFrame(decoding: input) }
        let padded = [0xA5, 0x5A] + input
        let fromSlice = Result { () throws(RelayFrameError) in try RelayFrame(decoding: padded[2...]) }
        try checkEqual(fromSlice, decoded, "a slice decodes otherwise than an array")
        switch decoded {
        case .failure(let error):
            try check((error == .empty) == input.isEmpty, "\(error) for \(input.count) bytes")
            if case .unknownType(let type) = error {
                try check(RelayFrameType(rawValue: type) == nil, "known type \(type) refused as unknown")
            }
        case .success(let frame):
            try checkEqual(frame.type.rawValue, input[0], "type byte")
            let encoded = frame.encoded()
            try checkEqual(encoded, input, "encode(decode(bytes))")
            try checkEqual(frame.encodedCount, encoded.count, "encodedCount")
            try checkEqual(try? RelayFrame(decoding: encoded), frame, "decode(encode(frame))")
            if case .send(let sendID, let recipient, let flags, let payload) = frame {
                var built: [UInt8] = []
                RelayFrame.appendSendHead(sendID: 0, recipient: recipient, flags: flags, to: &built)
                built += payload
                RelayFrame.setSendID(sendID, inEncodedSend: &built)
                try checkEqual(built, input, "SEND written by appendSendHead + setSendID")
            }
        }
    }

    static func seeds() -> [[UInt8]] {
        var out = FixtureFiles.hexValues("hex", in: "relay-frames.json")
        let crosscheck = FixtureFiles.bytes("crosscheck-v1.json")
        if let root = crosscheck.withUnsafeBufferPointer({ try? JSONNode.parse($0) }), case .object(let sections) = root {
            for section in sections {
                guard case .object(let members) = section.value else { continue }
                out += members.compactMap { $0.key.contains("frame") || section.key == "frames" ? $0.value.stringValue : nil }
                    .compactMap { Hex.decode($0) }
            }
        }
        return out
    }
}
