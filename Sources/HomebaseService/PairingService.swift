import HomebaseCore
import HomebaseCrypto
import HomebaseNode
import Synchronization

/// Why `createPairingCode` refused.
public enum PairingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `maxOpenCodes` codes are unused and unexpired; one must be used or expire first.
    case tooManyOpenCodes(Int)

    public var description: String {
        switch self {
        case .tooManyOpenCodes(let n): "\(n) pairing codes are already open; use one or wait for one to expire"
        }
    }
}

/// What became of one `pair.request`.
public enum PairingOutcome: Equatable, Sendable {
    /// The device joined; `roster` is the new signed roster that lists it.
    case accepted(StoredRoster)
    /// Answered with `pair.reject{reason}`.
    case rejected(PairRejectReason)
    /// Not answered at all (the reject budget of a flood is spent).
    case dropped
    /// Not answered: the state could not be read or written. Not settled either (`PeerMessenger.settle`): a
    /// stored request comes again, a live one is retried by its handset.
    case failed
}

/// `pair.reject` reasons (Protocol/messages.md §4).
public enum PairRejectReason: String, Sendable, CaseIterable {
    case invalidCode = "invalid_code"
    case expired
    case used
    case rateLimited = "rate_limited"
}

/// Pairing codes and the roster they extend (Protocol/messages.md §4).
///
/// The CLI calls `createPairingCode` (its own process, same database); the daemon calls `handle` for each
/// `pair.request`, which reads the codes from the database, so a code printed a second ago is already valid.
public final class PairingService: Sendable {
    /// How long a code is valid.
    public static let codeLifetimeMs: UInt64 = 10 * 60 * 1000
    /// Open codes at most (unused, unexpired).
    public static let maxOpenCodes = 16
    /// Display names are cut to this many characters: the roster is sent to every sibling.
    public static let maxNameLength = 64

    private struct Limits {
        /// `pair.request`s examined: 10 a minute.
        var requests: TokenBucket
        /// `rate_limited` answers: a flood from many fresh keys must not make us send (and the relay store)
        /// one reject per request.
        var rejects: TokenBucket
    }

    private let state: HomebaseState
    private let limits: Mutex<Limits?>
    private let logger: Logger

    public init(state: HomebaseState, logger: Logger = .discard()) {
        self.state = state
        self.logger = logger
        self.limits = Mutex(nil)
    }

    /// A fresh single-use code valid for 10 minutes, in the exact format of Protocol/messages.md §4.
    /// Only a hash of its secret is stored.
    /// - Throws: `PairingError.tooManyOpenCodes`, `HomebaseStateError`, store errors.
    public func createPairingCode(relayURL: String, nowMs: UInt64) throws -> String {
        let device = try self.state.deviceKey().publicKey
        let secret = SecureRandom.bytes(PairingCode.secretByteCount)
        let stored = try self.state.insertPairingCode(
            secretHash: Self.hash(secret), createdAtMs: nowMs, expiresAtMs: nowMs + Self.codeLifetimeMs,
            maxOpen: Self.maxOpenCodes)
        guard stored else { throw PairingError.tooManyOpenCodes(Self.maxOpenCodes) }
        return PairingCode(homebase: device, secret: secret, relayURL: relayURL).text
    }

    /// Decides one `pair.request` from `sender` and updates the state; sends nothing.
    public func redeem(sender: PublicKey, secret: String, name: String, nowMs: UInt64) throws -> PairingOutcome {
        let admitted = self.limits.withLock { limits -> Bool? in
            if limits == nil {
                limits = Limits(requests: TokenBucket(ratePerSecond: 10.0 / 60, capacity: 10, nowMs: nowMs),
                                rejects: TokenBucket(ratePerSecond: 10.0 / 60, capacity: 10, nowMs: nowMs))
            }
            if limits!.requests.take(1, nowMs: nowMs) { return true }
            return limits!.rejects.take(1, nowMs: nowMs) ? false : nil
        }
        switch admitted {
        case .none: return .dropped
        case .some(false): return .rejected(.rateLimited)
        case .some(true): break
        }

        guard secret.utf8.count == PairingCode.secretByteCount * 2, let secretBytes = Hex.decode(secret) else {
            return .rejected(.invalidCode)
        }
        let presented = Self.hash(secretBytes)
        // Compare against every stored code without an early exit, so timing says nothing about which
        // (or whether any) code matched; the hashes hide the secrets' bytes anyway.
        var match: PairingCodeRecord?
        for record in try self.state.pairingCodes() where Self.constantTimeEquals(record.secretHash, presented) {
            match = record
        }
        guard let record = match else { return .rejected(.invalidCode) }
        if record.usedAtMs != nil {
            // The same device again (its request delivered twice: a crash before the first was settled, or a
            // retry after a lost pair.accept): it is in the roster, and is told so again.
            if record.usedBy == sender, let roster = try self.state.currentRoster(),
                roster.payload.devices.contains(where: { PublicKey(hex: $0.pk) == sender })
            {
                return .accepted(roster)
            }
            return .rejected(.used)
        }
        if nowMs >= record.expiresAtMs { return .rejected(.expired) }
        guard let account = try self.state.accountKey() else { return .rejected(.invalidCode) }
        guard let roster = try self.state.redeemPairingCode(
            id: record.id, device: sender, name: Self.cleanName(name), nowMs: nowMs, account: account)
        else { return .rejected(.used) }
        return .accepted(roster)
    }

    /// Handles one `pair.request`: `redeem`, then on success updates `directory`, sends `pair.accept` to the new
    /// device and `roster` to every other sibling; otherwise `pair.reject`. All stored sends.
    @discardableResult
    public func handle(sender: PublicKey, secret: String, name: String, nowMs: UInt64, messenger: any PeerMessenger,
                       directory: PeerDirectory) -> PairingOutcome {
        let outcome: PairingOutcome
        do {
            outcome = try self.redeem(sender: sender, secret: secret, name: name, nowMs: nowMs)
        } catch {
            // A store failure: answer nothing, the handset's pairing times out and the user retries.
            self.logger.error("pairing failed", metadata: ["peer": sender.short, "error": "\(error)"])
            return .failed
        }
        switch outcome {
        case .accepted(let roster):
            // The directory first: the new device is a sibling before its first request can arrive.
            directory.update(roster: roster)
            messenger.send(.pairAccept(roster: roster.blob), to: sender, channel: .sibling, store: true)
            for sibling in directory.siblings where sibling != sender {
                messenger.send(.roster(roster.blob), to: sibling, channel: .sibling, store: true)
            }
            self.logger.info("paired", metadata: ["peer": sender.short, "roster.version": "\(roster.version)"])
        case .rejected(let reason):
            messenger.send(.pairReject(reason: reason.rawValue), to: sender, channel: .sibling, store: true)
            self.logger.info("pairing rejected", metadata: ["peer": sender.short, "reason": reason.rawValue])
        case .dropped, .failed:
            break
        }
        return outcome
    }

    static func hash(_ secret: [UInt8]) -> [UInt8] { GenericHash.hash(secret, outputLength: 32) }

    static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }

    /// Control characters out, at most `maxNameLength` characters, never empty.
    static func cleanName(_ name: String) -> String {
        let kept = name.unicodeScalars.filter { !$0.properties.generalCategory.isControl }
        var cleaned = String(String.UnicodeScalarView(kept)).prefix(Self.maxNameLength)
        while cleaned.first?.isWhitespace == true { cleaned.removeFirst() }
        return cleaned.isEmpty ? "handset" : String(cleaned)
    }
}

extension Unicode.GeneralCategory {
    fileprivate var isControl: Bool {
        switch self {
        case .control, .format, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }
}
