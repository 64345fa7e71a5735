/// Who may hold one of a small server's connections (the status page's: each costs a thread), so that strangers
/// cannot lock out the owner. Pure: the server asks on each accepted socket, says when a connection proved it
/// may be there (`authenticate`, for the status page: a request that passed the access token) and when it ended.
///
/// Rules, for a new connection from `address`:
/// 1. when `address` already holds `perAddress` connections that have not authenticated, the oldest of them is
///    evicted to make room (one address cannot hold more than `perAddress` unproven slots);
/// 2. else when a slot is free, it is admitted;
/// 3. else the oldest unproven connection of the address holding the most unproven ones is evicted (strangers
///    crowd out strangers, the most crowding first, and never an authenticated connection);
/// 4. else (every slot authenticated) it is refused.
///
/// So an authenticated owner is never starved by unauthenticated connections, however many, from however many
/// addresses: the owner's new connection always gets a slot, and is evicted only when `perAddress` newer unproven
/// connections from its address, or `maxConnections` newer ones overall, arrive before its request head does
/// (which the server bounds with a head deadline).
public struct ConnectionSlots: Sendable, Equatable {
    public struct Limits: Sendable, Equatable {
        /// Connections at most, authenticated or not.
        public var maxConnections: Int
        /// Unauthenticated connections at most from one peer address.
        public var perAddress: Int

        public init(maxConnections: Int, perAddress: Int) {
            precondition(maxConnections >= 1 && perAddress >= 1, "connection limits must be positive")
            self.maxConnections = maxConnections
            self.perAddress = perAddress
        }
    }

    public enum Admission: Equatable, Sendable {
        case admit
        /// Admitted; the connection `evicting` must be closed now (its slot is already given away).
        case admitEvicting(Int)
        /// No slot: answer 503 and close.
        case refuse
    }

    private struct Slot: Sendable, Equatable {
        var address: String
        /// Admission order: lower is older.
        var sequence: UInt64
        var authenticated = false
    }

    public let limits: Limits
    private var slots: [Int: Slot] = [:]
    private var nextSequence: UInt64 = 0

    public init(_ limits: Limits) {
        self.limits = limits
    }

    /// Connections holding a slot.
    public var count: Int { self.slots.count }

    /// Whether connection `id` holds a slot and has authenticated.
    public func isAuthenticated(_ id: Int) -> Bool { self.slots[id]?.authenticated == true }

    /// Whether connection `id` holds a slot (an evicted one does not).
    public func holds(_ id: Int) -> Bool { self.slots[id] != nil }

    /// Decides on a new connection `id` (unique among those holding slots) from `address`.
    public mutating func admit(_ id: Int, address: String) -> Admission {
        precondition(self.slots[id] == nil, "connection \(id) already holds a slot")
        var evicted: Int?
        let unproven = self.slots.filter { !$0.value.authenticated }
        let fromAddress = unproven.filter { $0.value.address == address }
        if fromAddress.count >= self.limits.perAddress {
            evicted = Self.oldest(fromAddress)
        } else if self.slots.count >= self.limits.maxConnections {
            var perAddress: [String: Int] = [:]
            for slot in unproven.values { perAddress[slot.address, default: 0] += 1 }
            guard let most = perAddress.values.max() else { return .refuse }
            let crowding = unproven.filter { perAddress[$0.value.address] == most }
            evicted = Self.oldest(crowding)
        }
        if let evicted { self.slots[evicted] = nil }
        self.slots[id] = Slot(address: address, sequence: self.nextSequence)
        self.nextSequence += 1
        return evicted.map { .admitEvicting($0) } ?? .admit
    }

    /// Connection `id` proved it may be here: it is never evicted from now on.
    public mutating func authenticate(_ id: Int) {
        self.slots[id]?.authenticated = true
    }

    /// Connection `id` ended (or was evicted: then this does nothing).
    public mutating func release(_ id: Int) {
        self.slots[id] = nil
    }

    private static func oldest(_ slots: [Int: Slot]) -> Int? {
        slots.min { $0.value.sequence < $1.value.sequence }?.key
    }
}
