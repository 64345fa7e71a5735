import Foundation
import HomebaseCore
import HomebaseTransport

/// Turns one backend's SSE events into `ChatEngineEvent`s. Pure: the transport feeds it parsed events, so
/// every wire shape is testable without a socket.
protocol ChatStreamDecoder: Sendable {
    /// Whether the backend's terminator arrived (`[DONE]`, `message_stop`); the transport stops reading then.
    var isComplete: Bool { get }
    /// The events one SSE event completes.
    mutating func decode(_ event: SSEEvent) throws(ChatEngineError) -> [ChatEngineEvent]
    /// The body ended: the last events, or `midStream` when the answer was cut short.
    mutating func endOfStream() throws(ChatEngineError) -> [ChatEngineEvent]
}

/// The HTTP half shared by the chat engines: sends a streamed request, maps status codes and transport
/// failures to `ChatEngineError`, and pumps the SSE body through a decoder.
///
/// Cancellation: the returned stream's producer is one task; ending or dropping the stream cancels it, and
/// cancelling the task aborts the curl transfer at once (HTTPClient's contract), so the server sees the
/// connection close within milliseconds.
enum HTTPChatTransport {
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

    /// As `events`, one element per body piece read (`ChatEngine.batches`).
    static func batches<D: ChatStreamDecoder>(
        http: HTTPClient, request: HTTPRequest, decoder: D
    ) -> AsyncThrowingStream<[ChatEngineEvent], any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do throws(ChatEngineError) {
                    try await Self.pump(http: http, request: request, decoder: decoder) { continuation.yield($0) }
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
        var decoder = decoder
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
        var parser = SSEParser()
        // Paced reading starts once text flows: the first token is never held.
        let pacing = request.bodyPacing
        var pacingStarted = false
        do {
            for try await piece in body {
                var batch: [ChatEngineEvent] = []
                do {
                    for event in try parser.append(piece) {
                        batch += try decoder.decode(event)
                        if decoder.isComplete { break }
                    }
                } catch {
                    // What arrived before the failure (text streamed before an error event) is still output.
                    if !batch.isEmpty { yield(batch) }
                    throw error
                }
                if !pacingStarted, let pacing, batch.contains(where: { if case .text = $0 { true } else { false } }) {
                    pacing.start()
                    pacingStarted = true
                }
                if decoder.isComplete {
                    // Before the consumer hears it is done and lets go: the transport may then read the
                    // response's last bytes instead of closing the connection.
                    pacing?.finish()
                }
                if !batch.isEmpty { yield(batch) }
                if decoder.isComplete { return }
            }
        } catch let error as ChatEngineError {
            throw error
        } catch is SSEParser.Error {
            throw .malformed("an event exceeded \(parser.maxEventBytes) bytes")
        } catch {
            throw Self.mapAfterHead(error)
        }
        if Task.isCancelled { throw .cancelled }
        let last = try decoder.endOfStream()
        if !last.isEmpty { yield(last) }
    }

    /// Reads a whole (small) body for a non-streamed call; status is the caller's business.
    static func send(http: HTTPClient, request: HTTPRequest) async throws(ChatEngineError) -> HTTPResponse {
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
    static func errorMessage(_ bytes: [UInt8], status: Int) -> String {
        if let object = JSONText.object(bytes), let message = JSONText.errorMessage(object["error"]) {
            return message
        }
        let text = String(decoding: bytes.prefix(200), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "HTTP \(status)" : text
    }

    private static func collect(_ body: AsyncThrowingStream<[UInt8], Error>, limit: Int) async -> [UInt8] {
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

/// Small JSON helpers over JSONSerialization: the engines read loosely typed chunks and must reject wrong
/// types without trapping.
enum JSONText {
    static func object(_ bytes: [UInt8]) -> [String: Any]? {
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

    static func bytes(_ value: [String: Any]) -> [UInt8] {
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
