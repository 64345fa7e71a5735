import HomebaseCore

/// Every message decoder (`Message(json:)`, Protocol/messages.md): the one-pass fast paths for `infer.chunk`
/// and `infer.request` and the general `JSONDecoder` path. Input: a plaintext as opened (before unpadding).
///
/// Checks: the fast paths agree with the general decoder (a collection without contiguous storage takes the
/// general path only); padding does not change the verdict; a decoded message encodes (`jsonBytes`) to JSON
/// that decodes to the same message (`tools` is read as a flag and never written, so it is left out).
enum MessageHarness {
    static let target = FuzzTarget(
        "message", "message decoders: fast paths against JSONDecoder, padding, decode→encode→decode",
        seeds: Self.seeds, run: Self.run)

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        let plaintext = EnvelopePadding.unpad(input)
        let fast = Result { () throws(MessageDecodingError) in try Message(json: plaintext) }
        let general = Result { () throws(MessageDecodingError) in try Message(json: plaintext.lazy.map { $0 }) }
        try checkEqual(fast, general, "fast path against the general decoder")
        guard case .success(var message) = fast else { return }
        // Checked for messages only: a decode costs tens of microseconds, and a refusal is refused either way.
        let padded = Result { () throws(MessageDecodingError) in try Message(json: EnvelopePadding.pad(input)) }
        try checkEqual(padded, fast, "padding changes the verdict")

        if case .inferRequest(var request) = message {
            request.hasTools = false
            message = .inferRequest(request)
        }
        let encoded = message.jsonBytes()
        var appended: [UInt8] = [0x20]
        message.appendJSON(to: &appended)
        try checkEqual(Array(appended.dropFirst()), encoded, "appendJSON against jsonBytes")
        let again = Result { () throws(MessageDecodingError) in try Message(json: encoded) }
        try checkEqual(again, .success(message), "decode(encode(message)) of \(String(decoding: encoded, as: UTF8.self))")
    }

    static func seeds() -> [[UInt8]] {
        var out = FixtureFiles.textValues("json", in: "message-vectors.json")
        out += FixtureFiles.textValues("message", in: "signed-payload-vectors.json")
        out.append(Array(#"{"id":"r1","seq":3,"text":"Hel\u006co \ud83d\ude00","type":"infer.chunk"}  "#.utf8))
        out.append(Array(#"{"id":"r1","messages":[{"content":"hi","role":"user"}],"model":"m","options":{},"tools":null,"type":"infer.request"}"#.utf8))
        return out
    }
}
