import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseNode
import HomebaseRouter
import Synchronization

/// Why pairing did not complete; each description is one line a person can act on.
public enum PairingFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The relay answered RECEIPT 2 (or there was no relay connection): nobody is there to answer.
    case homebaseOffline
    /// We are not connected to the relay at all.
    case notConnected
    /// The Homebase answered `pair.reject{reason}`.
    case rejected(reason: String)
    /// No answer within the timeout.
    case timedOut
    /// A `pair.accept` arrived but its roster is forged or does not list this device and the Homebase.
    case invalidRoster
    /// Another pairing is already waiting for an answer in this process.
    case alreadyPairing
    /// The code's key part is not a key anything can be sealed to: mistyped or cut.
    case mistypedKey

    public var description: String {
        switch self {
        case .homebaseOffline:
            "the Homebase in the code is not on the relay: start 'homebase run' on it; if it runs, check that the "
                + "code was copied whole (a mistyped key names no Homebase)"
        case .mistypedKey:
            "the code's key part is mistyped or cut (it is not a valid key); copy the whole line 'homebase pair' printed"
        case .notConnected: "could not connect to the relay"
        case .rejected(let reason): "the Homebase refused the pairing code: \(Self.explain(reason))"
        case .timedOut: "the Homebase did not answer the pairing request in time"
        case .invalidRoster: "the Homebase answered with a roster that does not verify; nothing was saved"
        case .alreadyPairing: "a pairing is already in progress"
        }
    }

    static func explain(_ reason: String) -> String {
        switch reason {
        case "invalid_code": "invalid_code (check the code, or print a new one with 'homebase pair')"
        case "expired": "expired (codes last 10 minutes; print a new one with 'homebase pair')"
        case "used": "used (each code pairs one device; print a new one with 'homebase pair')"
        case "rate_limited": "rate_limited (too many attempts; wait a minute and retry)"
        default: reason
        }
    }
}

/// What became of a roster offered to `apply(roster:from:)`.
public enum RosterOutcome: Equatable, Sendable {
    case applied(version: UInt64)
    /// Not signed by the pinned account key (or unparseable).
    case badSignature
    /// Version not greater than the one held.
    case staleVersion
    /// Does not list this device.
    case notListed
    /// This device is not paired, so there is no account key to check against.
    case notPaired
}

/// This handset's place in its account (Protocol/messages.md §4): the Homebase it paired with, the account
/// key pinned from that `pair.accept` (trust on first use through the code), and the current signed roster.
///
/// Persisted in the device's state database through a `SettingsBackend`. Thread safety: the pairing waiter
/// is behind a mutex; the backend synchronises itself.
public final class HandsetAccount: Sendable {
    public enum Key {
        public static let homebase = "homebase"
        public static let account = "account"
        public static let roster = "roster"
    }

    public let backend: any SettingsBackend
    public let selfKey: PublicKey
    private let waiter = Mutex<Waiter?>(nil)

    private struct Waiter {
        var homebase: PublicKey
        var continuation: CheckedContinuation<Result<RosterPayload, PairingFailure>, Never>?
        var result: Result<RosterPayload, PairingFailure>?
    }

    public init(backend: any SettingsBackend, selfKey: PublicKey) {
        self.backend = backend
        self.selfKey = selfKey
    }

    // MARK: Persisted facts

    /// The Homebase this handset paired with.
    public var homebase: PublicKey? { self.backend.string(forKey: Key.homebase).flatMap { PublicKey(hex: $0) } }
    /// The account key pinned at pairing; every later roster must be signed by it.
    public var accountKey: PublicKey? { self.backend.string(forKey: Key.account).flatMap { PublicKey(hex: $0) } }
    /// The current roster (already verified when stored).
    public var roster: RosterPayload? {
        guard let bytes = self.backend.bytes(forKey: Key.roster) else { return nil }
        return SignedPayloadJSON.decode(RosterPayload.self, from: bytes)
    }

    public var isPaired: Bool { self.homebase != nil && self.accountKey != nil }

    /// The roster's devices other than this one.
    public var siblings: [PublicKey] { (self.roster?.devicePublicKeys ?? []).filter { $0 != self.selfKey } }

    /// Roster devices with the `homebase` role (whose adverts this handset accepts).
    public var homebaseDevices: Set<PublicKey> {
        Set((self.roster?.devices ?? []).filter { $0.role == "homebase" }.compactMap { PublicKey(hex: $0.pk) })
    }

    /// The entitlement rule's view of `sender`: roster devices are siblings, and so is the Homebase a pairing
    /// is waiting on (its `pair.accept` comes on sync_delta before we hold any roster).
    public func relation(of sender: PublicKey) -> SenderRelation {
        if self.siblings.contains(sender) { return .sibling }
        if self.waiter.withLock({ $0?.homebase }) == sender { return .sibling }
        return .stranger
    }

    // MARK: Pairing

    /// Sends `pair.request{secret, name}` to the code's Homebase (sync_delta, live) and waits for its
    /// `pair.accept` or `pair.reject`. The caller must feed inbound messages to `handle(_:)` meanwhile.
    ///
    /// - Throws: `PairingFailure`; nothing is persisted unless the roster verifies.
    @discardableResult
    public func pair(code: PairingCode, name: String, messenger: any PeerMessenger,
                     timeout: Duration = .seconds(30)) async throws(PairingFailure) -> RosterPayload {
        let installed = self.waiter.withLock { w -> Bool in
            guard w == nil else { return false }
            w = Waiter(homebase: code.homebase)
            return true
        }
        guard installed else { throw .alreadyPairing }
        defer { self.waiter.withLock { $0 = nil } }
        guard code.homebase.acceptsSealedMessages else { throw .mistypedKey }
        guard messenger.isConnected else { throw .notConnected }
        let outcome = await messenger.sendAndWait(.pairRequest(secret: code.secretHex, name: name),
                                                  to: code.homebase, channel: .sibling, store: false)
        if outcome.isFailure { throw .homebaseOffline }
        let result = await self.awaitAnswer(timeout: timeout)
        return try result.get()
    }

    private func awaitAnswer(timeout: Duration) async -> Result<RosterPayload, PairingFailure> {
        let timer = Task { [weak self] in
            // Cancelled (the answer came) is not timed out: `try?` here would time out the *next* pairing,
            // whose waiter may already be installed when this wakes.
            do { try await Task.sleep(for: timeout) } catch { return }
            self?.resolve(.failure(.timedOut))
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let ready = self.waiter.withLock { w -> Result<RosterPayload, PairingFailure>? in
                if let r = w?.result { return r }
                w?.continuation = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Settles the waiting pairing once; later answers are ignored.
    private func resolve(_ result: Result<RosterPayload, PairingFailure>) {
        let continuation = self.waiter.withLock { w -> CheckedContinuation<Result<RosterPayload, PairingFailure>, Never>? in
            guard w != nil, w?.result == nil else { return nil }
            w?.result = result
            defer { w?.continuation = nil }
            return w?.continuation
        }
        continuation?.resume(returning: result)
    }

    /// Checks a `pair.accept` roster: parse to learn the claimed account key, verify the signature over the
    /// exact bytes with it, and require that it lists this device and the Homebase.
    func verifyFirstRoster(_ blob: SignedBlob, homebase: PublicKey) -> (RosterPayload, PublicKey)? {
        // The account key is learned from the payload itself (first contact), then must have signed it.
        guard let claimed = SignedPayloadJSON.decode(RosterPayload.self, from: blob.payload),
            let account = PublicKey(hex: claimed.account),
            let roster = SignedPayloadVerifier.verify(RosterPayload.self, blob, signer: account),
            roster.devicePublicKeys.contains(self.selfKey), roster.devicePublicKeys.contains(homebase)
        else { return nil }
        return (roster, account)
    }

    // MARK: Later rosters

    /// Applies a `roster` message: signed by the pinned account key, a greater version, listing this device.
    /// Anything else is dropped and reported.
    @discardableResult
    public func apply(roster blob: SignedBlob) -> RosterOutcome {
        guard let account = self.accountKey else { return .notPaired }
        guard let roster = SignedPayloadVerifier.verify(RosterPayload.self, blob, signer: account) else {
            return .badSignature
        }
        guard roster.version > (self.roster?.version ?? 0) else { return .staleVersion }
        guard roster.devicePublicKeys.contains(self.selfKey) else { return .notListed }
        do { try self.backend.set(bytes: blob.payload, forKey: Key.roster) } catch { return .badSignature }
        return .applied(version: roster.version)
    }

    // MARK: Inbound

    /// Handles the account's messages: `pair.accept` / `pair.reject` for a waiting pairing and `roster`.
    ///
    /// - Returns: whether the message was one of those (handled or dropped).
    @discardableResult
    public func handle(_ inbound: InboundMessage) -> Bool {
        guard inbound.channel == .sibling else { return false }
        switch inbound.message {
        case .pairAccept(let blob):
            // Only from the Homebase we asked (Protocol/messages.md §4); anything else is dropped.
            guard let target = self.waiter.withLock({ $0?.homebase }), target == inbound.sender else { return true }
            guard let (roster, account) = self.verifyFirstRoster(blob, homebase: target) else {
                self.resolve(.failure(.invalidRoster))
                return true
            }
            do {
                try self.backend.set(target.hex, forKey: Key.homebase)
                try self.backend.set(account.hex, forKey: Key.account)
                try self.backend.set(bytes: blob.payload, forKey: Key.roster)
            } catch {
                self.resolve(.failure(.invalidRoster))
                return true
            }
            self.resolve(.success(roster))
            return true
        case .pairReject(let reason):
            guard self.waiter.withLock({ $0?.homebase }) == inbound.sender else { return true }
            self.resolve(.failure(.rejected(reason: reason)))
            return true
        case .roster(let blob):
            self.apply(roster: blob)
            return true
        default:
            return false
        }
    }
}
