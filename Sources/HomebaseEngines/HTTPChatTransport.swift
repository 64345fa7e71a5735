import Foundation
import HomebaseCore
import HomebaseTransport
import Synchronization

/// Turns one backend's SSE events into `ChatEngineEvent`s. Pure: the transport feeds it parsed events, so
/// every wire shape is testable without a socket.
package protocol ChatStreamDecoder: Sendable {
    /// Whether the backend's terminator arrived (`[DONE]`, `message_stop`); the transport stops reading then.
    var isComplete: Bool { get }
    /// The events one SSE event completes.
    mutating func decode(_ event: SSEEvent) throws(ChatEngineError) -> [ChatEngineEvent]
    /// The body ended: the last events, or `midStream` when the answer was cut short.
    mutating func endOfStream() throws(ChatEngineError) -> [ChatEngineEvent]
    /// `decode` of an event with no name and this data (`SSEParser.takeSimpleEvents`), appending its events
    /// to `events`: a decoder may read the bytes in place instead of as a String. Same result as `decode`.
    mutating func decodeData(_ data: UnsafeBufferPointer<UInt8>, into events: inout [ChatEngineEvent])
        throws(ChatEngineError)
}

extension ChatStreamDecoder {
    package mutating func decodeData(_ data: UnsafeBufferPointer<UInt8>, into events: inout [ChatEngineEvent])
        throws(ChatEngineError)
    {
        events += try self.decode(SSEEvent(event: nil, data: String(decoding: data, as: UTF8.self)))
    }
}

/// The HTTP half shared by the chat engines: sends a streamed request, maps status codes and transport
/// failures to `ChatEngineError`, and pumps the SSE body through a decoder.
///
/// Cancellation: the pulled stream's producer is one task; ending or dropping the stream cancels it, and
/// cancelling the task aborts the curl transfer at once (HTTPClient's contract), so the server sees the
/// connection close within milliseconds. The pushed path (`push`) aborts through its handle the same way.
package enum HTTPChatTransport {
    /// Largest error body read to find the backend's message; the rest is not needed.
    static let maxErrorBodyBytes = 64 * 1024

    static func events<D: ChatStreamDecoder>(
        http: HTTPClient, request: HTTPRequest, decoder: D
    ) -> AsyncThrowingStream<ChatEngineEvent, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do throws(ChatEngineError) {
                    try await Self.pump(http: http, request: request, decoder: decoder) { batch in
                        for event in batch { continuation.yield(event) }
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Sends the request and decodes the body; `yield` gets the events of each piece read, never empty.
    static func pump<D: ChatStreamDecoder>(
        http: HTTPClient, request: HTTPRequest, decoder: D, yield: ([ChatEngineEvent]) -> Void
    ) async throws(ChatEngineError) {
        let head: HTTPClientResponseHead
        let body: AsyncThrowingStream<[UInt8], Error>
        do {
            (head, body) = try await http.stream(request)
        } catch {
            throw Self.mapBeforeHead(error)
        }
        guard (200..<300).contains(head.status) else {
            let bytes = await Self.collect(body, limit: Self.maxErrorBodyBytes)
            throw .http(status: head.status, message: Self.errorMessage(bytes, status: head.status))
        }
        var assembler = ChatStreamAssembler(decoder: decoder, pacing: request.bodyPacing)
        do {
            for try await piece in body {
                let read = assembler.read(piece)
                if !read.events.isEmpty { yield(read.events) }
                if let failure = read.failure { throw failure }
                if read.isComplete { return }
            }
        } catch let error as ChatEngineError {
            throw error
        } catch {
            throw Self.mapAfterHead(error)
        }
        if Task.isCancelled { throw .cancelled }
        let last = try assembler.endOfStream()
        if !last.isEmpty { yield(last) }
    }

    /// Sends the request and pushes the decoded events of each read to `sink` on the HTTP client's loop
    /// thread (`HTTPClient.stream(_:handler:)`): no task per read. Same outcomes as `pump`.
    static func push<D: ChatStreamDecoder>(
        http: HTTPClient, request: HTTPRequest, decoder: D, sink: any ChatEventSink
    ) -> ChatStreamHandle {
        let handler = PushedChatStream(decoder: decoder, pacing: request.bodyPacing, sink: sink)
        let transfer = http.stream(request, handler: handler)
        handler.attach(transfer)
        return ChatStreamHandle { transfer.cancel() }
    }

    /// Reads a whole (small) body for a non-streamed call; status is the caller's business.
    package static func send(http: HTTPClient, request: HTTPRequest) async throws(ChatEngineError) -> HTTPResponse {
        do {
            return try await http.send(request)
        } catch {
            throw Self.mapBeforeHead(error)
        }
    }

    static func mapBeforeHead(_ error: any Error) -> ChatEngineError {
        switch error as? HTTPClientError {
        case .connectFailed(let message)?: return .connectFailed(message)
        case .timedOut?: return .timedOut
        case .cancelled?: return .cancelled
        case .responseTooLarge?: return .malformed("response too large")
        case .invalidRequest(let message)?: return .connectFailed("invalid request: \(message)")
        case .transport(_, let message)?: return .connectFailed(message)
        case nil: return Task.isCancelled ? .cancelled : .connectFailed("\(error)")
        }
    }

    static func mapAfterHead(_ error: any Error) -> ChatEngineError {
        switch error as? HTTPClientError {
        case .timedOut?: return .timedOut
        case .cancelled?: return .cancelled
        case .transport(_, let message)?: return .midStream("connection lost: \(message)")
        case .some(let other): return .midStream("\(other)")
        case nil: return Task.isCancelled ? .cancelled : .midStream("\(error)")
        }
    }

    /// The backend's own words for an error status: OpenAI/Anthropic `{"error":{"message":…}}`, Ollama
    /// native `{"error":"…"}`, else the start of the body, else `HTTP <status>`.
    package static func errorMessage(_ bytes: [UInt8], status: Int) -> String {
        if let object = JSONText.object(bytes), let message = JSONText.errorMessage(object["error"]) {
            return message
        }
        let text = String(decoding: bytes.prefix(200), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "HTTP \(status)" : text
    }

    static func collect(_ body: AsyncThrowingStream<[UInt8], Error>, limit: Int) async -> [UInt8] {
        var bytes: [UInt8] = []
        do {
            for try await piece in body {
                bytes += piece
                if bytes.count >= limit { break }
            }
        } catch {
            // Whatever arrived is enough to look for a message.
        }
        return Array(bytes.prefix(limit))
    }
}

/// The body half of a streamed chat answer, shared by the pulled (`pump`) and pushed (`push`) paths: SSE
/// parsing, the backend's decoder, and read pacing (started once text flows, so the first token is never
/// held; finished when the terminator arrives, so the transport reads the response's last bytes and keeps
/// the connection). Pure apart from telling the pacing object.
package struct ChatStreamAssembler<D: ChatStreamDecoder> {
    /// What one piece of body gave.
    package struct Read {
        /// The events completed, in order; delivered even when `failure` is set (text before an error).
        package var events: [ChatEngineEvent] = []
        /// The answer failed; nothing more will be read.
        package var failure: ChatEngineError?
        /// The terminator arrived: the answer is whole.
        package var isComplete = false
    }

    private var decoder: D
    private var parser: SSEParser
    private let pacing: HTTPBodyPacing?
    private var pacingStarted = false

    /// - Parameter maxEventBytes: the SSE parser's bound on one event (tests lower it).
    package init(decoder: D, pacing: HTTPBodyPacing?, maxEventBytes: Int = 1024 * 1024) {
        self.decoder = decoder
        self.parser = SSEParser(maxEventBytes: maxEventBytes)
        self.pacing = pacing
    }

    package mutating func read(_ piece: [UInt8]) -> Read {
        var read = Read()
        self.read(piece, into: &read)
        return read
    }

    /// `read(_:)` into `read`, whose last outcome is cleared first: a caller reading many pieces keeps one
    /// `Read`, and its events array's capacity, instead of growing a new array per read.
    // Specialized for the decoder every runtime read goes through: `PushedChatStream` is a generic class reached
    // through a protocol, so without this each read ran the generic code (metadata lookups, value witnesses).
    @_specialize(exported: false, where D == OpenAIStreamDecoder)
    mutating func read(_ piece: [UInt8], into read: inout Read) {
        read.events.removeAll(keepingCapacity: true)
        read.failure = nil
        read.isComplete = false
        piece.withUnsafeBufferPointer { self.read($0, into: &read) }
        if read.failure != nil { return }
        if !self.pacingStarted, let pacing = self.pacing,
            read.events.contains(where: {
                switch $0 {
                case .text, .reasoning: true
                default: false
                }
            })
        {
            pacing.start()
            self.pacingStarted = true
        }
        if self.decoder.isComplete {
            // Before the consumer hears it is done and lets go: the transport may then read the response's
            // last bytes instead of closing the connection.
            self.pacing?.finish()
            read.isComplete = true
        }
    }

    /// The events of one read, and its failure. Most of a model's stream is events of one `data:` line, which
    /// the parser's fast lane hands to the decoder in place; the rest of the read goes through the parser.
    /// The outcome is the parser's alone would give: it reads the whole piece before decoding any of it, so a
    /// framing error there wins over whatever the lane decoded (the lane's events are then dropped), and
    /// after the terminator nothing more is decoded.
    private mutating func read(_ bytes: UnsafeBufferPointer<UInt8>, into read: inout Read) {
        var consumed = 0
        var laneFailure: ChatEngineError?
        if !self.decoder.isComplete {
            consumed = self.parser.takeSimpleEvents(bytes) { data -> Bool in
                do throws(ChatEngineError) {
                    try self.decoder.decodeData(data, into: &read.events)
                } catch {
                    laneFailure = error
                    return false
                }
                return !self.decoder.isComplete
            }
        }
        let events: [SSEEvent]
        do {
            events = try self.parser.append(UnsafeBufferPointer(rebasing: bytes[consumed...]))
        } catch {
            read.events = []
            read.failure = .malformed("an event exceeded \(self.parser.maxEventBytes) bytes")
            return
        }
        if let laneFailure {
            read.failure = laneFailure
            return
        }
        for event in events {
            if self.decoder.isComplete { break }
            do throws(ChatEngineError) {
                read.events += try self.decoder.decode(event)
            } catch {
                read.failure = error
                return
            }
        }
    }

    /// The body ended before the terminator: the decoder's last events, or why the answer is cut short.
    package mutating func endOfStream() throws(ChatEngineError) -> [ChatEngineEvent] {
        try self.decoder.endOfStream()
    }
}

/// `HTTPChatTransport.push`'s handler: status check, error body, assembler, then the sink.
///
/// `@unchecked Sendable`: `phase`, `assembler` and `lastRead` are touched only by the HTTP client's loop thread, whose
/// calls for one transfer never overlap; the transfer handle, set by the starting thread, is behind a lock.
private final class PushedChatStream<D: ChatStreamDecoder>: HTTPStreamHandler, @unchecked Sendable {
    private enum Phase {
        case awaitingHead
        case streaming
        /// An error status: its body is read (at most `maxErrorBodyBytes`) for the backend's message.
        case errorBody(status: Int, bytes: [UInt8])
        case ended
    }

    private let sink: any ChatEventSink
    private var phase = Phase.awaitingHead
    private var assembler: ChatStreamAssembler<D>
    /// The last read, whose events array takes the next read's events: one allocation per answer, where a
    /// fresh array per read grew a few times each (a paced read brings a dozen tokens).
    private var lastRead = ChatStreamAssembler<D>.Read()
    /// The transfer once `push` has it, and whether to let it go as soon as it does.
    private let transfer = Mutex<(handle: HTTPStreamHandle?, release: Bool)>((nil, false))

    init(decoder: D, pacing: HTTPBodyPacing?, sink: any ChatEventSink) {
        self.sink = sink
        self.assembler = ChatStreamAssembler(decoder: decoder, pacing: pacing)
    }

    func attach(_ handle: HTTPStreamHandle) {
        let release = self.transfer.withLock { t -> Bool in
            if !t.release { t.handle = handle }
            return t.release
        }
        if release { handle.cancel() }
    }

    /// The answer is settled: let the transfer go (a finished paced body is still read to its end, so the
    /// connection stays reusable; anything else is aborted), and the handle with it: it holds the transfer,
    /// which holds this handler.
    private func release() {
        let handle = self.transfer.withLock { t -> HTTPStreamHandle? in
            t.release = true
            defer { t.handle = nil }
            return t.handle
        }
        handle?.cancel()
    }

    private func finish(_ error: (any Error)?) {
        self.phase = .ended
        self.sink.ended(error)
    }

    func head(_ head: HTTPClientResponseHead) {
        guard case .awaitingHead = self.phase else { return }
        self.phase = (200..<300).contains(head.status) ? .streaming : .errorBody(status: head.status, bytes: [])
    }

    @_specialize(exported: false, where D == OpenAIStreamDecoder)  // see `ChatStreamAssembler.read`
    func body(_ bytes: [UInt8]) {
        switch self.phase {
        case .streaming:
            // Unique here unless a sink kept the last events (then this read's events take new storage).
            if self.lastRead.events.capacity == 0 { self.lastRead.events.reserveCapacity(16) }
            self.assembler.read(bytes, into: &self.lastRead)
            let read = self.lastRead
            if !read.events.isEmpty { self.sink.events(read.events) }
            if let failure = read.failure {
                self.finish(failure)
                self.release()
            } else if read.isComplete {
                self.finish(nil)
                self.release()
            }
        case .errorBody(let status, var collected):
            collected += bytes.prefix(HTTPChatTransport.maxErrorBodyBytes - collected.count)
            if collected.count >= HTTPChatTransport.maxErrorBodyBytes {
                self.finish(ChatEngineError.http(status: status, message: HTTPChatTransport.errorMessage(collected, status: status)))
                self.release()
            } else {
                self.phase = .errorBody(status: status, bytes: collected)
            }
        case .awaitingHead, .ended:
            break
        }
    }

    func end(_ error: HTTPClientError?) {
        // The transfer is over: its handle (which holds it, and so this handler) is not needed any more.
        self.transfer.withLock { t in
            t.release = true
            t.handle = nil
        }
        switch self.phase {
        case .ended:
            break
        case .awaitingHead:
            self.finish(HTTPChatTransport.mapBeforeHead(error ?? .transport(code: 8, message: "no response head")))
        case .errorBody(let status, let collected):
            self.finish(ChatEngineError.http(status: status, message: HTTPChatTransport.errorMessage(collected, status: status)))
        case .streaming:
            if let error {
                self.finish(HTTPChatTransport.mapAfterHead(error))
                return
            }
            do {
                let last = try self.assembler.endOfStream()
                if !last.isEmpty { self.sink.events(last) }
                self.finish(nil)
            } catch {
                self.finish(error)
            }
        }
    }
}

/// Small JSON helpers over JSONSerialization: the engines read loosely typed chunks and must reject wrong
/// types without trapping.
package enum JSONText {
    package static func object(_ bytes: [UInt8]) -> [String: Any]? {
        guard !bytes.isEmpty else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
    }

    static func object(_ text: String) -> [String: Any]? { self.object(Array(text.utf8)) }

    /// Compact JSON text of a JSONSerialization value (keys sorted, so output is deterministic).
    static func serialize(_ value: Any) -> String? {
        guard JSONSerialization.isValidJSONObject(value),
            let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    package static func bytes(_ value: [String: Any]) -> [UInt8] {
        Array((self.serialize(value) ?? "{}").utf8)
    }

    /// `{"message":…}` or a bare string, as error bodies carry them.
    static func errorMessage(_ value: Any?) -> String? {
        if let string = value as? String { return string }
        if let object = value as? [String: Any] {
            if let message = object["message"] as? String { return message }
            if let type = object["type"] as? String { return type }
        }
        return nil
    }

    /// An integer field that must be an integer when present: `nil` when missing or null, throws when another type.
    static func int(_ value: Any?, _ field: String) throws(ChatEngineError) -> Int? {
        guard let value, !(value is NSNull) else { return nil }
        if let int = value as? Int { return int }
        throw .malformed("\(field) is not an integer")
    }

    /// A string field: `nil` when missing or null, throws when another type.
    static func string(_ value: Any?, _ field: String) throws(ChatEngineError) -> String? {
        guard let value, !(value is NSNull) else { return nil }
        guard let string = value as? String else { throw .malformed("\(field) is not a string") }
        return string
    }

    /// An object field: `nil` when missing or null, throws when another type.
    static func dict(_ value: Any?, _ field: String) throws(ChatEngineError) -> [String: Any]? {
        guard let value, !(value is NSNull) else { return nil }
        guard let object = value as? [String: Any] else { throw .malformed("\(field) is not an object") }
        return object
    }

    /// An array field: `nil` when missing or null, throws when another type.
    static func array(_ value: Any?, _ field: String) throws(ChatEngineError) -> [Any]? {
        guard let value, !(value is NSNull) else { return nil }
        guard let array = value as? [Any] else { throw .malformed("\(field) is not an array") }
        return array
    }
}
