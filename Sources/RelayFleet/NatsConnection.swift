import CNats
import Foundation
import HomebaseCore
import Synchronization

/// A failed nats.c call: the status and the library's last error text.
public struct NatsError: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ what: String, _ status: natsStatus) {
        var detail = String(cString: natsStatus_GetText(status))
        var last: natsStatus = NATS_OK
        if let text = nats_GetLastError(&last) {
            let t = String(cString: text)
            if !t.isEmpty, t != detail { detail += " (\(t))" }
        }
        self.description = "\(what): \(detail)"
    }

    public init(_ text: String) { self.description = text }
}

/// A message as a subscription receives it, copied out of nats.c's buffer.
public struct NatsMessage: Sendable {
    public let subject: String
    public let reply: String?
    public let data: [UInt8]
    /// The server's "no responders" status (503) for a request whose subject nobody subscribes to.
    public let isNoResponders: Bool
}

/// What happened to the connection to the cluster (for logs and `/metrics`).
public enum NatsConnectionEvent: Sendable {
    case disconnected
    case reconnected(server: String)
    case closed
    case asyncError(String)
}

/// One connection to a NATS cluster through nats.c (Debian's libnats), the only code that touches the C client.
///
/// nats.c reconnects by itself (forever, every 250 ms, across every server it was given or learnt), buffers
/// publishes meanwhile (8 MiB), and delivers every subscription's messages on one shared thread
/// (`UseGlobalMessageDelivery` with a pool of one), so handlers run one at a time in the order the server sent.
/// Thread-safe, as nats.c is.
public final class NatsConnection: @unchecked Sendable {
    private let nc: OpaquePointer
    private let eventBox: Unmanaged<EventBox>
    public let name: String

    final class EventBox: @unchecked Sendable {
        let handler: @Sendable (NatsConnectionEvent) -> Void
        init(_ h: @escaping @Sendable (NatsConnectionEvent) -> Void) { self.handler = h }
    }

    public init(servers: [String], name: String, events: @escaping @Sendable (NatsConnectionEvent) -> Void) throws {
        precondition(!servers.isEmpty, "at least one NATS server")
        self.name = name
        nats_SetMessageDeliveryPoolSize(1)
        var opts: OpaquePointer?
        var s = natsOptions_Create(&opts)
        guard s == NATS_OK, let opts else { throw NatsError("natsOptions_Create", s) }
        defer { natsOptions_Destroy(opts) }
        let box = Unmanaged.passRetained(EventBox(events))
        self.eventBox = box
        let closure = box.toOpaque()
        var cStrings = servers.map { strdup($0) }
        defer { for p in cStrings { free(p) } }
        s = cStrings.withUnsafeMutableBufferPointer { buf in
            buf.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buf.count) {
                natsOptions_SetServers(opts, $0, Int32(buf.count))
            }
        }
        guard s == NATS_OK else { box.release(); throw NatsError("NATS servers \(servers)", s) }
        _ = natsOptions_SetName(opts, name)
        _ = natsOptions_SetMaxReconnect(opts, -1)
        _ = natsOptions_SetReconnectWait(opts, 250)
        _ = natsOptions_SetReconnectBufSize(opts, 8 * 1024 * 1024)
        _ = natsOptions_SetTimeout(opts, 2_000)
        _ = natsOptions_SetPingInterval(opts, 2_000)
        _ = natsOptions_SetMaxPingsOut(opts, 2)
        _ = natsOptions_UseGlobalMessageDelivery(opts, true)
        // Write each publish at once rather than leaving it to nats.c's flusher thread: measured, the flusher
        // added about a millisecond per hop (a cross-edge round trip at 2 ms p50 instead of 0.3).
        _ = natsOptions_SetSendAsap(opts, true)
        // An edge never needs its own publishes back (a key's subject is only ever this edge's or another's).
        _ = natsOptions_SetNoEcho(opts, true)
        _ = natsOptions_SetDisconnectedCB(opts, { _, c in
            Unmanaged<EventBox>.fromOpaque(c!).takeUnretainedValue().handler(.disconnected)
        }, closure)
        _ = natsOptions_SetReconnectedCB(opts, { nc, c in
            var url = [CChar](repeating: 0, count: 256)
            _ = natsConnection_GetConnectedUrl(nc, &url, url.count)
            Unmanaged<EventBox>.fromOpaque(c!).takeUnretainedValue().handler(.reconnected(server: String(cString: url)))
        }, closure)
        // The closed callback is the last nats.c makes for a connection, on its own thread, possibly after
        // `natsConnection_Destroy` returned: it, not `deinit`, lets go of the box.
        _ = natsOptions_SetClosedCB(opts, { _, c in
            let box = Unmanaged<EventBox>.fromOpaque(c!)
            box.takeUnretainedValue().handler(.closed)
            box.release()
        }, closure)
        _ = natsOptions_SetErrorHandler(opts, { _, _, err, c in
            let text = String(cString: natsStatus_GetText(err))
            Unmanaged<EventBox>.fromOpaque(c!).takeUnretainedValue().handler(.asyncError(text))
        }, closure)
        var conn: OpaquePointer?
        s = natsConnection_Connect(&conn, opts)
        guard s == NATS_OK, let conn else {
            box.release()
            throw NatsError("cannot connect to NATS at \(servers.joined(separator: ","))", s)
        }
        self.nc = conn
    }

    deinit { natsConnection_Destroy(self.nc) }

    /// Publishes `data` to `subject`, asking for replies on `reply`. Buffered by nats.c and written by its flusher
    /// thread; while reconnecting, buffered up to the reconnect buffer (then an error).
    public func publish(_ subject: String, reply: String? = nil, _ data: [UInt8]) throws {
        let s = data.withUnsafeBytes { raw -> natsStatus in
            if let reply {
                return natsConnection_PublishRequest(self.nc, subject, reply, raw.baseAddress, Int32(raw.count))
            }
            return natsConnection_Publish(self.nc, subject, raw.baseAddress, Int32(raw.count))
        }
        guard s == NATS_OK else { throw NatsError("publish to \(subject)", s) }
    }

    /// Subscribes `handler` to `subject` (wildcards allowed). Handlers run on nats.c's delivery thread.
    public func subscribe(_ subject: String, _ handler: @escaping @Sendable (NatsMessage) -> Void) throws
        -> NatsSubscription
    {
        let box = NatsSubscription.HandlerBox(handler)
        let closure = Unmanaged.passRetained(box).toOpaque()
        var sub: OpaquePointer?
        let s = natsConnection_Subscribe(&sub, self.nc, subject, { _, _, msg, c in
            guard let msg else { return }
            defer { natsMsg_Destroy(msg) }
            let box = Unmanaged<NatsSubscription.HandlerBox>.fromOpaque(c!).takeUnretainedValue()
            let n = Int(natsMsg_GetDataLength(msg))
            var data = [UInt8](repeating: 0, count: n)
            if n > 0, let p = natsMsg_GetData(msg) {
                data.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: p, count: n)) }
            }
            let reply = natsMsg_GetReply(msg).map { String(cString: $0) }
            box.handler(NatsMessage(subject: String(cString: natsMsg_GetSubject(msg)), reply: reply, data: data,
                                    isNoResponders: natsMsg_IsNoResponders(msg)))
        }, closure)
        guard s == NATS_OK, let sub else {
            Unmanaged<NatsSubscription.HandlerBox>.fromOpaque(closure).release()
            throw NatsError("subscribe to \(subject)", s)
        }
        // Release the handler only when nats.c says no message will reach it any more.
        _ = natsSubscription_SetOnCompleteCB(sub, { c in
            Unmanaged<NatsSubscription.HandlerBox>.fromOpaque(c!).release()
        }, closure)
        // A key's subject carries live frames: a stalled handler must not grow memory without bound; what
        // exceeds this is dropped by nats.c, and the sender's request times out into RECEIPT 2.
        _ = natsSubscription_SetPendingLimits(sub, 65_536, 64 * 1024 * 1024)
        return NatsSubscription(sub)
    }

    /// Waits until the server has processed everything published so far (a PING/PONG round trip).
    public func flush(timeoutMs: Int64 = 2_000) throws {
        let s = natsConnection_FlushTimeout(self.nc, timeoutMs)
        guard s == NATS_OK else { throw NatsError("flush", s) }
    }

    public var isConnected: Bool { natsConnection_Status(self.nc) == NATS_CONN_STATUS_CONNECTED }

    /// The server this connection is on now, if connected.
    public var connectedServer: String? {
        var url = [CChar](repeating: 0, count: 256)
        guard natsConnection_GetConnectedUrl(self.nc, &url, url.count) == NATS_OK, url[0] != 0 else { return nil }
        return String(cString: url)
    }

    /// Messages and bytes in and out, and reconnections, since connecting.
    public func statistics() -> (inMessages: UInt64, outMessages: UInt64, inBytes: UInt64, outBytes: UInt64,
                                 reconnects: UInt64)
    {
        var stats: OpaquePointer?
        guard natsStatistics_Create(&stats) == NATS_OK, let stats else { return (0, 0, 0, 0, 0) }
        defer { natsStatistics_Destroy(stats) }
        _ = natsConnection_GetStats(self.nc, stats)
        var im: UInt64 = 0, ib: UInt64 = 0, om: UInt64 = 0, ob: UInt64 = 0, rc: UInt64 = 0
        _ = natsStatistics_GetCounts(stats, &im, &ib, &om, &ob, &rc)
        return (im, om, ib, ob, rc)
    }

    /// Flushes what is buffered (at most `timeoutMs`) and closes.
    public func close(timeoutMs: Int64 = 1_000) {
        _ = natsConnection_FlushTimeout(self.nc, timeoutMs)
        natsConnection_Close(self.nc)
    }
}

/// An active subscription; `cancel()` ends it (idempotent).
public final class NatsSubscription: @unchecked Sendable {
    final class HandlerBox: @unchecked Sendable {
        let handler: @Sendable (NatsMessage) -> Void
        init(_ h: @escaping @Sendable (NatsMessage) -> Void) { self.handler = h }
    }

    /// nats.c's subscription, as an address (nats.c is thread-safe); 0 once cancelled.
    private let sub: Mutex<UInt>

    init(_ sub: OpaquePointer) { self.sub = Mutex(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(sub)))) }

    public func cancel() {
        let address = self.sub.withLock { p -> UInt in defer { p = 0 }; return p }
        guard address != 0, let s = OpaquePointer(bitPattern: address) else { return }
        _ = natsSubscription_Unsubscribe(s)
        natsSubscription_Destroy(s)
    }

    deinit { self.cancel() }
}
