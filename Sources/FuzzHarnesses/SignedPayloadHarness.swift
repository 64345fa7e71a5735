import HomebaseCore
import HomebaseCrypto

/// Signed payloads (adverts, rosters, grants: `SignedPayloadVerifier`). Input: `kind || payload`; the payload
/// is signed by a (the vectors' signer) with the kind's context, so the fuzzer reaches the JSON behind the
/// signature check; bit 2 of `kind` also tries a changed signature and the wrong context.
///
/// Checks: an accepted payload names its signer and has `v == 1`; re-encoded and re-signed it verifies to
/// the same value; a refusal is `malformed` or `unknownVersion`, never `signatureInvalid`, for a good
/// signature; a changed signature or another kind's context is `signatureInvalid`.
enum SignedPayloadHarness {
    static let target = FuzzTarget(
        "signed-payload", "signed advert/roster/grant payloads: verify rules, encode→sign→verify round trip",
        seeds: Self.seeds, run: Self.run)

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard let kind = input.first else { return }
        let payload = Array(input.dropFirst())
        let tamper = kind & 4 != 0
        switch kind & 3 {
        case 0: try Self.verify(AdvertPayload.self, payload, otherContext: RosterPayload.signatureContext, tamper: tamper)
        case 1: try Self.verify(RosterPayload.self, payload, otherContext: GrantPayload.signatureContext, tamper: tamper)
        default: try Self.verify(GrantPayload.self, payload, otherContext: AdvertPayload.signatureContext, tamper: tamper)
        }
    }

    static func verify<T: SignerNamingPayload>(
        _ type: T.Type, _ payload: [UInt8], otherContext: String, tamper: Bool
    ) throws(InvariantViolation) {
        let signer = EnvelopeHarness.keys.a
        let signature = signer.sign(payload, context: T.signatureContext)
        let result = SignedPayloadVerifier.verify(T.self, payload: payload, signature: signature, signer: signer.publicKey)
        switch result {
        case .success(let value):
            try check(value.v == 1, "accepted version \(value.v)")
            try check(PublicKey(hex: value.signerHex) == signer.publicKey, "accepted a payload naming another signer")
            let encoded = SignedPayloadJSON.encode(value)
            let again = SignedPayloadVerifier.verify(
                T.self, payload: encoded, signature: signer.sign(encoded, context: T.signatureContext),
                signer: signer.publicKey)
            try checkEqual(try? again.get(), value, "re-encoded \(String(decoding: encoded, as: UTF8.self))")
        case .failure(let rejection):
            try check(rejection != .signatureInvalid, "a good signature refused")
        }
        guard tamper else { return }
        var changed = signature
        changed[Int(payload.count % changed.count)] ^= 0x01
        let forged = SignedPayloadVerifier.verify(T.self, payload: payload, signature: changed, signer: signer.publicKey)
        try check(forged.failure == .signatureInvalid, "a changed signature was not refused as such: \(forged)")
        let misplaced = signer.sign(payload, context: otherContext)
        let wrong = SignedPayloadVerifier.verify(T.self, payload: payload, signature: misplaced, signer: signer.publicKey)
        try check(wrong.failure == .signatureInvalid, "another kind's signature was not refused: \(wrong)")
    }

    static func seeds() -> [[UInt8]] {
        var out: [[UInt8]] = []
        for vector in FixtureFiles.vectors("signed-payload-vectors.json") {
            guard let hex = vector["inputs"]?["payload"]?.stringValue, let payload = Hex.decode(hex) else { continue }
            let kind: UInt8 = switch vector["kind"]?.stringValue {
            case "roster": 1
            case "grant": 2
            default: 0
            }
            out.append(payload.prefixed(kind))
            out.append(payload.prefixed(kind | 4))
        }
        return out
    }
}
