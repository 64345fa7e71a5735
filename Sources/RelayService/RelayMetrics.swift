import HomebaseCore
import HomebaseTransport
#if canImport(Glibc)
import Glibc
#endif

/// The relay's counters and gauges. Loop-confined (only the event loop touches them), so no locking on the
/// hot path; `/metrics` is rendered on the loop too.
final class RelayMetrics {
    /// Why a frame was not forwarded; the `reason` label of `relay_frames_dropped_total`.
    enum DropReason: String, CaseIterable {
        case recipientOffline = "recipient_offline"
        /// The recipient's outbound queue was over its bound.
        case recipientSlow = "recipient_slow"
        case mailboxFull = "mailbox_full"
        case payloadTooLarge = "payload_too_large"
        case rateLimited = "rate_limited"
        case badFlags = "bad_flags"
        case storeError = "store_error"
        /// A fleet edge's live frame held behind its sender's uncommitted STOREs past the held bound.
        case fleetHeldFull = "fleet_held_full"

        /// The reason of a SEND the session machine refused (`RelaySessionStateMachine.Action.refuse`); nil for a
        /// status that refuses nothing.
        init?(refused status: ReceiptStatus) {
            switch status {
            case .payloadTooLarge: self = .payloadTooLarge
            case .rateLimited: self = .rateLimited
            case .badFlags: self = .badFlags
            case .mailboxFull: self = .mailboxFull
            case .recipientOffline: self = .recipientOffline
            case .delivered, .stored, .unknown: return nil
            }
        }
    }

    var connectionsAccepted = 0
    var connectionsRefused = 0
    var httpRequests = 0
    var framesReceived = 0
    var framesForwarded = 0
    var bytesForwarded = 0
    var framesStored = 0
    var storedDelivered = 0
    var storedAcknowledged = 0
    var framesExpired = 0
    /// Times a connection was read more slowly because it sent faster than twice its SEND limits.
    var pacedReads = 0
    /// Times a connection had more messages waiting than one turn handles, and let the others go first.
    var turnsYielded = 0
    var drops: [DropReason: Int] = [:]
    var authFailures: [String: Int] = [:]
    var closes: [String: Int] = [:]
    var mailboxDepth: (frames: Int, bytes: Int, mailboxes: Int) = (0, 0, 0)

    func dropped(_ reason: DropReason) { self.drops[reason, default: 0] += 1 }

    /// The soft descriptor limit now (the relay raises it to the hard limit at start).
    static var maxDescriptors: Int {
        var limit = rlimit()
        return getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Int(clamping: limit.rlim_cur) : 0
    }

    func render(pendingAuth: Int, authenticated: Int, websocket: Int) -> String {
        var p = PrometheusText()
        p.add("relay_connections", .gauge, help: "Open WebSocket connections by state.",
              labels: [("state", "pending_auth")], value: pendingAuth)
        p.add("relay_connections", .gauge, help: "", labels: [("state", "authenticated")], value: authenticated)
        p.add("relay_connections_total", .counter, help: "TCP connections accepted.", value: self.connectionsAccepted)
        p.add("relay_connections_refused_total", .counter, help: "Upgrades refused at a connection limit (503).",
              value: self.connectionsRefused)
        p.add("relay_http_requests_total", .counter, help: "Plain HTTP requests served.", value: self.httpRequests)
        p.add("relay_frames_received_total", .counter, help: "Relay frames received from clients.",
              value: self.framesReceived)
        p.add("relay_frames_forwarded_total", .counter, help: "DELIVER frames written to recipients.",
              value: self.framesForwarded)
        p.add("relay_bytes_forwarded_total", .counter, help: "Payload bytes written to recipients.",
              value: self.bytesForwarded)
        p.add("relay_frames_stored_total", .counter, help: "STORE frames written durably.", value: self.framesStored)
        p.add("relay_stored_delivered_total", .counter, help: "Stored frames delivered (including redeliveries).",
              value: self.storedDelivered)
        p.add("relay_frames_expired_total", .counter, help: "Stored frames deleted unacknowledged at their lifetime.",
              value: self.framesExpired)
        p.add("relay_paced_reads_total", .counter,
              help: "Times a connection sending over twice its SEND limits was read more slowly.", value: self.pacedReads)
        p.add("relay_turns_yielded_total", .counter,
              help: "Times a connection had more messages waiting than one loop turn handles.", value: self.turnsYielded)
        for reason in DropReason.allCases {
            p.add("relay_frames_dropped_total", .counter, help: "SEND frames not forwarded, by reason.",
                  labels: [("reason", reason.rawValue)], value: self.drops[reason, default: 0])
        }
        for reason in ["bad_signature", "not_admitted", "auth_timeout", "bad_token"] {
            p.add("relay_auth_failures_total", .counter, help: "Failed logins, by reason.",
                  labels: [("reason", reason)], value: self.authFailures[reason, default: 0])
        }
        for (reason, n) in self.closes.sorted(by: { $0.key < $1.key }) {
            p.add("relay_closes_total", .counter, help: "Connections closed by the relay, by reason.",
                  labels: [("reason", reason)], value: n)
        }
        p.add("relay_mailbox_frames", .gauge, help: "Stored frames awaiting acknowledgement.",
              value: self.mailboxDepth.frames)
        p.add("relay_mailbox_bytes", .gauge, help: "Payload bytes of stored frames.", value: self.mailboxDepth.bytes)
        p.add("relay_mailboxes", .gauge, help: "Recipients with at least one stored frame.",
              value: self.mailboxDepth.mailboxes)
        _ = websocket
        if let resident = Posix.residentMemoryBytes {
            p.add("process_resident_memory_bytes", .gauge, help: "Resident memory size in bytes.", value: resident)
        }
        p.add("process_max_fds", .gauge, help: "Maximum number of open file descriptors.", value: Self.maxDescriptors)
        return p.output
    }
}
