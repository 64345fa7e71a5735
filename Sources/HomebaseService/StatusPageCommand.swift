import Foundation
import HomebaseCore

/// One of the status page's actions, parsed from its POST body (`StatusPageGate.Action` says which).
public enum StatusPageCommand: Equatable, Sendable {
    /// `{"guest": hex, "models": ["*"] or [tags], "expires_hours": n or null}`: as `homebase grant`.
    case grant(guest: PublicKey, models: GrantPayload.GrantedModels, expiresInHours: Int?)
    /// `{"guest": hex}`: as `homebase revoke`.
    case revoke(guest: PublicKey)
    /// `{"guest": hex}`: forgets a pending join (the guest is a stranger again, as after `contact.leave`).
    case decline(guest: PublicKey)
    /// `{"peer": hex, "id": request id}`: stops one request (its requester falls back), revoking nobody.
    case stop(peer: PublicKey, id: String)
    /// `{}`: a new pairing code, as `homebase pair`.
    case pair
    /// `{"model": tag, "pinned": bool}`: adds the model to, or removes it from, `homebase config --pin`.
    case pin(model: String, pinned: Bool)

    /// The longest grant the page offers: a year.
    public static let maxExpiresHours = 24 * 366

    /// Why a body does not make a command; the page shows the sentence.
    public struct Invalid: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    public static func parse(_ action: StatusPageGate.Action, body: [UInt8]) throws(Invalid) -> StatusPageCommand {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw Invalid("the body is not a JSON object")
        }
        switch action {
        case .grant:
            let guest = try Self.guest(object)
            guard let list = object["models"] as? [String], !list.isEmpty else {
                throw Invalid("name at least one model, or \"*\" for all")
            }
            let tags: [String]
            do throws(HomebaseSettings.EditError) {
                tags = try HomebaseSettings.parseModelList(list.joined(separator: ","))
            } catch {
                throw Invalid(error.description)
            }
            guard !tags.isEmpty else { throw Invalid("name at least one model, or \"*\" for all") }
            var hours: Int?
            if let value = object["expires_hours"], !(value is NSNull) {
                guard let n = Self.integer(value), (1...Self.maxExpiresHours).contains(n) else {
                    throw Invalid("expires_hours must be a whole number from 1 to \(Self.maxExpiresHours)")
                }
                hours = n
            }
            return .grant(guest: guest, models: tags.contains("*") ? .all : .only(tags), expiresInHours: hours)
        case .revoke:
            return .revoke(guest: try Self.guest(object))
        case .decline:
            return .decline(guest: try Self.guest(object))
        case .pair:
            return .pair
        case .stop:
            guard let hex = object["peer"] as? String, let peer = PublicKey(hex: hex) else {
                throw Invalid("peer must be a 64-hex public key")
            }
            guard let id = object["id"] as? String, !id.isEmpty, id.utf8.count <= 128 else {
                throw Invalid("id must name the request (1 to 128 bytes)")
            }
            return .stop(peer: peer, id: id)
        case .pin:
            guard let model = object["model"] as? String,
                  let tags = try? HomebaseSettings.parseModelList(model), tags == [model]
            else { throw Invalid("model must be one model tag") }
            guard let pinned = object["pinned"] as? Bool else { throw Invalid("pinned must be true or false") }
            return .pin(model: model, pinned: pinned)
        }
    }

    private static func guest(_ object: [String: Any]) throws(Invalid) -> PublicKey {
        guard let hex = object["guest"] as? String, let key = PublicKey(hex: hex) else {
            throw Invalid("guest must be a 64-hex public key")
        }
        return key
    }

    /// A JSON number that is a whole number (JSONSerialization gives NSNumber; booleans are not numbers here).
    private static func integer(_ value: Any) -> Int? {
        if value is Bool { return nil }
        if let n = value as? Int { return n }
        if let d = value as? Double, d.rounded() == d, abs(d) < 1e9 { return Int(d) }
        return nil
    }
}
