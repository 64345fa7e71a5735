import Synchronization

extension RuntimeMonitor {
    /// A level-triggered wake-up for the probe loop: `signal()` before `wait()` is remembered, so a request
    /// that arrives while the loop is busy is not lost; many signals before a wait count as one.
    final class Wakeup: Sendable {
        private struct State {
            var pending = false
            var waiter: CheckedContinuation<Void, Never>?
        }

        private let state = Mutex(State())

        func signal() {
            let waiter = self.state.withLock { s -> CheckedContinuation<Void, Never>? in
                guard let waiter = s.waiter else {
                    s.pending = true
                    return nil
                }
                s.waiter = nil
                return waiter
            }
            waiter?.resume()
        }

        /// Returns at the next signal (at once if one is pending), or when the task is cancelled.
        func wait() async {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let resumeNow = self.state.withLock { s -> Bool in
                        if s.pending || Task.isCancelled {
                            s.pending = false
                            return true
                        }
                        s.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let waiter = self.state.withLock { s -> CheckedContinuation<Void, Never>? in
                    defer { s.waiter = nil }
                    return s.waiter
                }
                waiter?.resume()
            }
        }
    }
}
