import HomebaseCore

/// The two chunked-body decoders (RFC 9112 §7.1). Input: `control || maxLine || maxBody || body`.
///
/// `http-chunked` (`HTTPChunkedDecoder`, the server's): the data, the end, the error and the bytes left after
/// the end do not depend on the cuts; the data never exceeds `maxBodyBytes`.
/// `http-chunked-stream` (`HTTPChunkedStreamDecoder`, the client's): the same of its output, and it agrees
/// with `HTTPChunkedDecoder` on every body (same data, same end, an error where the other has one): the two
/// state the same rules.
enum ChunkedHarness {
    static let decoderTarget = FuzzTarget(
        "http-chunked", "chunked body decoder (server): cut-independence, body bound, bytes after the end",
        seeds: Self.seeds, run: Self.runDecoder)

    static let streamDecoderTarget = FuzzTarget(
        "http-chunked-stream", "chunked body decoder (client): cut-independence, agrees with http-chunked",
        seeds: Self.seeds, run: Self.runStreamDecoder)

    struct Outcome: Equatable {
        var data: [UInt8] = []
        var ended = false
        var error: HTTPParseError?
        /// What `takeBuffered` gives after the end.
        var after: [UInt8] = []
    }

    static func runDecoder(_ input: [UInt8]) throws(InvariantViolation) {
        guard input.count >= 3 else { return }
        let maxLine = FuzzInput.limit(input[1], small: 24, production: 4096)
        let maxBody = FuzzInput.limit(input[2], small: 600, production: 1 << 30)
        let body = input[3...]
        let whole = Self.decode([body], maxLine: maxLine, maxBody: maxBody)
        let cut = Self.decode(FuzzInput.pieces(body, seed: input[0]), maxLine: maxLine, maxBody: maxBody)
        try checkEqual(cut, whole, "decoding depends on the cuts")
        try check(whole.data.count <= maxBody, "body of \(whole.data.count) bytes over \(maxBody)")
    }

    static func decode(_ pieces: [ArraySlice<UInt8>], maxLine: Int, maxBody: Int) -> Outcome {
        var decoder = HTTPChunkedDecoder(maxBodyBytes: maxBody, maxLineBytes: maxLine)
        var outcome = Outcome()
        for piece in pieces {
            decoder.append(piece)
            if outcome.ended { continue }
            do {
                while let event = try decoder.next() {
                    switch event {
                    case .data(let bytes): outcome.data += bytes
                    case .end: outcome.ended = true
                    }
                }
            } catch {
                outcome.error = error
                return outcome
            }
        }
        if outcome.ended { outcome.after = decoder.takeBuffered() }
        return outcome
    }

    static func runStreamDecoder(_ input: [UInt8]) throws(InvariantViolation) {
        guard input.count >= 3 else { return }
        let maxLine = FuzzInput.limit(input[1], small: 24, production: 4096)
        let body = input[3...]
        let whole = Self.streamDecode([body], maxLine: maxLine)
        let cut = Self.streamDecode(FuzzInput.pieces(body, seed: input[0]), maxLine: maxLine)
        try checkEqual(cut, whole, "stream decoding depends on the cuts")

        // The server's decoder on the same body, without a body limit: the same verdict and the same data.
        var reference = Self.decode([body], maxLine: maxLine, maxBody: .max)
        reference.after = []
        try checkEqual(whole, reference, "the two chunked decoders disagree")
    }

    static func streamDecode(_ pieces: [ArraySlice<UInt8>], maxLine: Int) -> Outcome {
        var decoder = HTTPChunkedStreamDecoder(maxLineBytes: maxLine)
        var outcome = Outcome()
        for piece in pieces {
            let result: Result<Bool, HTTPParseError> = Array(piece).withUnsafeBytes { raw in
                do throws(HTTPParseError) { return .success(try decoder.decode(raw, into: &outcome.data)) } catch {
                    return .failure(error)
                }
            }
            switch result {
            case .success(let ended):
                if ended {
                    outcome.ended = true
                    return outcome
                }
            case .failure(let error):
                outcome.error = error
                return outcome
            }
        }
        return outcome
    }

    static func seeds() -> [[UInt8]] {
        let bodies = [
            "4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: 1\r\n\r\nGET / HTTP/1.1\r\n",
            "1a\nabcdefghijklmnopqrstuvwxyz\n0\n\n",
            "000000000000010\r\n0123456789abcdef\r\n0\r\n\r\n",
        ]
        var out: [[UInt8]] = []
        for body in bodies {
            let bytes = Array(body.utf8)
            out += [bytes.prefixed(0, 255, 255), bytes.prefixed(0x05, 255, 255), bytes.prefixed(0x09, 5, 20)]
        }
        // A model's stream as a runtime sends it: one chunk per SSE event.
        let sse = FixtureFiles.bytes("ollama/v1-stream-v0.32.6.txt")
        var chunked: [UInt8] = []
        for line in sse.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            chunked += HTTPResponseEncoder.chunk(line + [UInt8(ascii: "\n")])
        }
        chunked += HTTPResponseEncoder.lastChunk
        out += [chunked.prefixed(0, 255, 255), chunked.prefixed(0x0E, 255, 255)]
        return out
    }
}
