/// What the status page says about the relay link: up since when, how often it came back, how it last ended.
/// Pure: the owner tells it each login and each loss, with the wall-clock time.
public struct RelayLinkHistory: Sendable, Equatable {
    /// Logged in now.
    public private(set) var connected = false
    /// When the current login happened (nil while down).
    public private(set) var connectedSinceMs: UInt64?
    /// Logins after the first: each one followed a loss of the link.
    public private(set) var reconnects = 0
    /// When the link was last lost, and the relay's close code if it sent one.
    public private(set) var lastLossAtMs: UInt64?
    public private(set) var lastCloseCode: UInt16?
    /// Messages the relay held for this device at the last login (stored while it was away).
    public private(set) var storedAtLogin: Int?
    private var everConnected = false

    public init() {}

    /// Logged in; the relay said it held `stored` messages for this device.
    public mutating func connected(atMs: UInt64, stored: Int? = nil) {
        guard !self.connected else { return }
        self.storedAtLogin = stored
        if self.everConnected { self.reconnects += 1 }
        self.everConnected = true
        self.connected = true
        self.connectedSinceMs = atMs
    }

    /// The link ended, or a connection attempt failed (`closeCode` nil when no close frame came).
    public mutating func disconnected(atMs: UInt64, closeCode: UInt16?) {
        // A failed attempt while already down is not a new loss.
        guard self.connected else { return }
        self.connected = false
        self.connectedSinceMs = nil
        self.lastLossAtMs = atMs
        self.lastCloseCode = closeCode
    }
}
