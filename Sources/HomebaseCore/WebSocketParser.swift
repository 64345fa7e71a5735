/// Incremental RFC 6455 frame parser: bytes in, whole messages and control frames out. Pure (no I/O).
///
/// Modelled on SwiftNIO's `WSParser` (style.md §3): `append(_:)` buffers what the socket read, and `next()` steps
/// a `DecoderState` machine until it has an event or needs more bytes. A short read is never an error: `next()`
/// returns `nil` and the caller appends more. Every rule the peer can break is checked as early as the bytes allow
/// and reported as a `WebSocketProtocolError`, whose `closeCode` goes in the close frame:
/// - the declared length is checked against `maxMessageBytes` (counting fragments already held) as soon as the
///   length field is complete, before any of that frame's payload is waited for;
/// - control frames may arrive between the fragments of a message (§5.4) and are returned at once;
/// - after a close event, or after an error, the parser is finished: later bytes are discarded, `next()` returns
///   `nil` after a close and throws the same error again after an error.
///
/// Memory: `bufferedByteCount` is what the parser holds (unparsed bytes plus fragments of the message in
/// progress); the connection bounds its reads with it. Consumed bytes are dropped on the next `append` (or moved
/// out when they are at least half the buffer), so many small frames cost O(n) in total, and
/// `takeIdleStorage()` hands the storage of an idle connection out (to free it, or to lend it to another).
public struct WebSocketParser: Sendable {
    /// Which side of the connection this parser reads for.
    public enum Role: Sendable {
        /// Reads frames from a client, which must mask every frame (§5.1).
        case server
        /// Reads frames from a server, which must never mask (§5.1).
        case client
    }

    private typealias MaskingKey = (UInt8, UInt8, UInt8, UInt8)

    private struct FrameHeader: Sendable {
        var fin: Bool
        var opcode: WebSocketOpcode
        var maskingKey: MaskingKey?
        var payloadLength: Int
    }

    /// Where parsing stands; every place a partial read can stop has a name.
    private enum DecoderState: Sendable {
        /// Waiting for a complete frame header (2 to 14 bytes) at `readIndex`.
        case awaitingHeader
        /// The header was valid and consumed; waiting for all `payloadLength` bytes at `readIndex`.
        case awaitingPayload(FrameHeader)
        /// A close frame was returned; nothing more is parsed.
        case closed
        /// The peer broke the protocol; `next()` throws this again.
        case failed(WebSocketProtocolError)
    }

    /// Consumed storage of at most this many bytes is kept for reuse; a larger one is freed when it empties.
    private static let retainedCapacityBytes = 64 * 1024
    /// Compact (move the unread tail to the front) only once at least this many consumed bytes lead the buffer.
    private static let compactionThresholdBytes = 4 * 1024

    /// The side this parser reads for.
    public let role: Role
    /// Largest text or binary message accepted, after joining fragments. Over it: `messageTooBig` (close 1009).
    /// A message is buffered whole, so this is the per-connection memory a peer can make us hold.
    public let maxMessageBytes: Int
    /// Largest control-frame payload accepted; RFC 6455 allows 125. Over it: `controlFrameTooLarge` (close 1002).
    public let maxControlPayload: Int

    private var state: DecoderState = .awaitingHeader
    /// Bytes from `append`; `buffer[readIndex...]` is not yet parsed.
    private var buffer: [UInt8] = []
    private var readIndex = 0
    /// The opcode (text or binary) of the fragmented message in progress, if any.
    private var fragmentOpcode: WebSocketOpcode?
    /// Unmasked payload of the fragments received so far of that message.
    private var fragments: [UInt8] = []

    /// - Parameters:
    ///   - role: `.server` requires masked frames, `.client` requires unmasked ones.
    ///   - maxMessageBytes: largest message after reassembly (protocol-v1: a relay frame, 256 KiB payload plus
    ///     its header).
    ///   - maxControlPayload: largest ping/pong/close payload; at most 125.
    public init(role: Role, maxMessageBytes: Int, maxControlPayload: Int = 125) {
        precondition(maxMessageBytes >= 0, "maxMessageBytes must not be negative")
        precondition((0...125).contains(maxControlPayload), "control payloads are limited to 125 bytes (§5.5)")
        self.role = role
        self.maxMessageBytes = maxMessageBytes
        self.maxControlPayload = maxControlPayload
    }

    /// Bytes the parser holds: unparsed input plus the fragments of an unfinished message.
    public var bufferedByteCount: Int {
        self.buffer.count - self.readIndex + self.fragments.count
    }

    /// Bytes in the input storage, consumed ones included; for tests of the compaction policy.
    var storageByteCount: Int { self.buffer.count }
    /// Capacity of the input and fragment storage; for tests of `takeIdleStorage()`.
    var storageCapacity: Int { self.buffer.capacity + self.fragments.capacity }

    /// Buffers bytes read from the connection. Call `next()` until it returns `nil` before reading more, so that
    /// an oversized or invalid frame is refused before its payload is read.
    ///
    /// Bytes given after a close event or an error are discarded.
    public mutating func append<C: Collection<UInt8>>(_ bytes: C) {
        switch self.state {
        case .closed, .failed:
            return
        case .awaitingHeader, .awaitingPayload:
            break
        }
        if self.readIndex == self.buffer.count {
            self.buffer.removeAll(keepingCapacity: self.buffer.capacity <= Self.retainedCapacityBytes)
            self.readIndex = 0
        } else if self.readIndex >= Self.compactionThresholdBytes, self.readIndex >= self.buffer.count - self.readIndex
        {
            // Moving the tail costs at most what was consumed since the last move: O(1) amortised per byte.
            self.buffer.removeSubrange(0..<self.readIndex)
            self.readIndex = 0
        }
        self.buffer.append(contentsOf: bytes)
    }

    /// Whether the parser has input storage (it allocates some on `append` otherwise).
    public var holdsStorage: Bool { self.buffer.capacity > 0 }

    /// Hands out the input storage, emptied but keeping its capacity, when nothing is buffered; nil when bytes
    /// are held or there is no storage. A server reading many connections lends it to the next one that reads
    /// (`adoptStorage`) rather than freeing it here and allocating it there, once per read.
    public mutating func takeIdleStorage() -> [UInt8]? {
        guard self.bufferedByteCount == 0, self.buffer.capacity > 0 else { return nil }
        var storage: [UInt8] = []
        swap(&storage, &self.buffer)
        self.readIndex = 0
        self.fragments = []
        storage.removeAll(keepingCapacity: true)
        return storage
    }

    /// Takes `storage` as the input storage when the parser has none (`storage` is then left empty); its
    /// contents are dropped.
    public mutating func adoptStorage(_ storage: inout [UInt8]) {
        guard self.buffer.capacity == 0, self.readIndex == 0 else { return }
        swap(&self.buffer, &storage)
        self.buffer.removeAll(keepingCapacity: true)
    }

    /// Returns the next message or control frame, or `nil` when more bytes are needed (or after a close).
    ///
    /// - Throws: `WebSocketProtocolError` when the peer broke RFC 6455; send a close frame with its `closeCode`
    ///   and close. The parser stays failed: later calls throw the same error.
    public mutating func next() throws(WebSocketProtocolError) -> WebSocketEvent? {
        do {
            return try self.parse()
        } catch {
            self.state = .failed(error)
            self.buffer = []
            self.readIndex = 0
            self.fragments = []
            self.fragmentOpcode = nil
            throw error
        }
    }

    private mutating func parse() throws(WebSocketProtocolError) -> WebSocketEvent? {
        while true {
            switch self.state {
            case .failed(let error):
                throw error
            case .closed:
                self.buffer = []
                self.readIndex = 0
                return nil
            case .awaitingHeader:
                guard let header = try self.parseHeader() else { return nil }
                self.state = .awaitingPayload(header)
            case .awaitingPayload(let header):
                guard self.buffer.count - self.readIndex >= header.payloadLength else { return nil }
                let payload = self.readIndex..<(self.readIndex + header.payloadLength)
                self.readIndex = payload.upperBound
                self.state = .awaitingHeader
                if let key = header.maskingKey {
                    WebSocketMasking.apply(key: key, to: &self.buffer, range: payload)
                }
                if let event = try self.frameReceived(header, payload: payload) {
                    return event
                }
            }
        }
    }

    /// Parses and consumes the header at `readIndex`, or returns `nil` (consuming nothing) if it is incomplete.
    private mutating func parseHeader() throws(WebSocketProtocolError) -> FrameHeader? {
        let available = self.buffer.count - self.readIndex
        guard available >= 2 else { return nil }
        let first = self.buffer[self.readIndex]
        let second = self.buffer[self.readIndex + 1]

        // Everything decidable from the first two bytes is decided before waiting for more.
        guard first & 0x70 == 0 else { throw .reservedBitsSet }
        guard let opcode = WebSocketOpcode(rawValue: first & 0x0F) else { throw .unknownOpcode(first & 0x0F) }
        let fin = first & 0x80 != 0
        let masked = second & 0x80 != 0
        switch self.role {
        case .server: guard masked else { throw .unmaskedFrameFromClient }
        case .client: guard !masked else { throw .maskedFrameFromServer }
        }
        let shortLength = Int(second & 0x7F)
        switch opcode {
        case .close, .ping, .pong:
            guard fin else { throw .fragmentedControlFrame }
            // 126 and 127 announce an extended length, which is over 125 too.
            guard shortLength <= self.maxControlPayload else { throw .controlFrameTooLarge }
        case .continuation:
            guard self.fragmentOpcode != nil else { throw .unexpectedContinuation }
        case .text, .binary:
            guard self.fragmentOpcode == nil else { throw .expectedContinuation }
        }

        // Non-minimal length encodings (§5.2 "MUST") are tolerated: they cost nothing and harm nothing.
        var cursor = self.readIndex + 2
        let length: UInt64
        switch shortLength {
        case 126:
            guard available >= 4 else { return nil }
            length = UInt64(self.buffer[cursor]) << 8 | UInt64(self.buffer[cursor + 1])
            cursor += 2
        case 127:
            guard available >= 10 else { return nil }
            var value: UInt64 = 0
            for i in 0..<8 {
                value = value << 8 | UInt64(self.buffer[cursor + i])
            }
            guard value & (1 << 63) == 0 else { throw .invalidLength }
            length = value
            cursor += 8
        default:
            length = UInt64(shortLength)
        }
        if !opcode.isControl {
            // Checked before any payload is awaited; fragments held count against the same limit.
            let room = self.maxMessageBytes - self.fragments.count
            guard length <= UInt64(room) else { throw .messageTooBig }
        }

        var maskingKey: MaskingKey?
        if masked {
            guard self.buffer.count - cursor >= 4 else { return nil }
            maskingKey = (
                self.buffer[cursor], self.buffer[cursor + 1], self.buffer[cursor + 2], self.buffer[cursor + 3]
            )
            cursor += 4
        }
        self.readIndex = cursor
        // `length` is at most `maxMessageBytes` or 125 here, so it fits in an Int.
        return FrameHeader(fin: fin, opcode: opcode, maskingKey: maskingKey, payloadLength: Int(length))
    }

    /// Handles a complete, unmasked frame; returns an event, or `nil` for a fragment that does not finish its message.
    private mutating func frameReceived(
        _ header: FrameHeader,
        payload: Range<Int>
    ) throws(WebSocketProtocolError) -> WebSocketEvent? {
        switch header.opcode {
        case .ping:
            return .ping(Array(self.buffer[payload]))
        case .pong:
            return .pong(Array(self.buffer[payload]))
        case .close:
            let event = try self.closeEvent(payload: payload)
            self.state = .closed
            return event
        case .text, .binary:
            if header.fin {
                if header.opcode == .text, !WebSocketUTF8.isValid(self.buffer, range: payload) {
                    throw .invalidUTF8
                }
                return .message(opcode: header.opcode, payload: self.buffer[payload])
            }
            self.fragmentOpcode = header.opcode
            self.fragments.append(contentsOf: self.buffer[payload])
            return nil
        case .continuation:
            self.fragments.append(contentsOf: self.buffer[payload])
            guard header.fin, let opcode = self.fragmentOpcode else { return nil }
            var message: [UInt8] = []
            swap(&message, &self.fragments)
            self.fragmentOpcode = nil
            if opcode == .text, !WebSocketUTF8.isValid(message, range: message.indices) {
                throw .invalidUTF8
            }
            return .message(opcode: opcode, payload: message[...])
        }
    }

    /// Decodes a close payload: empty, or `code u16 || UTF-8 reason` (§5.5.1).
    private func closeEvent(payload: Range<Int>) throws(WebSocketProtocolError) -> WebSocketEvent {
        guard !payload.isEmpty else { return .close(code: nil, reason: "") }
        guard payload.count >= 2 else { throw .invalidClosePayload }
        let code = UInt16(self.buffer[payload.lowerBound]) << 8 | UInt16(self.buffer[payload.lowerBound + 1])
        guard WebSocketCloseCode.isValidReceived(code) else { throw .invalidCloseCode(code) }
        let reason = (payload.lowerBound + 2)..<payload.upperBound
        guard WebSocketUTF8.isValid(self.buffer, range: reason) else { throw .invalidUTF8 }
        return .close(code: code, reason: String(decoding: self.buffer[reason], as: UTF8.self))
    }
}
