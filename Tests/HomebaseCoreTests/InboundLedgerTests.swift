import HomebaseCore
import Testing

/// `InboundLedger`: a stored frame whose message changes the receiver's state is acknowledged only after the
/// handler settled it, and a redelivery after a crash is handed on again or dropped by what its record says.
struct InboundLedgerTests {
    static let guest = PublicKey(bytes: [UInt8](repeating: 7, count: 32))!

    static func key(_ n: UInt8) -> InboundLedger.Key {
        InboundLedger.Key(sender: Self.guest, messageID: [UInt8](repeating: n, count: 16))
    }

    /// The order the daemon needs: hand on, then (after the handler) mark settled, then ACK. The old order
    /// (ACK with the hand-on) lost a join to a kill -9 before the daemon recorded it.
    @Test func aSettledTypeIsAcknowledgedOnlyAfterItsHandlerSettledIt() {
        var ledger = InboundLedger()
        let received = ledger.received(Self.key(1), deliveryID: 41, record: .fresh, awaitsSettlement: true)
        #expect(received == [.handOn])
        #expect(!received.contains(.ack(deliveryID: 41)))
        #expect(ledger.waitingCount == 1)
        #expect(ledger.handled(Self.key(1), durable: true) == [.markSettled, .ack(deliveryID: 41)])
        #expect(ledger.waitingCount == 0)
    }

    @Test func otherMessagesAreAcknowledgedAsTheyAreHandedOn() {
        var ledger = InboundLedger()
        #expect(ledger.received(Self.key(1), deliveryID: 5, record: .fresh, awaitsSettlement: false)
                == [.handOn, .ack(deliveryID: 5)])
        #expect(ledger.received(Self.key(1), deliveryID: 6, record: .settled, awaitsSettlement: false)
                == [.dropReplay, .ack(deliveryID: 6)])
        // A live frame has nothing to acknowledge.
        #expect(ledger.received(Self.key(2), deliveryID: 0, record: .fresh, awaitsSettlement: false) == [.handOn])
        #expect(ledger.waitingCount == 0)
    }

    /// kill -9 after the effect was committed and the id marked settled, before the ACK went: the relay delivers
    /// it again, and it is a replay, acknowledged at once.
    @Test func aRedeliveryOfASettledMessageIsDroppedAndAcknowledged() {
        var ledger = InboundLedger()
        #expect(ledger.received(Self.key(1), deliveryID: 41, record: .settled, awaitsSettlement: true)
                == [.dropReplay, .ack(deliveryID: 41)])
        #expect(ledger.waitingCount == 0)
    }

    /// kill -9 after the id was recorded, before the effect: the redelivery is handed on again (not refused as a
    /// replay), and acknowledged once handled.
    @Test func aRedeliveryOfAnUnsettledMessageIsHandedOnAgain() {
        var restarted = InboundLedger()
        #expect(restarted.received(Self.key(1), deliveryID: 41, record: .unsettled, awaitsSettlement: true)
                == [.handOn])
        #expect(restarted.handled(Self.key(1), durable: true) == [.markSettled, .ack(deliveryID: 41)])
    }

    @Test func aFailedHandlerLeavesTheFrameUnacknowledged() {
        var ledger = InboundLedger()
        _ = ledger.received(Self.key(1), deliveryID: 41, record: .fresh, awaitsSettlement: true)
        #expect(ledger.handled(Self.key(1), durable: false) == [])
        #expect(ledger.waitingCount == 0)
        // The next connection delivers it again; its record is still unsettled.
        #expect(ledger.received(Self.key(1), deliveryID: 41, record: .unsettled, awaitsSettlement: true)
                == [.handOn])
    }

    @Test func aSecondDeliveryWhileTheHandlerRunsIsNotHandedOnTwice() {
        var ledger = InboundLedger()
        #expect(ledger.received(Self.key(1), deliveryID: 41, record: .fresh, awaitsSettlement: true) == [.handOn])
        // A reconnect meanwhile: the relay delivers it again, same frame.
        #expect(ledger.received(Self.key(1), deliveryID: 41, record: .unsettled, awaitsSettlement: true) == [])
        // A copy of it stored twice (a resend with the same id): both frames go once it is settled.
        #expect(ledger.received(Self.key(1), deliveryID: 42, record: .unsettled, awaitsSettlement: true) == [])
        #expect(ledger.handled(Self.key(1), durable: true)
                == [.markSettled, .ack(deliveryID: 41), .ack(deliveryID: 42)])
    }

    @Test func aLiveSettledMessageIsMarkedButHasNoFrameToAcknowledge() {
        var ledger = InboundLedger()
        #expect(ledger.received(Self.key(1), deliveryID: 0, record: .fresh, awaitsSettlement: true) == [.handOn])
        #expect(ledger.handled(Self.key(1), durable: true) == [.markSettled])
    }

    /// A handler that never answers (its message lost in a full stream) cannot grow the ledger: the oldest goes,
    /// and its frame, unacknowledged, comes again on the next connection.
    @Test func theLedgerIsBounded() {
        var ledger = InboundLedger(capacity: 4)
        for n in 0..<4 { _ = ledger.received(Self.key(UInt8(n)), deliveryID: UInt64(n + 1), record: .fresh,
                                             awaitsSettlement: true) }
        #expect(ledger.received(Self.key(9), deliveryID: 10, record: .fresh, awaitsSettlement: true) == [.handOn])
        #expect(ledger.waitingCount == 4)
        // Key 0 was evicted: settling it marks the id but has no frame to acknowledge.
        #expect(ledger.handled(Self.key(0), durable: true) == [.markSettled])
        #expect(ledger.handled(Self.key(1), durable: true) == [.markSettled, .ack(deliveryID: 2)])
        // Many more through a ledger whose head never settles: it stays within its bound.
        for n in 0..<10_000 {
            let key = InboundLedger.Key(sender: Self.guest, messageID: withUnsafeBytes(of: n) { Array($0) })
            _ = ledger.received(key, deliveryID: UInt64(100 + n), record: .fresh, awaitsSettlement: true)
            _ = ledger.handled(key, durable: true)
        }
        #expect(ledger.waitingCount == 3)
        #expect(ledger.handled(Self.key(2), durable: true) == [.markSettled, .ack(deliveryID: 3)])
    }
}
