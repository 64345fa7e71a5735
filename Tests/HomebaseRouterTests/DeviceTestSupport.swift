import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseNode
@testable import HomebaseRouter

/// Signed payloads and keys for the device tests.
enum DeviceFixture {
    static func roster(account: SigningSecretKey, version: UInt64, homebase: PublicKey, handsets: [PublicKey],
                       signer: SigningSecretKey? = nil) -> SignedBlob {
        var devices = [RosterPayload.Device(pk: homebase.hex, name: "homebase", role: "homebase", addedAt: 1)]
        devices += handsets.map { RosterPayload.Device(pk: $0.hex, name: "phone", role: "handset", addedAt: 2) }
        let payload = SignedPayloadJSON.encode(RosterPayload(account: account.publicKey, version: version,
                                                             devices: devices))
        return SignedBlob(payload: payload, signature: (signer ?? account).sign(payload, context: SignatureContext.roster))
    }

    static func advert(host: SigningSecretKey, seq: UInt64, issuedAt: UInt64, tags: [String],
                       signer: SigningSecretKey? = nil) -> SignedBlob {
        let models = tags.map {
            AdvertPayload.Model(tag: $0, family: "qwen2", parameterSize: "7B", quantization: "Q4_K_M",
                                capabilities: ["completion"], contextLength: nil, loaded: true)
        }
        let payload = SignedPayloadJSON.encode(AdvertPayload(
            host: host.publicKey, seq: seq, issuedAt: issuedAt, runtime: .init(version: "0.5.1"), models: models))
        return SignedBlob(payload: payload, signature: (signer ?? host).sign(payload, context: SignatureContext.advert))
    }

    static func grant(host: SigningSecretKey, guest: PublicKey, models: GrantPayload.GrantedModels,
                      issuedAt: UInt64, expiresAt: UInt64? = nil, signer: SigningSecretKey? = nil) -> SignedBlob {
        let payload = SignedPayloadJSON.encode(GrantPayload(host: host.publicKey, guest: guest, models: models,
                                                            issuedAt: issuedAt, expiresAt: expiresAt))
        return SignedBlob(payload: payload, signature: (signer ?? host).sign(payload, context: SignatureContext.grant))
    }

    static func inbound(_ message: Message, from sender: PublicKey, on channel: Channel) -> InboundMessage {
        InboundMessage(sender: sender, channel: channel, message: message, sentAtMs: 0,
                       messageID: [UInt8](repeating: 0, count: 16))
    }
}

/// Feeds every inbound message of `messenger` to `handle` until cancelled.
func pump(_ messenger: LoopbackMessenger, _ handle: @escaping @Sendable (InboundMessage) -> Void) -> Task<Void, Never> {
    let inbound = messenger.inbound
    return Task {
        for await message in inbound { handle(message) }
    }
}

/// A fresh temporary directory, removed on deinit.
final class DeviceTempDirectory: Sendable {
    let path: String
    init() throws {
        self.path = FileManager.default.temporaryDirectory.appendingPathComponent("device-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: self.path) }
}

/// Unix milliseconds now.
func wallMs() -> UInt64 { UInt64(Date().timeIntervalSince1970 * 1000) }
