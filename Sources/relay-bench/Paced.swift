import Dispatch
import Foundation
import HomebaseCore
import HomebaseCrypto
import HomebaseTransport
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

// MARK: paced (issue 27: the light-load regime)

/// One sender paced at `--rate` frames a second, one frame at a time (each waits for its slot; a late slot is not
/// made up with a burst), and one receiver counting what arrives: the regime of phones and Homebases that send a
/// frame and then wait, where every frame is its own wake-up of the server. The server's CPU comes from
/// schedstat (all its threads, to the nanosecond) around the window.
///
/// `--protocol relay` (ours, or the Python reference): SEND to the receiver's key, DELIVER counted.
/// `--protocol mqtt`: MQTT 3.1.1 over WebSocket (subprotocol `mqtt`, e.g. mosquitto): the receiver subscribes to
/// a topic, the sender PUBLISHes at QoS 0 to it; the same payload size and the same pacing.
func paced(_ config: Config) throws {
    let rate = max(1, config.int("rate", 20_000))
    let seconds = max(1, config.int("seconds", 3))
    let payloadSize = config.int("payload", 256)
    let mqtt = config.options["protocol"] == "mqtt"
    let interval = 1_000_000_000 / UInt64(rate)

    let sender: WebSocketClient
    let receiver: WebSocketClient
    let frame: [UInt8]
    if mqtt {
        receiver = try MQTT.connect(config.url, clientID: "bench-rx")
        try MQTT.subscribe(receiver, topic: "bench/b")
        sender = try MQTT.connect(config.url, clientID: "bench-tx")
        frame = MQTT.publish(topic: "bench/b", payload: Array(repeating: 0xA5, count: payloadSize))
    } else {
        let rk = SigningSecretKey.generate()
        receiver = try login(config.url, rk)
        sender = try login(config.url, .generate())
        frame = RelayFrame.send(sendID: 0, recipient: rk.publicKey, flags: 0,
                                payload: Array(repeating: 0xA5, count: payloadSize)[...]).encoded()
    }
    // A warm-up second, unmeasured: the server's buffers and the first-time costs settle.
    let sent = Atomic<Int>(0)
    let delivered = Atomic<Int>(0)
    let senderDone = Atomic<Bool>(false)
    let measuring = Atomic<Bool>(false)
    let errors = Mutex<[String]>([])
    let window = Mutex<(cpu0: UInt64?, t0: UInt64, sent0: Int, delivered0: Int)>((nil, 0, 0, 0))
    let result = Mutex<(cpu1: UInt64?, t1: UInt64, sent1: Int, delivered1: Int)>((nil, 0, 0, 0))
    let pid = config.serverPID
    let handoff = Handoff((sender, receiver))
    runThreads([
        {
            let ws = handoff.value.0
            let start = nowNanoseconds()
            let warmEnd = start + 1_000_000_000
            let end = warmEnd + UInt64(seconds) * 1_000_000_000
            var next = start
            var n = 0
            do {
                while true {
                    var now = nowNanoseconds()
                    if now >= end { break }
                    if !measuring.load(ordering: .relaxed), now >= warmEnd {
                        window.withLock { $0 = (pid.flatMap(cpuNanoseconds), now, n, delivered.load(ordering: .acquiring)) }
                        measuring.store(true, ordering: .releasing)
                    }
                    // Wait for the slot: sleep most of a long wait, spin the rest (a VM's sleeps overshoot).
                    while now < next {
                        if next - now > 200_000 { usleep(UInt32((next - now - 100_000) / 1000)) }
                        now = nowNanoseconds()
                    }
                    try ws.send(binary: frame)
                    n += 1
                    sent.store(n, ordering: .releasing)
                    next = max(next + interval, now)  // late: no burst to catch up
                }
                let t1 = nowNanoseconds()
                // The window closes here, at the sender's end: frames still in flight are counted by the receiver
                // (a few at most) but their CPU is not, which understates CPU per frame by a few parts in 100k.
                result.withLock { $0 = (pid.flatMap(cpuNanoseconds), t1, n, delivered.load(ordering: .acquiring)) }
            } catch {
                errors.withLock { $0.append("sender: \(error)") }
            }
            senderDone.store(true, ordering: .releasing)
        },
        {
            let ws = handoff.value.1
            var n = 0
            var stream: [UInt8] = []
            do {
                while !(senderDone.load(ordering: .acquiring) && n >= sent.load(ordering: .acquiring)) {
                    guard let m = try ws.receive(timeout: .milliseconds(500)) else {
                        if senderDone.load(ordering: .acquiring) { break }
                        continue
                    }
                    if mqtt {
                        stream += m.payload
                        n += MQTT.countPublishes(in: &stream)
                    } else if m.payload.first == 0x11, m.payload.count == 41 + payloadSize {
                        n += 1
                    }
                    delivered.store(n, ordering: .releasing)
                }
            } catch {
                errors.withLock { $0.append("receiver: \(error)") }
            }
        },
    ])
    let w = window.withLock { $0 }
    let r = result.withLock { $0 }
    let frames = r.delivered1 - w.delivered0
    let elapsed = Double(r.t1 - w.t0) / 1e9
    var out: [String: Any] = [
        "mode": "paced", "protocol": mqtt ? "mqtt" : "relay", "rate": rate, "payload": payloadSize,
        "sent": r.sent1 - w.sent0, "delivered": frames, "seconds": elapsed,
        // The whole run's, warm-up included: what a syscall count taken over the whole run divides by.
        "delivered_total": delivered.load(ordering: .relaxed),
        "frames_per_second": Double(frames) / max(elapsed, 1e-9), "lost": sent.load(ordering: .relaxed)
            - delivered.load(ordering: .relaxed), "errors": errors.withLock { $0 },
    ]
    if let c0 = w.cpu0, let c1 = r.cpu1, frames > 0 {
        out["server_cpu_us_per_frame"] = Double(c1 - c0) / 1000 / Double(frames)
        out["server_cpu_utilisation"] = Double(c1 - c0) / 1e9 / elapsed
    }
    emit(out)
    sender.close()
    receiver.close()
}

/// CPU time of every thread of `pid` in nanoseconds (the first field of each task's schedstat).
func cpuNanoseconds(_ pid: Int32) -> UInt64? {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
    var total: UInt64 = 0
    for task in tasks {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8),
              let first = text.split(separator: " ").first, let ns = UInt64(first) else { continue }
        total += ns
    }
    return total
}

/// Just enough MQTT 3.1.1 (OASIS standard, §3) for the benchmark: CONNECT/CONNACK, SUBSCRIBE/SUBACK and QoS 0
/// PUBLISH, over a WebSocket with subprotocol `mqtt` (§6).
enum MQTT {
    static func connect(_ url: String, clientID: String) throws -> WebSocketClient {
        var o = WebSocketClient.Options(subprotocol: "mqtt")
        o.connectTimeout = .seconds(10)
        let ws = try WebSocketClient.connect(url, options: o)
        var body: [UInt8] = [0, 4] + Array("MQTT".utf8) + [4, 0x02, 0, 60]  // level 4, clean session, keepalive 60 s
        body += Self.string(clientID)
        try ws.send(binary: [0x10] + Self.remainingLength(body.count) + body)
        guard let m = try ws.receive(timeout: .seconds(10)), m.payload.count >= 4, m.payload[0] == 0x20,
              m.payload[3] == 0 else { throw BenchError("no CONNACK accepting \(clientID)") }
        return ws
    }

    static func subscribe(_ ws: WebSocketClient, topic: String) throws {
        let body: [UInt8] = [0, 1] + Self.string(topic) + [0]  // packet id 1, QoS 0
        try ws.send(binary: [0x82] + Self.remainingLength(body.count) + body)
        guard let m = try ws.receive(timeout: .seconds(10)), m.payload.first == 0x90 else {
            throw BenchError("no SUBACK for \(topic)")
        }
    }

    static func publish(topic: String, payload: [UInt8]) -> [UInt8] {
        let body = Self.string(topic) + payload
        return [0x30] + Self.remainingLength(body.count) + body
    }

    /// Counts the complete PUBLISH packets at the front of `stream` and removes every complete packet.
    static func countPublishes(in stream: inout [UInt8]) -> Int {
        var count = 0
        var offset = 0
        while offset + 2 <= stream.count {
            var length = 0
            var multiplier = 1
            var index = offset + 1
            var complete = false
            while index < stream.count && index < offset + 5 {
                let byte = Int(stream[index])
                length += (byte & 0x7F) * multiplier
                multiplier *= 128
                index += 1
                if byte & 0x80 == 0 { complete = true; break }
            }
            guard complete, index + length <= stream.count else { break }
            if stream[offset] & 0xF0 == 0x30 { count += 1 }
            offset = index + length
        }
        stream.removeFirst(offset)
        return count
    }

    private static func string(_ s: String) -> [UInt8] {
        let bytes = Array(s.utf8)
        return [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
    }

    private static func remainingLength(_ n: Int) -> [UInt8] {
        var out: [UInt8] = []
        var x = n
        repeat {
            var byte = UInt8(x % 128)
            x /= 128
            if x > 0 { byte |= 0x80 }
            out.append(byte)
        } while x > 0
        return out
    }
}
