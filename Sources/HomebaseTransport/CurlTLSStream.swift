internal import CCurl
internal import CCurlShim

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TLS client byte stream: libcurl does TCP, TLS and certificate checks (CURLOPT_CONNECT_ONLY), and we
/// move raw bytes with curl_easy_send/recv, waiting with poll() on CURLINFO_ACTIVESOCKET
/// (platform-notes.md §3). The WebSocket client frames RFC 6455 on top.
///
/// Not thread-safe: use from one thread at a time (see `ByteStream`). The curl handle is freed by
/// `close()` or deinit.
public final class CurlTLSStream: ByteStream {
    /// libcurl's TLS layer reads whole records and may keep decrypted bytes poll(2) cannot see.
    public var mayHoldReadBytes: Bool { true }

    private var handle: UnsafeMutableRawPointer?
    private var socket: Int32 = -1
    /// CURLOPT_ERRORBUFFER: curl writes details here (e.g. which certificate check failed).
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// Where curl_easy_recv lands; only what arrived is copied out. Grows to the largest `maxBytes` asked.
    private var scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 0, alignment: 1)

    /// curl_global_init once per process; thread-safe since 7.84 and ref-counted, and the lazy static
    /// runs it exactly once in this module.
    private static let globalInit: Void = {
        _ = curl_global_init(Int(CURL_GLOBAL_ALL))
    }()

    private init(handle: UnsafeMutableRawPointer) {
        self.handle = handle
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        self.errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        if let handle = self.handle { curl_easy_cleanup(handle) }
        self.errorBuffer.deallocate()
        self.scratch.deallocate()
    }

    /// Connects and completes the TLS handshake to `url`'s host and port ("https://host:port/..."; the
    /// path is ignored, no HTTP request is sent).
    /// - Parameters:
    ///   - caFile: PEM file of trusted certificates; nil uses the system store.
    ///   - insecure: skips certificate and host name verification (test peers only).
    ///   - timeout: covers TCP connect and TLS handshake; nil uses libcurl's default (300 s).
    /// - Throws: `.tls` for handshake or verification failures, `.timedOut`, `.connectFailed` otherwise.
    public static func connect(url: String, caFile: String?, insecure: Bool, timeout: Duration?)
        throws(TransportError) -> CurlTLSStream
    {
        guard url.lowercased().hasPrefix("https://") else { throw .connectFailed("not an https URL: \(url)") }
        _ = CurlTLSStream.globalInit
        guard let handle = curl_easy_init() else { throw .connectFailed("curl_easy_init failed") }
        let stream = CurlTLSStream(handle: handle)
        try stream.check(ccurl_setopt_str(handle, CURLOPT_URL, url), "CURLOPT_URL")
        try stream.check(ccurl_setopt_long(handle, CURLOPT_CONNECT_ONLY, 1), "CURLOPT_CONNECT_ONLY")
        // No signal handlers: we may run on any thread, and the process ignores SIGPIPE itself.
        try stream.check(ccurl_setopt_long(handle, CURLOPT_NOSIGNAL, 1), "CURLOPT_NOSIGNAL")
        try stream.check(ccurl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, stream.errorBuffer), "CURLOPT_ERRORBUFFER")
        if let timeout {
            let ms = max(1, Int(Posix.milliseconds(roundingUp: timeout)))
            try stream.check(ccurl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, ms), "CURLOPT_CONNECTTIMEOUT_MS")
        }
        if let caFile {
            try stream.check(ccurl_setopt_str(handle, CURLOPT_CAINFO, caFile), "CURLOPT_CAINFO")
        }
        if insecure {
            try stream.check(ccurl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 0), "CURLOPT_SSL_VERIFYPEER")
            try stream.check(ccurl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 0), "CURLOPT_SSL_VERIFYHOST")
        }
        let rc = curl_easy_perform(handle)
        guard rc == CURLE_OK else { throw stream.error(for: rc, during: "connect") }
        var fd = curl_socket_t(-1)
        try stream.check(ccurl_getinfo_socket(handle, &fd), "CURLINFO_ACTIVESOCKET")
        guard fd >= 0 else { throw .connectFailed("libcurl reported no socket") }
        stream.socket = Int32(fd)
        return stream
    }

    public var pollDescriptor: Int32 { self.socket }

    public func send(_ bytes: [UInt8], deadline: ContinuousClock.Instant?) throws(TransportError) {
        guard self.handle != nil else { throw .closed }
        try self.sendAll(bytes, deadline: deadline)
    }

    public func trySend(_ bytes: UnsafeRawBufferPointer) throws(TransportError) -> Int {
        guard let handle = self.handle else { throw .closed }
        var offset = 0
        while offset < bytes.count {
            var sent = 0
            self.errorBuffer[0] = 0
            let rc = curl_easy_send(handle, bytes.baseAddress! + offset, bytes.count - offset, &sent)
            guard rc == CURLE_OK else {
                guard rc == CURLE_AGAIN else { throw self.error(for: rc, during: "send") }
                break
            }
            offset += sent
        }
        return offset
    }

    public func receive(maxBytes: Int, timeout: Duration?) throws(TransportError) -> [UInt8] {
        precondition(maxBytes > 0, "receive(maxBytes:) needs room for at least one byte")
        guard let handle = self.handle else { throw .closed }
        let deadlineNs = Duration.deadlineNs(after: timeout)
        // As TCPClientStream: one scratch buffer, and only what arrived is copied out (no 64 KiB zeroed per call).
        if self.scratch.count < maxBytes {
            self.scratch.deallocate()
            self.scratch = .allocate(byteCount: maxBytes, alignment: 1)
        }
        while true {
            var received = 0
            self.errorBuffer[0] = 0
            // Always ask curl first and poll only on CURLE_AGAIN: OpenSSL may already hold decrypted
            // bytes that the socket no longer shows as readable.
            let rc = curl_easy_recv(handle, self.scratch.baseAddress, maxBytes, &received)
            if rc == CURLE_OK {
                return Array(UnsafeRawBufferPointer(rebasing: self.scratch[..<received]))
            }
            guard rc == CURLE_AGAIN else { throw self.error(for: rc, during: "receive") }
            // Nothing there and no time to wait: no poll(2) needed to say so.
            if timeout == .zero { throw .timedOut }
            switch Posix.poll(self.socket, events: Int16(POLLIN), deadlineNs: deadlineNs) {
            case .failure(let error): throw error
            case .success(0): throw .timedOut
            case .success: continue
            }
        }
    }

    public func close() {
        guard let handle = self.handle else { return }
        curl_easy_cleanup(handle)
        self.handle = nil
        self.socket = -1
    }

    // MARK: Errors

    private func check(_ rc: CURLcode, _ what: String) throws(TransportError) {
        guard rc == CURLE_OK else { throw .connectFailed("\(what): \(self.message(for: rc))") }
    }

    private func message(for rc: CURLcode) -> String {
        if self.errorBuffer[0] != 0 { return String(cString: self.errorBuffer) }
        return curl_easy_strerror(rc).map { String(cString: $0) } ?? "curl error \(rc.rawValue)"
    }

    private static let tlsCodes: Set<UInt32> = [
        CURLE_SSL_CONNECT_ERROR, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_CERTPROBLEM,
        CURLE_SSL_CIPHER, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_CACERT_BADFILE,
        CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
        CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT,
    ].map { $0.rawValue }.reduce(into: []) { $0.insert($1) }

    private func error(for rc: CURLcode, during operation: String) -> TransportError {
        let message = "\(operation): \(self.message(for: rc)) (curl \(rc.rawValue))"
        if rc == CURLE_OPERATION_TIMEDOUT { return .timedOut }
        if CurlTLSStream.tlsCodes.contains(rc.rawValue) { return .tls(message) }
        if rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR, let handle = self.handle {
            var osErrno = 0
            // CURLINFO_OS_ERRNO is the errno behind a failed send/recv; 0 means the TLS layer failed.
            if ccurl_getinfo_long(handle, CURLINFO_OS_ERRNO, &osErrno) == CURLE_OK, osErrno != 0 {
                return .io(Int32(truncatingIfNeeded: osErrno))
            }
            return .tls(message)
        }
        return .connectFailed(message)
    }
}
