import HomebaseCore

/// Which authenticated connection serves each public key on this relay.
///
/// A small interface so that a relay fleet can share presence between edges later (for example through NATS
/// JetStream): the hub asks only "who serves this key here" and announces arrivals and departures.
protocol Presence: AnyObject {
    associatedtype Session: AnyObject
    /// Registers `session` for `key`; returns the session it replaces, which the caller closes with 4001.
    func register(_ key: PublicKey, _ session: Session) -> Session?
    /// Removes `session` if it is still the one registered for `key`.
    func unregister(_ key: PublicKey, _ session: Session)
    func session(for key: PublicKey) -> Session?
    var count: Int { get }
}

/// Presence for a single relay process. Loop-confined.
final class LocalPresence<Session: AnyObject>: Presence {
    private var sessions: [PublicKey: Session] = [:]

    func register(_ key: PublicKey, _ session: Session) -> Session? {
        let old = self.sessions.updateValue(session, forKey: key)
        return old === session ? nil : old
    }

    func unregister(_ key: PublicKey, _ session: Session) {
        if self.sessions[key] === session { self.sessions[key] = nil }
    }

    func session(for key: PublicKey) -> Session? { self.sessions[key] }

    var count: Int { self.sessions.count }

    var all: Dictionary<PublicKey, Session>.Values { self.sessions.values }
}
