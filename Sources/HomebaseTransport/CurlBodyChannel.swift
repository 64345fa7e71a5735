import Synchronization

/// Carries a streamed response from the loop thread to its consumer: the head once, then the body, bounded.
///
/// The loop thread `offer`s each piece libcurl delivers. While fewer than `highWaterBytes` are waiting it
/// accepts the piece; otherwise it answers `.full` and the transfer pauses (CURL_WRITEFUNC_PAUSE) until the
/// consumer takes the waiting bytes, so at most `highWaterBytes` plus one libcurl piece (CURL_MAX_WRITE_SIZE,
/// 16 KiB, more only after decompression) is ever buffered. The consumer takes everything waiting at once.
///
/// A waiting consumer is woken by `flush`, which the loop calls once per pass, not by each offer: libcurl
/// hands over one piece per HTTP chunk, and a pass that reads several would otherwise wake the consumer for
/// the first and leave the rest for a second wake-up.
final class CurlBodyChannel: Sendable {
    enum Offer: Equatable {
        case accepted
        /// Buffer full: pause the transfer and resume it when `take` says so.
        case full
        /// Nobody will read: abort the transfer.
        case consumerGone
    }

    /// What `take` found.
    enum Take {
        /// Bytes, and whether the producer was paused and must now be resumed.
        case bytes([UInt8], resumeProducer: Bool)
        case end
        case failed(Error)
        case wait
    }

    private enum HeadState {
        case pending(CheckedContinuation<HTTPClientResponseHead, Error>?)
        case received(HTTPClientResponseHead)
        case failed(HTTPClientError)
        case delivered
    }

    private struct State {
        var head = HeadState.pending(nil)
        var buffered: [UInt8] = []
        var producerPaused = false
        var consumerGone = false
        /// nil while the transfer runs; then `.success` or the error, reported after the buffered bytes.
        var end: Result<Void, HTTPClientError>?
        var endReported = false
        var waiter: CheckedContinuation<[UInt8]?, Error>?
    }

    let highWaterBytes: Int
    private let state = Mutex(State())

    init(highWaterBytes: Int) {
        self.highWaterBytes = highWaterBytes
    }

    // MARK: Head

    /// Registers the task awaiting the head; resumes it at once if the head (or failure) is already known.
    func waitForHead(_ continuation: CheckedContinuation<HTTPClientResponseHead, Error>) {
        let ready: Result<HTTPClientResponseHead, HTTPClientError>? = self.state.withLock { state in
            switch state.head {
            case .pending(nil):
                state.head = .pending(continuation)
                return nil
            case .received(let head):
                state.head = .delivered
                return .success(head)
            case .failed(let error):
                state.head = .delivered
                return .failure(error)
            case .pending(.some), .delivered:
                preconditionFailure("CurlBodyChannel head awaited twice")
            }
        }
        if let ready {
            continuation.resume(with: ready.mapError { $0 as Error })
        }
    }

    /// Loop thread: the final head is complete.
    func headReceived(_ head: HTTPClientResponseHead) {
        self.resolveHead(.success(head))
    }

    private func resolveHead(_ result: Result<HTTPClientResponseHead, HTTPClientError>) {
        let waiter: CheckedContinuation<HTTPClientResponseHead, Error>? = self.state.withLock { state in
            guard case .pending(let continuation) = state.head else { return nil }
            switch (result, continuation) {
            case (_, .some):
                state.head = .delivered
            case (.success(let head), nil):
                state.head = .received(head)
            case (.failure(let error), nil):
                state.head = .failed(error)
            }
            return continuation
        }
        waiter?.resume(with: result.mapError { $0 as Error })
    }

    // MARK: Body, producer side (loop thread)

    func offer(_ bytes: UnsafeRawBufferPointer) -> Offer {
        self.state.withLock { state in
            if state.consumerGone {
                return .consumerGone
            }
            if state.buffered.count >= self.highWaterBytes {
                state.producerPaused = true
                return .full
            }
            state.buffered.append(contentsOf: bytes)
            return .accepted
        }
    }

    /// Loop thread, after a pass: hands what was offered to a waiting consumer. Returns whether the producer
    /// was paused (buffer full) and must now be resumed.
    func flush() -> Bool {
        let (bytes, waiter, resume): ([UInt8], CheckedContinuation<[UInt8]?, Error>?, Bool) = self.state.withLock { state in
            guard let waiter = state.waiter, !state.buffered.isEmpty else { return ([], nil, false) }
            state.waiter = nil
            let bytes = state.buffered
            state.buffered = []
            let resume = state.producerPaused
            state.producerPaused = false
            return (bytes, waiter, resume)
        }
        waiter?.resume(returning: bytes)
        return resume
    }

    /// The transfer ended: `nil` for success. A head still awaited fails with `error`.
    func finish(error: HTTPClientError?) {
        if let error {
            self.resolveHead(.failure(error))
        }
        let (waiter, bytes): (CheckedContinuation<[UInt8]?, Error>?, [UInt8]?) = self.state.withLock { state in
            guard state.end == nil else { return (nil, nil) }
            state.end = error.map { .failure($0) } ?? .success(())
            guard let waiter = state.waiter else { return (nil, nil) }
            state.waiter = nil
            if !state.buffered.isEmpty {
                // The last bytes first; the end is reported to the next take.
                let bytes = state.buffered
                state.buffered = []
                return (waiter, bytes)
            }
            state.endReported = true
            return (waiter, nil)
        }
        if let bytes {
            waiter?.resume(returning: bytes)
        } else if let error {
            waiter?.resume(throwing: error)
        } else {
            waiter?.resume(returning: nil)
        }
    }

    // MARK: Body, consumer side

    /// Takes everything buffered, or the end, or registers `continuation` to be resumed by the producer.
    /// Returns whether the producer must be resumed; `continuation` has been resumed or stored either way.
    func take(_ continuation: CheckedContinuation<[UInt8]?, Error>) -> Bool {
        let (take, resumeProducer): (Take, Bool) = self.state.withLock { state in
            if state.consumerGone {
                return (.failed(HTTPClientError.cancelled), false)
            }
            if !state.buffered.isEmpty {
                let bytes = state.buffered
                state.buffered = []
                let resume = state.producerPaused
                state.producerPaused = false
                return (.bytes(bytes, resumeProducer: resume), resume)
            }
            switch state.end {
            case nil:
                precondition(state.waiter == nil, "one consumer at a time")
                state.waiter = continuation
                return (.wait, false)
            case _ where state.endReported:
                return (.end, false)
            case .success:
                state.endReported = true
                return (.end, false)
            case .failure(let error):
                state.endReported = true
                return (.failed(error), false)
            }
        }
        switch take {
        case .bytes(let bytes, _):
            continuation.resume(returning: bytes)
        case .end:
            continuation.resume(returning: nil)
        case .failed(let error):
            continuation.resume(throwing: error)
        case .wait:
            break
        }
        return resumeProducer
    }

    /// The consumer is gone (task cancelled or stream dropped): drop the buffer, fail a pending `take`.
    func consumerGone() {
        let waiter: CheckedContinuation<[UInt8]?, Error>? = self.state.withLock { state in
            state.consumerGone = true
            state.buffered = []
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }
        waiter?.resume(throwing: HTTPClientError.cancelled)
    }
}
