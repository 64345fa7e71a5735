import HomebaseCore
import Synchronization

/// When each peer was last heard from (any message that reached the daemon), for the status page's siblings and
/// guests.
///
/// Bounded: at most `capacity` peers, the longest silent forgotten first, so strangers' pairing attempts cannot
/// grow it; siblings and guests are far fewer than the bound.
public final class PeerLastHeard: Sendable {
    public static let defaultCapacity = 256

    public let capacity: Int
    private let heard = Mutex<[PublicKey: UInt64]>([:])

    public init(capacity: Int = PeerLastHeard.defaultCapacity) {
        precondition(capacity >= 1, "capacity must be positive")
        self.capacity = capacity
    }

    public func heard(from peer: PublicKey, atMs: UInt64) {
        self.heard.withLock { all in
            if all.updateValue(max(atMs, all[peer] ?? 0), forKey: peer) == nil, all.count > self.capacity,
               let oldest = all.min(by: { $0.value < $1.value })?.key {
                all.removeValue(forKey: oldest)
            }
        }
    }

    /// When `peer` was last heard from; nil if never (or forgotten).
    public func lastHeard(_ peer: PublicKey) -> UInt64? {
        self.heard.withLock { $0[peer] }
    }
}
