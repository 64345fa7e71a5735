import HomebaseCore
import Testing

@testable import HomebaseCrypto

/// Expected values from Python (hashlib.blake2b over struct.pack('>I', len) || utf8), independent of this code.
@Suite struct ConversationDigestTests {
    @Test func emptyConversationHashesTheEmptyString() {
        #expect(
            ConversationDigest.compute(messages: [])
                == "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8")
    }

    @Test func multibyteUTF8IsLengthPrefixedInBytes() {
        let messages: [(role: String, content: String)] = [
            ("user", "héllo 🌍"), ("assistant", "日本語です"), ("user", ""),
        ]
        #expect(
            ConversationDigest.compute(messages: messages)
                == "d3159d3a6eacb39d99323067a813386a7d96dd02aae660b5ae71688691896e00")
    }

    @Test func matchesTheHandBuiltEncoding() {
        var bytes = ByteWriter()
        for field in ["user", "é"] {
            bytes.write(UInt32(field.utf8.count))
            bytes.write(Array(field.utf8))
        }
        #expect(ConversationDigest.compute(messages: [("user", "é")]) == Hex.encode(GenericHash.hash(bytes.bytes)))
    }

    @Test func fieldBoundariesMatter() {
        // Without length prefixes these two would hash the same bytes.
        #expect(
            ConversationDigest.compute(messages: [("ab", "c")]) != ConversationDigest.compute(messages: [("a", "bc")]))
        #expect(
            ConversationDigest.compute(messages: [("user", "a"), ("user", "b")])
                != ConversationDigest.compute(messages: [("user", "ab")]))
    }

    @Test func digestIs64LowercaseHexCharacters() {
        let digest = ConversationDigest.compute(messages: [("user", "Hi")])
        #expect(digest.count == 64)
        #expect(digest.allSatisfy { "0123456789abcdef".contains($0) })
    }
}
