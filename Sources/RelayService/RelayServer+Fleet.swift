import HomebaseCore
import RelayFleet

/// Forwarding across the edges of a fleet (`FleetEdge`); loop-confined like the rest of `RelayServer`.
extension RelayServer {
    /// A live frame for a key no connection of this edge holds: to the edge that holds it, or RECEIPT 2 at once
    /// when none does. Held while a STORE this sender sent before it is not committed yet.
    func forwardToFleet(from sender: RelayConnection, sendID: UInt32, recipient: PublicKey,
                        payload: ArraySlice<UInt8>)
    {
        // Bounded like the connection's outbound queue: a sender whose STOREs stall (JetStream electing a leader)
        // cannot pile live frames up without end. Refused as not delivered, which a client sends again.
        switch sender.fleetOrder.order.live((sendID, recipient, Array(payload)), bytes: payload.count) {
        case .sendNow:
            self.sendToFleet(from: sender, sendID: sendID, recipient: recipient, payload: payload)
        case .held:
            break
        case .refused:
            self.metrics.dropped(.fleetHeldFull)
            self.receipt(to: sender, sendID: sendID, .recipientOffline)
        }
    }

    private func sendToFleet(from sender: RelayConnection, sendID: UInt32, recipient: PublicKey,
                             payload: ArraySlice<UInt8>)
    {
        guard let fleet = self.fleet, let senderKey = sender.key else { return }
        let senderID = sender.tcp.id
        let count = payload.count
        // No receipt wanted (send_id 0): no status byte either, half the messages on the bus.
        if sendID == 0 {
            fleet.forwardLive(to: recipient, sender: senderKey, payload: payload)
            self.metrics.framesForwarded += 1
            self.metrics.bytesForwarded += count
            return
        }
        fleet.forwardLive(to: recipient, sender: senderKey, payload: payload) { [weak self] delivered in
            guard let self else { return }
            self.loop.execute {
                if delivered {
                    self.metrics.framesForwarded += 1
                    self.metrics.bytesForwarded += count
                } else {
                    self.metrics.dropped(.recipientOffline)
                }
                guard let s = self.connections[senderID] else { return }
                self.receipt(to: s, sendID: sendID, delivered ? .delivered : .recipientOffline)
            }
        }
    }

    /// One STORE of `sender` is committed (or refused): live frames it held behind the STOREs done so far go.
    func storeCompleted(for sender: RelayConnection) {
        guard let senderKey = sender.key else { return }  // held frames exist only after a login
        for h in sender.fleetOrder.order.storeCompleted() {
            if let t = self.presence.session(for: h.recipient) {
                // The recipient logged in here meanwhile.
                let delivered = t.isWebSocket && t.readySent && self.deliverLive(to: t, sender: senderKey,
                                                                                   payload: h.payload[...])
                self.receipt(to: sender, sendID: h.sendID, delivered ? .delivered : .recipientOffline)
            } else {
                self.sendToFleet(from: sender, sendID: h.sendID, recipient: h.recipient, payload: h.payload[...])
            }
        }
    }

    /// A message from another edge about `key`, which this edge holds (or held).
    func fleetReceived(_ message: FleetMessage, for key: PublicKey, reply: String?) {
        guard let fleet = self.fleet else { return }
        let t = self.presence.session(for: key)
        switch message {
        case .live(let sender, let payload):
            guard let t, t.isWebSocket, t.readySent else { return fleet.reply(reply, .notDelivered) }
            let ok = self.deliverLive(to: t, sender: sender, payload: payload)
            fleet.reply(reply, ok ? .delivered : .notDelivered)
        case .stored(let deliveryID):
            guard let t, t.isWebSocket else { return fleet.reply(reply, .notDelivered) }
            // Live frames arriving after this notice wait until the stored frame is delivered, as they would
            // behind a STORE made on this edge.
            t.order.storeAnnounced(deliveryID: deliveryID)
            self.drain(t)
            fleet.reply(reply, .delivered)
        case .claim(let claim):
            switch fleet.verdict(on: claim, for: key) {
            case .yield:
                if let t, let action = t.session?.replaced() {
                    fleet.release(key, connection: t.tcp.id)
                    t.perform(action)
                }
                // The new login's READY waits for this: no frame reaches the old login after it.
                fleet.reply(reply, .delivered)
            case .reassert:
                fleet.reply(reply, .notDelivered)
                fleet.reassert(key)
            case .ignore:
                break
            }
        }
    }
}
