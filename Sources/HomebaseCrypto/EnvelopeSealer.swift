public import HomebaseCore

/// Seals and opens envelopes (protocol-v1 §3): the AEAD's additional data is the header's first 90 bytes
/// (version .. sent_at_ms) and its nonce is the header's nonce.
public enum EnvelopeSealer {
    /// Encrypts `plaintext` (already padded by the caller, `EnvelopePadding.pad`) under `key`.
    ///
    /// - Precondition: `header.nonce` is 24 bytes, which `EnvelopeHeader.init` already enforces; the caller drew
    ///   it fresh from `SecureRandom.bytes(24)`.
    public static func seal(header: EnvelopeHeader, plaintext: [UInt8], key: SymmetricKey) -> Envelope {
        let ciphertext: [UInt8]
        do {
            ciphertext = try AEAD.seal(plaintext: plaintext, ad: header.additionalData, nonce: header.nonce, key: key)
        } catch {
            preconditionFailure("envelope nonce must be \(AEAD.nonceByteCount) bytes: \(error)")
        }
        return Envelope(header: header, ciphertext: ciphertext)
    }

    /// The encoded envelope of `plaintext` padded (`EnvelopePadding.pad`) and sealed under `key`: the bytes of
    /// `seal(header:plaintext:key:).encoded()` for the padded plaintext, made in one buffer
    /// (`seal(...appendingTo:plaintext:)`).
    public static func sealEncoded(header: EnvelopeHeader, unpaddedPlaintext plaintext: [UInt8],
                                   key: SymmetricKey) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(EnvelopeHeader.byteCount + EnvelopePadding.paddedCount(plaintext.count)
                            + EnvelopeHeader.tagByteCount)
        Self.seal(version: header.version, channel: header.channel, sender: header.sender, recipient: header.recipient,
                  messageID: header.messageID, sentAtMs: header.sentAtMs, nonce: header.nonce, key: key,
                  appendingTo: &out) { $0 += plaintext }
        return out
    }

    /// Appends to `out` the encoded envelope of these header fields and the plaintext `writePlaintext` appends,
    /// padded and sealed under `key`: header, then the plaintext padded and encrypted in place, then the tag,
    /// with no array of its own for any part. What `out` held before is left as it was (a SEND frame's head),
    /// so a device's frames are made in one buffer each. Every message a device sends is sealed here.
    /// Inlinable for the same reason as `EnvelopeHeader.append`.
    @inlinable
    public static func seal(
        version: UInt8 = EnvelopeHeader.version, channel: Channel, sender: PublicKey, recipient: PublicKey,
        messageID: some Collection<UInt8>, sentAtMs: UInt64, nonce: some Collection<UInt8>, key: SymmetricKey,
        appendingTo out: inout [UInt8], plaintext writePlaintext: (inout [UInt8]) -> Void
    ) {
        let start = out.count
        EnvelopeHeader.append(version: version, channel: channel, sender: sender, recipient: recipient,
                              messageID: messageID, sentAtMs: sentAtMs, nonce: nonce, to: &out)
        let plaintextStart = out.count
        writePlaintext(&out)
        let count = out.count - plaintextStart
        let padding = EnvelopePadding.paddedCount(count) - count
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: padding + EnvelopeHeader.tagByteCount))
        AEAD.sealInPlace(&out, from: start, adCount: EnvelopeHeader.adByteCount, key: key)
    }

    /// Authenticates the header and decrypts the ciphertext.
    ///
    /// - Returns: the padded plaintext (strip with `EnvelopePadding.unpad`).
    /// - Throws: `CryptoError.authenticationFailure` when any header byte, the nonce, the ciphertext or the key is
    ///   wrong; `CryptoError.wrongLength` for a nonce that is not 24 bytes or a ciphertext shorter than a tag.
    public static func open(_ envelope: Envelope, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try AEAD.open(
            ciphertext: envelope.ciphertext, ad: envelope.header.additionalData, nonce: envelope.header.nonce, key: key)
    }
}

/// An envelope that passed every receiver rule of Protocol/envelope.md §5 but the replay check, which needs
/// the receiver's memory of ids (durable for a device, a set for a test peer).
public struct OpenedEnvelope: Sendable {
    public var header: EnvelopeHeader
    /// The padded plaintext as decrypted (vectors compare it).
    public var plaintext: [UInt8]
    public var message: Message
}

extension EnvelopeReceiver {
    /// The receiver rules of Protocol/envelope.md §5 before the replay check, in the spec's order: decode,
    /// header (version, recipient, sender, channel, time), decrypt, message, entitlement. The one place they
    /// are written: the devices (`RelayMessenger`), the conformance vectors and the conformance peers all call
    /// it, and add the replay check over their own memory.
    /// - Parameters:
    ///   - deliveredBy: who the relay says sent it (the DELIVER frame's sender).
    ///   - key: the end-to-end key shared with a peer, nil when there is none (a key that is not a valid point).
    ///   - relation: who the sender is to this device, asked only once the envelope has opened.
    public func open(
        _ bytes: ArraySlice<UInt8>, deliveredBy relaySender: PublicKey, nowMs: UInt64,
        key: (PublicKey) -> SymmetricKey?, relation: (PublicKey) -> SenderRelation
    ) -> Result<OpenedEnvelope, EnvelopeError> {
        let envelope: Envelope
        do { envelope = try Envelope(decoding: bytes) } catch { return .failure(error) }
        do {
            try self.checkHeader(envelope.header, deliveredBy: relaySender, nowMs: nowMs)
        } catch {
            return .failure(error)
        }
        guard let key = key(relaySender), let plaintext = try? EnvelopeSealer.open(envelope, key: key) else {
            return .failure(.openFailed)
        }
        // A known type with missing or mistyped fields is malformed too (messages.md, general rules).
        guard let message = try? Message(json: EnvelopePadding.unpad(plaintext)) else {
            return .failure(.malformedPlaintext)
        }
        do {
            try self.checkEntitlement(channel: envelope.header.channel, messageType: message.type,
                                      relation: relation(relaySender))
        } catch {
            return .failure(error)
        }
        return .success(OpenedEnvelope(header: envelope.header, plaintext: plaintext, message: message))
    }
}
