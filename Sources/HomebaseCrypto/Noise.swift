internal import CSodium

/// The Noise Protocol Framework, revision 34, instantiated as `Noise_IK_25519_ChaChaPoly_BLAKE2b` over libsodium
/// (Protocol/envelope.md §7.1). Each function below is the one of the same name in the Noise spec; nothing is
/// added or reordered, so the cacophony vectors (`Fixtures/noise-ik-cacophony.json`) pin the whole construction.
enum Noise {
    static let protocolName = Array("Noise_IK_25519_ChaChaPoly_BLAKE2b".utf8)
    /// BLAKE2b-512.
    static let hashLength = 64
    static let blockLength = 128
    static let dhLength = 32
    static let keyLength = 32
    static let tagLength = Int(crypto_aead_chacha20poly1305_ietf_ABYTES)

    // MARK: DH: Curve25519

    /// `DH(sk, pk)`: `crypto_scalarmult`. libsodium returns -1 for an all-zero result (a low-order `pk`); that
    /// aborts the handshake, which Noise §12.1 allows ("implementations may signal an error").
    static func dh(_ secret: SecretBytes, _ publicKey: some Collection<UInt8>) throws(CryptoError) -> [UInt8] {
        guard publicKey.count == Self.dhLength else { throw .wrongLength(expected: Self.dhLength, actual: publicKey.count) }
        Sodium.ensureInitialized()
        let pk = Array(publicKey)
        var out = [UInt8](repeating: 0, count: Self.dhLength)
        let rc = secret.withUnsafeBytes { sk in
            crypto_scalarmult(&out, sk.baseAddress!.assumingMemoryBound(to: UInt8.self), pk)
        }
        guard rc == 0, sodium_is_zero(out, out.count) == 0 else { throw .allZeroSharedSecret }
        return out
    }

    // MARK: Cipher: ChaChaPoly

    /// The 96-bit nonce of Noise §12.3: 32 bits of zeros, then `n` little-endian.
    static func nonce(_ n: UInt64) -> [UInt8] {
        Self.withNonce(n) { Array($0) }
    }

    /// `nonce(n)` in a stack buffer, for the duration of `body` (no allocation per message).
    @inline(__always)
    static func withNonce<R>(_ n: UInt64, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 12) { buffer in
            for i in 0..<4 { buffer[i] = 0 }
            for i in 0..<8 { buffer[4 + i] = UInt8(truncatingIfNeeded: n >> (8 * UInt64(i))) }
            return body(UnsafeBufferPointer(buffer))
        }
    }

    /// `ENCRYPT(k, n, ad, plaintext)`: `crypto_aead_chacha20poly1305_ietf_encrypt`.
    static func encrypt(key: SymmetricKey, n: UInt64, ad: some Collection<UInt8>, plaintext: some Collection<UInt8>)
        -> [UInt8]
    {
        Sodium.ensureInitialized()
        let m = Array(plaintext), a = Array(ad), npub = Self.nonce(n)
        var out = [UInt8](repeating: 0, count: m.count + Self.tagLength)
        var outLength: UInt64 = 0
        let rc = key.withUnsafeBytes { k in
            crypto_aead_chacha20poly1305_ietf_encrypt(
                &out, &outLength, m, UInt64(m.count), a, UInt64(a.count), nil, npub,
                k.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        // Fails only for messages over 256 GiB.
        precondition(rc == 0, "crypto_aead_chacha20poly1305_ietf_encrypt failed")
        return out
    }

    /// `DECRYPT(k, n, ad, ciphertext)`.
    static func decrypt(key: SymmetricKey, n: UInt64, ad: some Collection<UInt8>, ciphertext: some Collection<UInt8>)
        throws(CryptoError) -> [UInt8]
    {
        guard ciphertext.count >= Self.tagLength else {
            throw .wrongLength(expected: Self.tagLength, actual: ciphertext.count)
        }
        Sodium.ensureInitialized()
        let c = Array(ciphertext), a = Array(ad)
        var out = [UInt8](repeating: 0, count: c.count - Self.tagLength)
        var outLength: UInt64 = 0
        let rc = Self.withNonce(n) { npub in
            key.withUnsafeBytes { k in
                crypto_aead_chacha20poly1305_ietf_decrypt(
                    &out, &outLength, nil, c, UInt64(c.count), a, UInt64(a.count), npub.baseAddress!,
                    k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard rc == 0 else { throw .authenticationFailure }
        return out
    }

    /// `ENCRYPT(k, n, ad, plaintext)` in place within `out`, laid out from `start` as `ad (adCount bytes) ||
    /// plaintext || 16 bytes of tag space`: the plaintext becomes the ciphertext and the tag space the tag, the
    /// bytes of `encrypt`'s output. No copy of the plaintext is made (so none is left to erase).
    static func encryptInPlace(_ out: inout [UInt8], from start: Int, adCount: Int, key: SymmetricKey, n: UInt64) {
        let messageCount = out.count - start - adCount - Self.tagLength
        precondition(start >= 0 && adCount >= 0 && messageCount >= 0, "encryptInPlace: shorter than ad and tag")
        Sodium.ensureInitialized()
        let rc = Self.withNonce(n) { npub in
            out.withUnsafeMutableBufferPointer { buffer in
                let base = buffer.baseAddress! + start
                let message = base + adCount
                return key.withUnsafeBytes { k in
                    // libsodium encrypts in place when c == m; the additional data is only read.
                    crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                        message, message + messageCount, nil, message, UInt64(messageCount), base, UInt64(adCount),
                        nil, npub.baseAddress!, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        precondition(rc == 0, "crypto_aead_chacha20poly1305_ietf_encrypt_detached failed")
    }

    /// `REKEY(k)`, Noise §4.2's default: the first 32 bytes of `ENCRYPT(k, 2^64 - 1, empty, 32 zero bytes)`.
    static func rekey(_ key: SymmetricKey) -> SymmetricKey {
        var block = Self.encrypt(key: key, n: UInt64.max, ad: [], plaintext: [UInt8](repeating: 0, count: 32))
        defer { wipe(&block) }
        return SymmetricKey(storage: SecretBytes(copying: block.prefix(Self.keyLength)))
    }

    // MARK: Hash: BLAKE2b

    static func hash(_ data: some Collection<UInt8>) -> [UInt8] {
        GenericHash.hash(data, outputLength: Self.hashLength)
    }

    /// `HMAC-HASH(key, data)`: RFC 2104 over BLAKE2b with its 128-byte block (Noise §4.3). Keys here are at most
    /// `HASHLEN` bytes, so never hashed first.
    static func hmac(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        precondition(key.count <= Self.blockLength, "HMAC keys are at most a block")
        var inner = [UInt8](repeating: 0x36, count: Self.blockLength)
        var outer = [UInt8](repeating: 0x5c, count: Self.blockLength)
        for (i, b) in key.enumerated() {
            inner[i] ^= b
            outer[i] ^= b
        }
        defer {
            wipe(&inner)
            wipe(&outer)
        }
        var h1 = GenericHasher(outputLength: Self.hashLength)
        h1.update(inner)
        h1.update(data)
        var innerHash = h1.finalize()
        defer { wipe(&innerHash) }
        var h2 = GenericHasher(outputLength: Self.hashLength)
        h2.update(outer)
        h2.update(innerHash)
        return h2.finalize()
    }

    /// `HKDF(chaining_key, input_key_material, num_outputs)` for two outputs (Noise §4.3).
    static func hkdf2(_ chainingKey: [UInt8], _ ikm: [UInt8]) -> ([UInt8], [UInt8]) {
        var temp = Self.hmac(key: chainingKey, ikm)
        defer { wipe(&temp) }
        let out1 = Self.hmac(key: temp, [0x01])
        let out2 = Self.hmac(key: temp, out1 + [0x02])
        return (out1, out2)
    }
}

/// Zeroes an array's bytes in place (`sodium_memzero`, which the optimiser may not elide), for the short-lived
/// secrets of a key schedule.
func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { buffer in
        guard let base = buffer.baseAddress else { return }
        sodium_memzero(base, buffer.count)
    }
}

/// An X25519 key pair: a device's static key (from its Ed25519 key) or a handshake's ephemeral one.
public final class NoiseKeyPair: @unchecked Sendable {
    let secret: SecretBytes
    public let publicKey: [UInt8]

    /// From a 32-byte X25519 secret (`crypto_scalarmult_base` gives the public key).
    init(secret: SecretBytes) {
        precondition(secret.count == Noise.dhLength, "X25519 secrets are 32 bytes")
        Sodium.ensureInitialized()
        var pk = [UInt8](repeating: 0, count: Noise.dhLength)
        let rc = secret.withUnsafeBytes { crypto_scalarmult_base(&pk, $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        precondition(rc == 0, "crypto_scalarmult_base failed")
        self.secret = secret
        self.publicKey = pk
    }

    /// From secret bytes (test vectors).
    public convenience init(secretBytes: some Collection<UInt8>) throws(CryptoError) {
        guard secretBytes.count == Noise.dhLength else {
            throw .wrongLength(expected: Noise.dhLength, actual: secretBytes.count)
        }
        self.init(secret: SecretBytes(copying: secretBytes))
    }

    /// `GENERATE_KEYPAIR()`: 32 bytes of `randombytes_buf`.
    public static func generate() -> NoiseKeyPair {
        Sodium.ensureInitialized()
        return NoiseKeyPair(secret: SecretBytes(count: Noise.dhLength) { randombytes_buf($0.baseAddress!, $0.count) })
    }

    /// A device's static key: the X25519 key derived from its Ed25519 key (envelope.md §1).
    public static func deviceStatic(_ key: SigningSecretKey) throws(CryptoError) -> NoiseKeyPair {
        NoiseKeyPair(secret: try key.x25519SecretKey())
    }
}

/// Noise's CipherState (§5.1): a key and a nonce. The key is in wiped storage; replacing it erases the old one.
struct NoiseCipherState {
    var key: SymmetricKey?
    var n: UInt64 = 0

    mutating func encryptWithAd(_ ad: [UInt8], _ plaintext: [UInt8]) -> [UInt8] {
        guard let key else { return plaintext }
        // A nonce of 2^64 - 1 is reserved for REKEY; sessions end long before (envelope.md §7.4).
        precondition(self.n < UInt64.max, "Noise nonce exhausted")
        defer { self.n += 1 }
        return Noise.encrypt(key: key, n: self.n, ad: ad, plaintext: plaintext)
    }

    mutating func decryptWithAd(_ ad: [UInt8], _ ciphertext: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let key else { return ciphertext }
        guard self.n < UInt64.max else { throw .authenticationFailure }
        let plaintext = try Noise.decrypt(key: key, n: self.n, ad: ad, ciphertext: ciphertext)
        self.n += 1
        return plaintext
    }
}

/// Noise's SymmetricState (§5.2). Its owner erases it (`erase()`) when the handshake ends; it is not copied
/// meanwhile, so the chaining key's buffer has one owner and is zeroed in place.
struct NoiseSymmetricState {
    private(set) var chainingKey: [UInt8]
    private(set) var h: [UInt8]
    private var cipher = NoiseCipherState()

    /// `InitializeSymmetric(protocol_name)`: the name padded with zeros to HASHLEN (it is shorter), `ck = h`.
    init() {
        var name = Noise.protocolName
        name += [UInt8](repeating: 0, count: Noise.hashLength - name.count)
        self.h = name
        self.chainingKey = name
    }

    mutating func mixKey(_ ikm: [UInt8]) {
        var (ck, tempK) = Noise.hkdf2(self.chainingKey, ikm)
        defer { wipe(&tempK) }
        wipe(&self.chainingKey)
        self.chainingKey = ck
        wipe(&ck)
        self.cipher = NoiseCipherState(key: SymmetricKey(storage: SecretBytes(copying: tempK.prefix(Noise.keyLength))))
    }

    mutating func mixHash(_ data: some Collection<UInt8>) {
        var hasher = GenericHasher(outputLength: Noise.hashLength)
        hasher.update(self.h)
        hasher.update(data)
        self.h = hasher.finalize()
    }

    mutating func encryptAndHash(_ plaintext: [UInt8]) -> [UInt8] {
        let ciphertext = self.cipher.encryptWithAd(self.h, plaintext)
        self.mixHash(ciphertext)
        return ciphertext
    }

    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(CryptoError) -> [UInt8] {
        let plaintext = try self.cipher.decryptWithAd(self.h, ciphertext)
        self.mixHash(ciphertext)
        return plaintext
    }

    /// `Split()`: the initiator's sending key, then the responder's. The chaining key is erased.
    mutating func split() -> (SymmetricKey, SymmetricKey) {
        var (k1, k2) = Noise.hkdf2(self.chainingKey, [])
        defer {
            wipe(&k1)
            wipe(&k2)
            wipe(&self.chainingKey)
        }
        return (SymmetricKey(storage: SecretBytes(copying: k1.prefix(Noise.keyLength))),
                SymmetricKey(storage: SecretBytes(copying: k2.prefix(Noise.keyLength))))
    }

    mutating func erase() {
        wipe(&self.chainingKey)
        self.cipher = NoiseCipherState()
    }
}

/// The two transport keys a finished handshake gives, and its hash (Noise §5.3 `Split`, `GetHandshakeHash`).
public struct NoiseTransportKeys: Sendable {
    /// Initiator → responder.
    public let initiatorToResponder: SymmetricKey
    /// Responder → initiator.
    public let responderToInitiator: SymmetricKey
    public let handshakeHash: [UInt8]
}

/// The IK handshake (Noise §7.5), initiator side: `-> e, es, s, ss` then `<- e, ee, se`.
///
/// A class, not a struct, so there is exactly one copy of the ephemeral secret and chaining key, and both are
/// wiped when the handshake ends, succeeded or not (deinit).
public final class NoiseIKInitiator: @unchecked Sendable {
    private var symmetric: NoiseSymmetricState?
    private let s: NoiseKeyPair
    private let e: NoiseKeyPair
    private let rs: [UInt8]
    private var wroteFirst = false

    deinit {
        if var sym = self.symmetric.take() { sym.erase() }
    }

    /// `Initialize(IK, initiator, prologue, s, e, rs)`: the pre-message `<- s` hashes the responder's static key.
    init(prologue: [UInt8], s: NoiseKeyPair, e: NoiseKeyPair, rs: [UInt8]) {
        var sym = NoiseSymmetricState()
        sym.mixHash(prologue)
        sym.mixHash(rs)
        self.symmetric = sym
        self.s = s
        self.e = e
        self.rs = rs
    }

    /// Message 1: `e, es, s, ss`, then the payload.
    func writeMessage1(payload: [UInt8]) throws(CryptoError) -> [UInt8] {
        precondition(!self.wroteFirst, "message 1 is written once")
        self.wroteFirst = true
        guard var sym = self.symmetric.take() else { preconditionFailure("handshake already over") }
        // On a failed DH the handshake is over: what was mixed so far is wiped.
        defer { if self.symmetric == nil { sym.erase() } }
        var out = self.e.publicKey
        sym.mixHash(self.e.publicKey)
        var es = try Noise.dh(self.e.secret, self.rs)
        sym.mixKey(es)
        wipe(&es)
        out += sym.encryptAndHash(self.s.publicKey)
        var ss = try Noise.dh(self.s.secret, self.rs)
        sym.mixKey(ss)
        wipe(&ss)
        out += sym.encryptAndHash(payload)
        self.symmetric = sym
        return out
    }

    /// Message 2: `e, ee, se`, then the payload; returns it and the transport keys. The handshake is over
    /// either way: a failure leaves nothing to retry with.
    func readMessage2(_ message: [UInt8]) throws(CryptoError) -> (payload: [UInt8], keys: NoiseTransportKeys) {
        guard self.wroteFirst, var sym = self.symmetric.take() else { throw .authenticationFailure }
        defer { sym.erase() }
        guard message.count >= Noise.dhLength + Noise.tagLength else {
            throw .wrongLength(expected: Noise.dhLength + Noise.tagLength, actual: message.count)
        }
        let re = Array(message.prefix(Noise.dhLength))
        sym.mixHash(re)
        var ee = try Noise.dh(self.e.secret, re)
        sym.mixKey(ee)
        wipe(&ee)
        var se = try Noise.dh(self.s.secret, re)
        sym.mixKey(se)
        wipe(&se)
        let payload = try sym.decryptAndHash(Array(message.dropFirst(Noise.dhLength)))
        let hash = sym.h
        let (k1, k2) = sym.split()
        return (payload, NoiseTransportKeys(initiatorToResponder: k1, responderToInitiator: k2, handshakeHash: hash))
    }
}

/// The IK handshake, responder side: reads message 1 and writes message 2 in one step (the responder has nothing
/// to wait for between them), giving the transport keys and the initiator's static key.
enum NoiseIKResponder {
    struct Result {
        var payload: [UInt8]
        /// The initiator's static X25519 key, learned from message 1.
        var rs: [UInt8]
        var keys: NoiseTransportKeys
        var message2: [UInt8]
    }

    /// `Initialize(IK, responder, prologue, s, e)`, `ReadMessage(message1)`, `WriteMessage(payload2)`.
    static func respond(prologue: [UInt8], s: NoiseKeyPair, e: NoiseKeyPair, message1: [UInt8],
                        payload2: [UInt8]) throws(CryptoError) -> Result {
        let minimum = Noise.dhLength + Noise.dhLength + 2 * Noise.tagLength
        guard message1.count >= minimum else { throw .wrongLength(expected: minimum, actual: message1.count) }
        var sym = NoiseSymmetricState()
        defer { sym.erase() }
        sym.mixHash(prologue)
        sym.mixHash(s.publicKey)
        // -> e, es, s, ss
        let re = Array(message1.prefix(Noise.dhLength))
        sym.mixHash(re)
        var es = try Noise.dh(s.secret, re)
        sym.mixKey(es)
        wipe(&es)
        let encryptedS = Array(message1[Noise.dhLength..<(2 * Noise.dhLength + Noise.tagLength)])
        let rs = try sym.decryptAndHash(encryptedS)
        var ss = try Noise.dh(s.secret, rs)
        sym.mixKey(ss)
        wipe(&ss)
        let payload = try sym.decryptAndHash(Array(message1.dropFirst(2 * Noise.dhLength + Noise.tagLength)))
        // <- e, ee, se
        var out = e.publicKey
        sym.mixHash(e.publicKey)
        var ee = try Noise.dh(e.secret, re)
        sym.mixKey(ee)
        wipe(&ee)
        var se = try Noise.dh(e.secret, rs)
        sym.mixKey(se)
        wipe(&se)
        out += sym.encryptAndHash(payload2)
        let hash = sym.h
        let (k1, k2) = sym.split()
        return Result(payload: payload, rs: rs,
                      keys: NoiseTransportKeys(initiatorToResponder: k1, responderToInitiator: k2, handshakeHash: hash),
                      message2: out)
    }
}

/// The raw IK handshake and transport cipher with every key given, for replaying published vectors (the
/// cacophony vector in `conformance vectors`); devices use `SessionTable`.
public enum NoiseIKVectors {
    public struct Handshake {
        public var message1: [UInt8]
        public var message2: [UInt8]
        /// What the responder decrypted from message 1 and the initiator from message 2.
        public var payload1: [UInt8]
        public var payload2: [UInt8]
        /// The initiator's static key as the responder learned it.
        public var initiatorStatic: [UInt8]
        public var initiatorKeys: NoiseTransportKeys
        public var responderKeys: NoiseTransportKeys
    }

    /// Runs both sides of `Noise_IK_25519_ChaChaPoly_BLAKE2b` with these X25519 secrets.
    public static func handshake(
        prologue: [UInt8], initiatorStatic: [UInt8], initiatorEphemeral: [UInt8], responderStatic: [UInt8],
        responderEphemeral: [UInt8], payload1: [UInt8], payload2: [UInt8]
    ) throws(CryptoError) -> Handshake {
        let s = try NoiseKeyPair(secretBytes: responderStatic)
        let initiator = NoiseIKInitiator(
            prologue: prologue, s: try NoiseKeyPair(secretBytes: initiatorStatic),
            e: try NoiseKeyPair(secretBytes: initiatorEphemeral), rs: s.publicKey)
        let m1 = try initiator.writeMessage1(payload: payload1)
        let r = try NoiseIKResponder.respond(
            prologue: prologue, s: s, e: try NoiseKeyPair(secretBytes: responderEphemeral), message1: m1,
            payload2: payload2)
        let (p2, keys) = try initiator.readMessage2(r.message2)
        return Handshake(message1: m1, message2: r.message2, payload1: r.payload, payload2: p2,
                         initiatorStatic: r.rs, initiatorKeys: keys, responderKeys: r.keys)
    }

    /// `ENCRYPT(k, n, ad, plaintext)`.
    public static func encrypt(key: SymmetricKey, n: UInt64, ad: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        Noise.encrypt(key: key, n: n, ad: ad, plaintext: plaintext)
    }
}
