internal import CSodium

/// BLAKE2b through `crypto_generichash` (protocol-v1 §3, §4).
public enum GenericHash {
    /// Largest output, in bytes (`crypto_generichash_BYTES_MAX`).
    public static let maxOutputLength = Int(crypto_generichash_BYTES_MAX)
    /// Largest key, in bytes (`crypto_generichash_KEYBYTES_MAX`).
    public static let maxKeyLength = Int(crypto_generichash_KEYBYTES_MAX)

    /// One-shot hash of `data`.
    ///
    /// - Parameters:
    ///   - outputLength: 16...64 bytes; 32 is what every protocol-v1 use takes.
    ///   - key: optional BLAKE2b key of at most 64 bytes (the protocol's keys are short ASCII strings).
    /// - Precondition: the lengths above hold; they come from our code, never from a peer.
    public static func hash(_ data: some Collection<UInt8>, outputLength: Int = 32, key: [UInt8]? = nil) -> [UInt8] {
        var hasher = GenericHasher(outputLength: outputLength, key: key)
        hasher.update(data)
        return hasher.finalize()
    }
}

/// Incremental BLAKE2b (`crypto_generichash_init/update/final`), for inputs assembled piece by piece.
///
/// Non-copyable, so the hash state (which may hold key material) has exactly one owner and is freed once;
/// `finalize()` consumes the hasher.
public struct GenericHasher: ~Copyable {
    /// The libsodium state lives on the heap with the 64-byte alignment libsodium asks for
    /// (`crypto_generichash_statebytes()`, see sodium/utils.h). It is a raw pointer so no C type leaks.
    private let state: UnsafeMutableRawPointer
    private let stateByteCount: Int
    private let outputLength: Int

    /// - Precondition: `outputLength` in 16...64, `key` at most 64 bytes.
    public init(outputLength: Int = 32, key: [UInt8]? = nil) {
        precondition(
            (Int(crypto_generichash_BYTES_MIN)...GenericHash.maxOutputLength).contains(outputLength),
            "generichash output length \(outputLength) outside 16...64")
        precondition((key?.count ?? 0) <= GenericHash.maxKeyLength, "generichash key longer than 64 bytes")
        Sodium.ensureInitialized()
        self.stateByteCount = crypto_generichash_statebytes()
        self.state = .allocate(byteCount: self.stateByteCount, alignment: 64)
        self.outputLength = outputLength
        // The state struct is packed and 64-byte aligned, which Swift cannot import: libsodium's functions
        // take it as an OpaquePointer.
        let statePointer = OpaquePointer(self.state)
        let rc: Int32
        if let key, !key.isEmpty {
            rc = crypto_generichash_init(statePointer, key, key.count, outputLength)
        } else {
            rc = crypto_generichash_init(statePointer, nil, 0, outputLength)
        }
        // Fails only for the lengths checked above.
        precondition(rc == 0, "crypto_generichash_init returned \(rc)")
    }

    /// Feeds more bytes.
    public mutating func update(_ data: some Collection<UInt8>) {
        let state = OpaquePointer(self.state)
        let rc =
            data.withContiguousStorageIfAvailable { Self.update(state, UnsafeRawBufferPointer($0)) }
            ?? Array(data).withUnsafeBytes { Self.update(state, $0) }
        // crypto_generichash_update cannot fail for an input that fits in memory.
        precondition(rc == 0, "crypto_generichash_update returned \(rc)")
    }

    /// Feeds bytes in place, with no intermediate copy (used for secrets, which must not land in an array).
    mutating func update(raw bytes: UnsafeRawBufferPointer) {
        let rc = Self.update(OpaquePointer(self.state), bytes)
        precondition(rc == 0, "crypto_generichash_update returned \(rc)")
    }

    private static func update(
        _ state: OpaquePointer, _ bytes: UnsafeRawBufferPointer
    ) -> Int32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
        return crypto_generichash_update(state, base.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
    }

    /// Finishes and returns the hash; the hasher is consumed.
    public consuming func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: self.outputLength)
        let rc = crypto_generichash_final(
            OpaquePointer(self.state), &out, self.outputLength)
        precondition(rc == 0, "crypto_generichash_final returned \(rc)")
        return out
    }

    /// Finishes straight into secret storage, so a derived key never sits in an ordinary array.
    consuming func finalizeIntoSecret() -> SecretBytes {
        let statePointer = OpaquePointer(self.state)
        let length = self.outputLength
        return SecretBytes(count: length) { out in
            let rc = crypto_generichash_final(
                statePointer, out.baseAddress!.assumingMemoryBound(to: UInt8.self), length)
            precondition(rc == 0, "crypto_generichash_final returned \(rc)")
        }
    }

    deinit {
        // The state can hold the key (the e2e derivation key is public, but callers may pass secret keys).
        sodium_memzero(self.state, self.stateByteCount)
        self.state.deallocate()
    }
}
