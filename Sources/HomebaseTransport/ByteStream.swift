#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a transport operation failed. Callers above (WebSocket client, HTTP) map these to their own
/// outcomes; none of them carries protocol meaning.
public enum TransportError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The TCP or TLS connection could not be set up (resolution, refusal, unreachable); the message
    /// says which step failed.
    case connectFailed(String)
    /// A deadline or timeout passed before the operation finished. The stream is still usable after a
    /// receive timeout; after a send timeout part of the bytes may have been sent, so close it.
    case timedOut
    /// The stream was closed locally (or by the peer, for a send); it cannot be used any more.
    case closed
    /// The TLS layer failed: handshake, certificate verification, or a TLS record error.
    case tls(String)
    /// A system call failed with this errno.
    case io(Int32)

    public var description: String {
        switch self {
        case .connectFailed(let reason): return "connect failed: \(reason)"
        case .timedOut: return "timed out"
        case .closed: return "closed"
        case .tls(let reason): return "TLS: \(reason)"
        case .io(let code): return "I/O error \(code): \(Posix.describe(errno: code))"
        }
    }
}

/// A blocking, connected client byte stream (plain TCP or TLS) for the WebSocket client.
///
/// Thread safety: not thread-safe. Use a stream from one thread at a time; `close()` too must not race
/// with a `send` or `receive` in progress on another thread.
public protocol ByteStream: AnyObject {
    /// Sends all of `bytes`, waiting with poll() while the socket buffer is full.
    /// - Throws: `.timedOut` once `deadline` passes (some bytes may have been sent), `.closed` after
    ///   `close()` or when the peer is gone, `.io` / `.tls` for other failures.
    func send(_ bytes: [UInt8], deadline: ContinuousClock.Instant?) throws(TransportError)

    /// Writes as much of `bytes` as the socket takes now, without waiting; returns how many bytes that was (0
    /// when the socket buffer is full). After a short write, retry with the rest of the same bytes, unchanged
    /// and at the same address (a TLS layer may hold a record it must finish with exactly those bytes).
    /// - Throws: `.closed` after `close()` or when the peer is gone, `.io` / `.tls` for other failures.
    func trySend(_ bytes: UnsafeRawBufferPointer) throws(TransportError) -> Int

    /// Returns between 1 and `maxBytes` bytes as soon as any are available, or an empty array when the
    /// peer closed the stream cleanly. `timeout` nil waits forever; `.zero` only takes what is ready.
    /// - Throws: `.timedOut` when nothing arrived in time (the stream stays usable), `.closed` after
    ///   `close()`, `.io` / `.tls` for failures such as a reset.
    func receive(maxBytes: Int, timeout: Duration?) throws(TransportError) -> [UInt8]

    /// Closes the stream. Idempotent; later calls to send/receive throw `.closed`.
    func close()

    /// The underlying socket, for callers that poll several streams; -1 once closed. For a TLS stream,
    /// poll only after `receive` timed out, because the TLS library may already hold decrypted bytes
    /// that poll() cannot see.
    var pollDescriptor: Int32 { get }

    /// Whether the stream may hold bytes already read from the socket (a TLS layer's decrypted records), so
    /// that an empty poll does not mean nothing can be received.
    var mayHoldReadBytes: Bool { get }
}

extension ByteStream {
    public var mayHoldReadBytes: Bool { false }

    /// `send(_:deadline:)` from `trySend`: writes what the socket takes, and waits with poll(2) for room.
    func sendAll(_ bytes: [UInt8], deadline: ContinuousClock.Instant?) throws(TransportError) {
        let deadlineNs = ContinuousClock.Instant.deadlineNs(deadline)
        var offset = 0
        while offset < bytes.count {
            let result = bytes.withUnsafeBytes { raw in
                Result { () throws(TransportError) -> Int in try self.trySend(UnsafeRawBufferPointer(rebasing: raw[offset...])) }
            }
            offset += try result.get()
            guard offset < bytes.count else { return }
            try self.waitForRoom(deadlineNs: deadlineNs)
        }
    }

    /// Waits with poll(2) until the socket takes bytes again.
    /// - Throws: `.timedOut` once `deadlineNs` (monotonic) passes; `.io` when poll fails.
    func waitForRoom(deadlineNs: UInt64?) throws(TransportError) {
        switch Posix.poll(self.pollDescriptor, events: Int16(POLLOUT), deadlineNs: deadlineNs) {
        case .failure(let error): throw error
        case .success(0): throw .timedOut
        case .success: return
        }
    }
}

extension Duration {
    /// Converts to a monotonic deadline in ns from now (nil stays nil = no deadline).
    static func deadlineNs(after timeout: Duration?) -> UInt64? {
        guard let timeout else { return nil }
        return Posix.monotonicNs &+ Posix.nanoseconds(timeout)
    }
}

extension ContinuousClock.Instant {
    /// Converts a ContinuousClock deadline to a monotonic ns deadline usable with `Posix.poll`.
    static func deadlineNs(_ deadline: ContinuousClock.Instant?) -> UInt64? {
        guard let deadline else { return nil }
        return Duration.deadlineNs(after: ContinuousClock.now.duration(to: deadline))
    }
}
