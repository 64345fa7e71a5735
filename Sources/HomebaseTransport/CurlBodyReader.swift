/// The consumer's end of a streamed body; aborts the transfer when it goes away.
final class CurlBodyReader: Sendable {
    private let loop: CurlMultiLoop
    private let transfer: CurlTransfer
    private let channel: CurlBodyChannel

    init(loop: CurlMultiLoop, transfer: CurlTransfer, channel: CurlBodyChannel) {
        self.loop = loop
        self.transfer = transfer
        self.channel = channel
    }

    deinit {
        self.channel.consumerGone()
        self.loop.cancel(self.transfer)
    }

    func next() async throws -> [UInt8]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if self.channel.take(continuation) {
                    self.loop.resume(self.transfer)
                }
            }
        } onCancel: {
            self.channel.consumerGone()
            self.loop.cancel(self.transfer)
        }
    }
}
