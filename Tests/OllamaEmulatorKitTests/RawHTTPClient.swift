import Foundation
import HomebaseCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A minimal blocking HTTP/1.1 client for tests: one request per connection (`Connection: close`), reads
/// until EOF or a deadline, and de-chunks the body.
struct RawHTTPClient {
    struct Response {
        var head: HTTPResponseHead
        /// De-chunked body.
        var body: [UInt8]
        /// True when a chunked body ended with its last chunk (false: the connection was cut).
        var complete: Bool
        var text: String { String(decoding: self.body, as: UTF8.self) }
    }

    let port: UInt16

    /// Sends `method path` with an optional JSON body and extra headers; reads for at most `timeoutMs`.
    func send(
        _ method: String, _ path: String, body: String? = nil, headers: [String] = [], timeoutMs: Int = 10_000
    ) throws -> Response {
        let raw = try self.exchange(
            method, path, body: body, headers: headers, timeoutMs: timeoutMs)
        var parser = HTTPResponseHeadParser()
        parser.append(raw)
        guard let head = try parser.next() else { throw ClientError.noResponse(String(decoding: raw, as: UTF8.self)) }
        let rest = parser.takeBuffered()
        if head.isChunked {
            var decoder = HTTPChunkedDecoder(maxBodyBytes: 64 << 20)
            decoder.append(rest)
            var body: [UInt8] = []
            var complete = false
            while let event = try decoder.next() {
                if case .data(let d) = event { body += d } else { complete = true }
            }
            return Response(head: head, body: body, complete: complete)
        }
        return Response(head: head, body: rest, complete: rest.count == (head.contentLength ?? rest.count))
    }

    /// The raw bytes of the whole exchange until EOF or the deadline.
    func exchange(
        _ method: String, _ path: String, body: String?, headers: [String], timeoutMs: Int
    ) throws -> [UInt8] {
        var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for h in headers { request += h + "\r\n" }
        if let body { request += "Content-Length: \(body.utf8.count)\r\n" }
        request += "\r\n" + (body ?? "")
        return try self.raw(Array(request.utf8), timeoutMs: timeoutMs)
    }

    /// Writes `bytes` on a new connection and reads until EOF or `timeoutMs`.
    func raw(_ bytes: [UInt8], timeoutMs: Int = 10_000) throws -> [UInt8] {
        #if os(Linux)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw ClientError.socket }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = self.port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard ok == 0 else { throw ClientError.socket }
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, 0) }
            guard n > 0 else { throw ClientError.socket }
            sent += n
        }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = ContinuousClock.now + .milliseconds(timeoutMs)
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            if left <= .zero { break }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
            if poll(&pfd, 1, ms) <= 0 { break }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return out
    }

    enum ClientError: Error {
        case socket
        case noResponse(String)
    }
}
