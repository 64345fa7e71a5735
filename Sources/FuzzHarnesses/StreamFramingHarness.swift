import HomebaseCore

/// `SSEParser` (model APIs' `text/event-stream`). Input: `control || maxEvent || stream`.
///
/// Reference: the stream fed one line at a time (`FuzzInput.lines`) through `append` alone. Any other cut, with the fast lane
/// (`takeSimpleEvents`) tried first on each read as `ChatStreamAssembler` does, gives the same events, the
/// same last event id and the same partial-event state; when the stream fails (an event over `maxEventBytes`)
/// both fail, and the cut's events are a prefix of the reference's (a read that fails delivers nothing, so a
/// coarser cut delivers less). No event's name or data holds a line break it was framed by.
enum SSEHarness {
    static let target = FuzzTarget(
        "sse", "text/event-stream parser: fast lane + append against line-at-a-time append, framing rules",
        seeds: Self.seeds, run: Self.run)

    struct Outcome: Equatable {
        var events: [SSEEvent] = []
        var failed = false
        var lastEventID = ""
        var partial = false
    }

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard input.count >= 2 else { return }
        let maxEvent = FuzzInput.limit(input[1], small: 64, production: 1024 * 1024)
        let stream = input[2...]
        let reference = Self.parse(FuzzInput.lines(stream), maxEvent: maxEvent, lane: false)
        let cut = Self.parse(FuzzInput.pieces(stream, seed: input[0]), maxEvent: maxEvent, lane: true)
        if reference.failed {
            try check(cut.failed, "the line-at-a-time parse failed, the cut one did not")
            try check(reference.events.starts(with: cut.events), "events of a failing stream are no prefix")
        } else {
            try checkEqual(cut, reference, "events depend on the cuts or the lane")
        }
        for event in reference.events {
            try check(!event.data.contains("\r") && event.event?.contains("\n") != true
                      && event.event?.contains("\r") != true, "a line break inside a field: \(event)")
        }
    }

    static func parse(_ pieces: [ArraySlice<UInt8>], maxEvent: Int, lane: Bool) -> Outcome {
        var parser = SSEParser(maxEventBytes: maxEvent)
        var outcome = Outcome()
        for piece in pieces {
            let bytes = Array(piece)
            var laneEvents: [SSEEvent] = []
            let consumed = !lane ? 0 : bytes.withUnsafeBufferPointer { buffer in
                parser.takeSimpleEvents(buffer) { data in
                    laneEvents.append(SSEEvent(event: nil, data: String(decoding: data, as: UTF8.self)))
                    return true
                }
            }
            do {
                let events = try parser.append(bytes[consumed...])
                // The lane's events come first; a read that fails delivers none of them (the lane's contract).
                outcome.events += laneEvents + events
            } catch {
                outcome.failed = true
                break
            }
        }
        outcome.lastEventID = parser.lastEventID
        outcome.partial = parser.hasPartialEvent
        return outcome
    }

    static func seeds() -> [[UInt8]] {
        var out: [[UInt8]] = []
        for name in ["ollama/v1-stream-v0.32.6.txt", "ollama/v1-stream-legacy.txt", "ollama/v1-error-not-found.txt"] {
            let bytes = FixtureFiles.bytes(name)
            out += [bytes.prefixed(0, 255), bytes.prefixed(0x0E, 255), bytes.prefixed(0x03, 200)]
        }
        let anthropic = Array(ChatStreamHarness.anthropicSample.utf8)
        out += [anthropic.prefixed(0, 255), anthropic.prefixed(0x0D, 255)]
        let edges = Array("\u{FEFF}: comment\r\nid: 7\rretry: 10\r\nevent: x\ndata\ndata: a\r\n\r\ndata:b\n\n".utf8)
        out += [edges.prefixed(0x01, 255), edges.prefixed(0x0A, 40)]
        return out
    }
}

/// `LineSplitter` (NDJSON framing). Input: `control || maxLine || stream`.
///
/// Reference: the obvious split of the whole stream at `\n`, one trailing `\r` dropped, every line at most
/// `maxLine` bytes (an unterminated tail may be one byte longer while it ends in `\r`). Every cut gives the
/// reference's lines and verdict, or on failure a prefix of its lines; the splitter never buffers more than
/// `maxLine + 1` bytes.
enum LineSplitterHarness {
    static let target = FuzzTarget(
        "ndjson-lines", "NDJSON line splitter: against a reference split, buffer bound",
        seeds: Self.seeds, run: Self.run)

    struct Outcome: Equatable {
        var lines: [[UInt8]] = []
        var failed = false
    }

    static func run(_ input: [UInt8]) throws(InvariantViolation) {
        guard input.count >= 2 else { return }
        let maxLine = FuzzInput.limit(input[1], small: 40, production: 1024 * 1024)
        let stream = input[2...]
        let expected = Self.reference(stream, maxLine: maxLine)
        var splitter = LineSplitter(maxLineBytes: maxLine)
        var got = Outcome()
        for piece in FuzzInput.pieces(stream, seed: input[0]) {
            do {
                got.lines += try splitter.append(piece)
            } catch {
                got.failed = true
                break
            }
            try check(splitter.bufferedByteCount <= maxLine + 1,
                      "splitter holds \(splitter.bufferedByteCount) bytes, limit \(maxLine)")
        }
        if !got.failed {
            do {
                if let last = try splitter.finish() { got.lines.append(last) }
            } catch {
                got.failed = true
            }
        }
        if expected.failed {
            try check(got.failed, "a line over the limit was accepted")
            try check(expected.lines.starts(with: got.lines), "lines of a failing stream are no prefix")
        } else {
            try checkEqual(got, expected, "lines differ from the reference split")
        }
    }

    /// The specification of `LineSplitter`, written plainly.
    static func reference(_ stream: ArraySlice<UInt8>, maxLine: Int) -> Outcome {
        var outcome = Outcome()
        var parts = stream.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        let tail = parts.removeLast()  // after the last `\n` (empty when the stream ends with one)
        for part in parts {
            let line = part.last == UInt8(ascii: "\r") ? part.dropLast() : part
            guard line.count <= maxLine else {
                outcome.failed = true
                return outcome
            }
            outcome.lines.append(Array(line))
        }
        if !tail.isEmpty {
            let line = tail.last == UInt8(ascii: "\r") ? tail.dropLast() : tail
            guard line.count <= maxLine else {
                outcome.failed = true
                return outcome
            }
            outcome.lines.append(Array(line))
        }
        return outcome
    }

    static func seeds() -> [[UInt8]] {
        var out: [[UInt8]] = []
        for name in ["ollama/api-chat-stream.txt", "ollama/api-pull-stream.txt", "ollama/api-pull-unknown-model.txt"] {
            let bytes = FixtureFiles.bytes(name)
            out += [bytes.prefixed(0, 255), bytes.prefixed(0x0C, 255), bytes.prefixed(0x03, 30)]
        }
        out.append(Array("a\r\n\r\nbb\r\r\nccc\r".utf8).prefixed(0x01, 3))
        return out
    }
}
