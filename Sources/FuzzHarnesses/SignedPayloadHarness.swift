import HomebaseCore
import HomebaseCrypto

/// Signed payloads (adverts, rosters, grants: `SignedPayloadVerifier`). Input: `kind || payload`; the payload
/// is taken as signed by a (the vectors' signer) with the kind's context, so the fuzzer reaches the JSON behind
/// the signature check; bit 2 of `kind` also tries signatures that do not hold, bit 3 which one.
///
/// Checks: the rules after the signature (`judgeAuthentic`) never refuse with `signatureInvalid`; what they
/// accept names its signer and has `v == 1`, and is what `verify` gives with a's signature over the payload,
/// and re-encoded and re-signed it verifies to the same value; a changed signature or another kind's context is
/// `signatureInvalid`. Signing is what an input costs most, so a payload is signed only when the rules accept
/// it (`verify` runs them unchanged once the signature holds); a refused one is tried with a signature a made
/// once over another payload (in this kind's context, or with bit 3 in another kind's): `signatureInvalid`
/// before anything of it is read.
enum SignedPayloadHarness {
    static let target = FuzzTarget(
        "signed-payload", "signed advert/roster/grant payloads: verify rules, encode→sign→verify round trip",
        seeds: Self.seeds, run: Self.run)

    /// What the signatures not over the input are over (an input that is this is not tried with them).
    static let otherPayload: [UInt8] = Array(#"{"v":1}"#.utf8)
    /// a's signatures over `otherPayload`, by context.
    static let otherSignatures: [String: [UInt8]] = Dictionary(uniqueKeysWithValues: [
        AdvertPayload.signatureContext, RosterPayload.signatureContext, GrantPayload.signatureContext,
    ].map { ($0, EnvelopeHarness.keys.a.sign(Self.otherPayload, context: $0)) })

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard let kind = input.first else { return }
        let payload = Array(input.dropFirst())
        let tamper = kind & 4 != 0
        let otherKind = kind & 8 != 0
        switch kind & 3 {
        case 0:
            try Self.verify(AdvertPayload.self, payload, otherContext: RosterPayload.signatureContext, tamper: tamper,
                            otherKind: otherKind)
        case 1:
            try Self.verify(RosterPayload.self, payload, otherContext: GrantPayload.signatureContext, tamper: tamper,
                            otherKind: otherKind)
        default:
            try Self.verify(GrantPayload.self, payload, otherContext: AdvertPayload.signatureContext, tamper: tamper,
                            otherKind: otherKind)
        }
    }

    static func verify<T: SignerNamingPayload>(
        _ type: T.Type, _ payload: [UInt8], otherContext: String, tamper: Bool, otherKind: Bool
    ) throws(InvariantViolation) {
        let signer = EnvelopeHarness.keys.a
        switch SignedPayloadVerifier.judgeAuthentic(T.self, payload: payload, signer: signer.publicKey) {
        case .success(let value):
            try check(value.v == 1, "accepted version \(value.v)")
            try check(PublicKey(hex: value.signerHex) == signer.publicKey, "accepted a payload naming another signer")
            let signature = signer.sign(payload, context: T.signatureContext)
            let verified = SignedPayloadVerifier.verify(
                T.self, payload: payload, signature: signature, signer: signer.publicKey)
            try checkEqual(try? verified.get(), value, "verify with a's signature against the rules alone")
            let encoded = SignedPayloadJSON.encode(value)
            let again = SignedPayloadVerifier.verify(
                T.self, payload: encoded, signature: signer.sign(encoded, context: T.signatureContext),
                signer: signer.publicKey)
            try checkEqual(try? again.get(), value, "re-encoded \(String(decoding: encoded, as: UTF8.self))")
            guard tamper else { return }
            var changed = signature
            changed[Int(payload.count % changed.count)] ^= 0x01
            let forged = SignedPayloadVerifier.verify(T.self, payload: payload, signature: changed, signer: signer.publicKey)
            try check(forged.failure == .signatureInvalid, "a changed signature was not refused as such: \(forged)")
            let misplaced = signer.sign(payload, context: otherContext)
            let wrong = SignedPayloadVerifier.verify(T.self, payload: payload, signature: misplaced, signer: signer.publicKey)
            try check(wrong.failure == .signatureInvalid, "another kind's signature was not refused: \(wrong)")
        case .failure(let rejection):
            try check(rejection != .signatureInvalid, "the rules after the signature refused the signature")
            guard tamper, payload != Self.otherPayload else { return }
            let signature = Self.otherSignatures[otherKind ? otherContext : T.signatureContext]!
            let forged = SignedPayloadVerifier.verify(T.self, payload: payload, signature: signature, signer: signer.publicKey)
            try check(forged.failure == .signatureInvalid, "a signature over other bytes was not refused: \(forged)")
        }
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
            out.append(payload.prefixed(kind | 4 | 8))
        }
        return out
    }
}
