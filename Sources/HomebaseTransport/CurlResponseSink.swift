import Synchronization

/// Hands the result of a buffered transfer from the loop thread to the task awaiting `send(_:)`, exactly once.
final class CurlResponseSink: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<HTTPResponse, Error>)
        case completed(Result<HTTPResponse, HTTPClientError>)
        case delivered
    }

    private let state = Mutex(State.idle)

    /// Registers the awaiting task; resumes it at once if the result is already there.
    func wait(_ continuation: CheckedContinuation<HTTPResponse, Error>) {
        let ready: Result<HTTPResponse, HTTPClientError>? = self.state.withLock { state in
            switch state {
            case .idle:
                state = .waiting(continuation)
                return nil
            case .completed(let result):
                state = .delivered
                return result
            case .waiting, .delivered:
                preconditionFailure("CurlResponseSink awaited twice")
            }
        }
        if let ready {
            continuation.resume(with: ready.mapError { $0 as Error })
        }
    }

    /// Delivers the result; later calls are ignored.
    func complete(_ result: Result<HTTPResponse, HTTPClientError>) {
        let waiter: CheckedContinuation<HTTPResponse, Error>? = self.state.withLock { state in
            switch state {
            case .idle:
                state = .completed(result)
                return nil
            case .waiting(let continuation):
                state = .delivered
                return continuation
            case .completed, .delivered:
                return nil
            }
        }
        waiter?.resume(with: result.mapError { $0 as Error })
    }
}
