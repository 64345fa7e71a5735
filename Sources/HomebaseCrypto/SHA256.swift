internal import CSodium

/// SHA-256 through libsodium's `crypto_hash_sha256` streaming API: the Hugging Face Hub names an LFS file by the
/// sha256 of its content, and a downloaded blob is only kept when its hash matches.
public enum SHA256 {
    public static let digestByteCount = Int(crypto_hash_sha256_BYTES)

    /// One-shot hash.
    public static func hash(_ data: some Collection<UInt8>) -> [UInt8] {
        let hasher = SHA256Hasher()
        hasher.update(data)
        return hasher.finalize()
    }
}

/// Incremental SHA-256 for a file that arrives piece by piece (a download, or a partial file read back before a
/// resumed download continues it).
///
/// A class so a transfer handler can hold it; not thread-safe: one owner feeds it at a time (a transfer's pieces
/// arrive one call at a time on the HTTP loop thread).
public final class SHA256Hasher {
    private var state = crypto_hash_sha256_state()
    private var finished = false

    public init() {
        Sodium.ensureInitialized()
        let rc = crypto_hash_sha256_init(&self.state)
        precondition(rc == 0, "crypto_hash_sha256_init returned \(rc)")
    }

    /// Feeds more bytes.
    public func update(_ data: some Collection<UInt8>) {
        precondition(!self.finished, "SHA256Hasher used after finalize")
        let rc =
            data.withContiguousStorageIfAvailable { self.update(UnsafeRawBufferPointer($0)) }
            ?? Array(data).withUnsafeBytes { self.update($0) }
        precondition(rc == 0, "crypto_hash_sha256_update returned \(rc)")
    }

    /// Feeds bytes in place (a read buffer), with no copy.
    public func update(raw bytes: UnsafeRawBufferPointer) {
        precondition(!self.finished, "SHA256Hasher used after finalize")
        let rc = self.update(bytes)
        precondition(rc == 0, "crypto_hash_sha256_update returned \(rc)")
    }

    private func update(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
        return crypto_hash_sha256_update(&self.state, base.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
    }

    /// The digest; the hasher cannot be fed afterwards.
    public func finalize() -> [UInt8] {
        precondition(!self.finished, "SHA256Hasher finalized twice")
        self.finished = true
        var out = [UInt8](repeating: 0, count: SHA256.digestByteCount)
        let rc = crypto_hash_sha256_final(&self.state, &out)
        precondition(rc == 0, "crypto_hash_sha256_final returned \(rc)")
        return out
    }
}
