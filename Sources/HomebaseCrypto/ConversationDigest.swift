import HomebaseCore

/// The conversation cache's `base_digest` (protocol-v1 §4, "Conversation cache").
public enum ConversationDigest {
    /// `hex(crypto_generichash(32, for each message: u32 len(role) || role || u32 len(content) || content))`,
    /// lengths in bytes of UTF-8, big-endian. An empty list hashes the empty string.
    ///
    /// - Precondition: each role and content is under 4 GiB (far above any relay payload limit).
    public static func compute(messages: [(role: String, content: String)]) -> String {
        var hasher = GenericHasher(outputLength: 32)
        for message in messages {
            Self.feed(message.role, into: &hasher)
            Self.feed(message.content, into: &hasher)
        }
        return Hex.encode(hasher.finalize())
    }

    private static func feed(_ string: String, into hasher: inout GenericHasher) {
        let utf8 = Array(string.utf8)
        guard let length = UInt32(exactly: utf8.count) else {
            preconditionFailure("conversation field of \(utf8.count) bytes does not fit the u32 length prefix")
        }
        var prefix = ByteWriter(capacity: 4)
        prefix.write(length)
        hasher.update(prefix.bytes)
        hasher.update(utf8)
    }
}
