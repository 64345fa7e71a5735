import HomebaseCore
import HomebaseNode
import Synchronization
import Testing
@testable import HomebaseRouter

@Suite(.timeLimit(.minutes(1))) struct InferenceResponseRouterTests {
    @Test func nonInferenceMessagesGoToTheNodeAndUnknownAnswersAreDropped() async throws {
        let hub = LoopbackMessengerHub()
        let client = hub.messenger(for: RelayRig.clientKey) { _ in .sibling }
        let host = hub.messenger(for: RelayRig.hostKey) { _ in .sibling }
        let seen = Mutex<[String]>([])
        let responses = InferenceResponseRouter(messenger: client) { inbound in
            seen.withLock { $0.append(inbound.message.type) }
        }
        defer { responses.stop() }
        host.send(.inferChunk(InferChunk(id: "nobody", seq: 0, text: "x")), to: client.publicKey,
                  channel: .sibling, store: false)
        host.send(.advertRequest, to: client.publicKey, channel: .sibling, store: false)
        host.send(.roster(SignedBlob(payload: [1], signature: [2])), to: client.publicKey, channel: .sibling,
                  store: false)
        // The two are handled inline, inside `send`; the answer goes through `inbound` to the consumer task.
        #expect(seen.withLock { $0 } == [MessageType.advertRequest, MessageType.roster])
        #expect(await eventually { responses.droppedFrames == 1 })
    }

    @Test func answersOnTheWrongChannelAreDropped() async throws {
        let hub = LoopbackMessengerHub()
        let client = hub.messenger(for: RelayRig.clientKey) { _ in SenderRelation(isSibling: true, isContact: true) }
        let host = hub.messenger(for: RelayRig.hostKey) { _ in SenderRelation(isSibling: true, isContact: true) }
        let responses = InferenceResponseRouter(messenger: client)
        defer { responses.stop() }
        let (events, sink) = AsyncStream<RelayInferenceEvent>.makeStream()
        responses.register(id: "r1", host: RelayRig.hostKey, channel: .sibling, sink: sink)
        host.send(.inferAccept(InferAccept(id: "r1", model: "m")), to: client.publicKey, channel: .contact,
                  store: false)
        host.send(.inferAccept(InferAccept(id: "r1", model: "m")), to: client.publicKey, channel: .sibling,
                  store: false)
        var iterator = events.makeAsyncIterator()
        guard case .frame(.inferAccept(let accept)) = await iterator.next() else {
            Issue.record("expected the sync_delta accept")
            return
        }
        #expect(accept.id == "r1")
        #expect(responses.droppedFrames == 1)
    }

    @Test func aDisconnectReachesInFlightRequestsAndTheNode() async throws {
        let hub = LoopbackMessengerHub()
        let client = hub.messenger(for: RelayRig.clientKey) { _ in .sibling }
        let nodeEvents = Mutex<[MessengerEvent]>([])
        let responses = InferenceResponseRouter(messenger: client) { _ in } events: { event in
            nodeEvents.withLock { $0.append(event) }
        }
        defer { responses.stop() }
        let (events, sink) = AsyncStream<RelayInferenceEvent>.makeStream()
        responses.register(id: "r1", host: RelayRig.hostKey, channel: .sibling, sink: sink)
        // Let the router see the initial `.connected` before the disconnect.
        #expect(await eventually { nodeEvents.withLock { $0.count } == 1 })
        hub.disconnect(RelayRig.clientKey)
        var iterator = events.makeAsyncIterator()
        guard case .relayLost = await iterator.next() else {
            Issue.record("expected relayLost")
            return
        }
        #expect(await eventually { nodeEvents.withLock { $0.last } == .disconnected(closeCode: nil) })
    }

    /// A router its owner let go of without `stop()` is freed, and its tasks end: they held it strongly while
    /// waiting on the streams of the messenger it holds, so router, messenger and tasks lived on for good.
    @Test func aRouterDroppedWithoutStopIsFreed() async throws {
        let hub = LoopbackMessengerHub()
        let client = hub.messenger(for: RelayRig.clientKey) { _ in .sibling }
        weak var released: InferenceResponseRouter?
        do {
            let responses = InferenceResponseRouter(messenger: client)
            released = responses
            let (_, sink) = AsyncStream<RelayInferenceEvent>.makeStream()
            responses.register(id: "r1", host: RelayRig.hostKey, channel: .sibling, sink: sink)
        }
        // Freed, though not always at this very line: one of its tasks may be inside a handler at that moment,
        // holding it until the handler returns (seen under ThreadSanitizer in the full suite). A leak never frees it.
        #expect(await eventually { released == nil })
    }
}
