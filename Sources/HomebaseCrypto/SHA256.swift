internal import CSHA256Shim
internal import CSodium

/// SHA-256: the Hugging Face Hub names an LFS file by the sha256 of its content, and a downloaded blob is only kept
/// when its hash matches. libsodium's portable code hashes at about half the speed a loopback download arrives, so
/// on an x86 CPU with the SHA extensions the blocks go through those instructions (CSHA256Shim) instead; anywhere
/// else through libsodium's `crypto_hash_sha256`.
public enum SHA256 {
    public static let digestByteCount = Int(crypto_hash_sha256_BYTES)

    /// One-shot hash.
    public static func hash(_ data: some Collection<UInt8>) -> [UInt8] {
        let hasher = SHA256Hasher()
        hasher.update(data)
        return hasher.finalize()
    }

    /// Who computes the blocks.
    enum Implementation: Sendable, CaseIterable {
        /// The x86 SHA extensions, through CSHA256Shim.
        case shaExtensions
        /// libsodium's portable `crypto_hash_sha256`.
        case libsodium

        /// Whether this CPU can run it (CPUID, asked once).
        var isAvailable: Bool {
            switch self {
            case .shaExtensions: SHA256.cpuHasSHAExtensions
            case .libsodium: true
            }
        }
    }

    private static let cpuHasSHAExtensions = csha256_accelerated() == 1

    /// The fastest implementation this CPU runs.
    static let fastest: Implementation = cpuHasSHAExtensions ? .shaExtensions : .libsodium
}

/// Incremental SHA-256 for a file that arrives piece by piece (a download, or a partial file read back before a
/// resumed download continues it).
///
/// A class so a transfer handler can hold it; not thread-safe: one owner feeds it at a time (a transfer's pieces
/// arrive one call at a time on the HTTP loop thread).
public final class SHA256Hasher {
    private let implementation: SHA256.Implementation
    // Only the state of `implementation` is used.
    private var accelerated = csha256_ctx()
    private var sodium = crypto_hash_sha256_state()
    private var finished = false

    public convenience init() {
        self.init(implementation: SHA256.fastest)
    }

    /// A chosen implementation, so tests can check each against libsodium's one-shot hash.
    init(implementation: SHA256.Implementation) {
        precondition(implementation.isAvailable, "SHA-256 implementation \(implementation) not available on this CPU")
        self.implementation = implementation
        switch implementation {
        case .shaExtensions:
            csha256_init(&self.accelerated)
        case .libsodium:
            Sodium.ensureInitialized()
            let rc = crypto_hash_sha256_init(&self.sodium)
            precondition(rc == 0, "crypto_hash_sha256_init returned \(rc)")
        }
    }

    /// Feeds more bytes.
    public func update(_ data: some Collection<UInt8>) {
        precondition(!self.finished, "SHA256Hasher used after finalize")
        data.withContiguousStorageIfAvailable { self.update(UnsafeRawBufferPointer($0)) }
            ?? Array(data).withUnsafeBytes { self.update($0) }
    }

    /// Feeds bytes in place (a read buffer), with no copy.
    public func update(raw bytes: UnsafeRawBufferPointer) {
        precondition(!self.finished, "SHA256Hasher used after finalize")
        self.update(bytes)
    }

    private func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count > 0 else { return }
        switch self.implementation {
        case .shaExtensions:
            csha256_update(&self.accelerated, base, bytes.count)
        case .libsodium:
            let rc = crypto_hash_sha256_update(&self.sodium, base, UInt64(bytes.count))
            precondition(rc == 0, "crypto_hash_sha256_update returned \(rc)")
        }
    }

    /// The digest; the hasher cannot be fed afterwards.
    public func finalize() -> [UInt8] {
        precondition(!self.finished, "SHA256Hasher finalized twice")
        self.finished = true
        var out = [UInt8](repeating: 0, count: SHA256.digestByteCount)
        switch self.implementation {
        case .shaExtensions:
            csha256_final(&self.accelerated, &out)
        case .libsodium:
            let rc = crypto_hash_sha256_final(&self.sodium, &out)
            precondition(rc == 0, "crypto_hash_sha256_final returned \(rc)")
        }
        return out
    }
}
