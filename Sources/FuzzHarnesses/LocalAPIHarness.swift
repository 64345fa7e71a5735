import HomebaseCore

/// The local API of `serve` (issue 36): what an app sends to `handset serve` / `guest serve`.
///
/// `local-api-request`: `LocalAPIRequestDecoder` on request bodies. Input: `control || body`; the control byte
/// picks the decoder (OpenAI chat, Ollama chat, Ollama show) and, with its high bits, small limits so the bounds
/// are reached. Checks: a refusal is a 400 `invalid_request_error` with a bounded message; a decoded request
/// respects every limit (messages, tools, stops, model name), its tools are JSON objects, its numbers in range;
/// and every text it carries goes through the encoders (SSE chunk, NDJSON line) and parses back to itself.
///
/// `local-api-gate`: `LocalAPIGate` on request heads. Input: `control || head`; the control byte picks the
/// configuration (token, CORS, allowed hosts). Checks: every decision is one of the defined ones; a request is
/// served only with an allowed Host and, with a token, the right `Authorization`; CORS headers appear only for
/// the configured origin; a preflight is answered only with `--cors`.
enum LocalAPIHarness {
    static let requestTarget = FuzzTarget(
        "local-api-request", "serve's request bodies (OpenAI chat, Ollama chat/show): limits, refusals, encoder round trip",
        seeds: { Self.requestSeeds }, run: { input throws(InvariantViolation) in try Self.runRequest(input) })

    static let gateTarget = FuzzTarget(
        "local-api-gate", "serve's door on request heads: Host allowlist, token, CORS, size, routes",
        seeds: { Self.gateSeeds }, run: { input throws(InvariantViolation) in try Self.runGate(input) })

    // MARK: Requests

    static func runRequest(_ input: [UInt8]) throws(InvariantViolation) {
        guard let control = input.first else { return }
        let body = Array(input.dropFirst())
        var limits = LocalAPILimits()
        if control & 0x80 != 0 {
            limits.maxMessages = 3
            limits.maxTools = 2
            limits.maxStops = 1
            limits.maxModelBytes = 8
            limits.maxTokens = 100
        }
        enum Decoded { case chat(LocalChatRequest, ollama: Bool), show(String) }
        let decoded: Result<Decoded, LocalAPIError>
        do throws(LocalAPIError) {
            switch control % 3 {
            case 0: decoded = .success(.chat(try LocalAPIRequestDecoder.openAIChat(body, limits: limits), ollama: false))
            case 1: decoded = .success(.chat(try LocalAPIRequestDecoder.ollamaChat(body, limits: limits), ollama: true))
            default: decoded = .success(.show(try LocalAPIRequestDecoder.ollamaShow(body, limits: limits)))
            }
        } catch {
            decoded = .failure(error)
        }
        switch decoded {
        case .success(.chat(let request, let ollama)):
            try Self.checkDecoded(request, limits, ollama: ollama)
        case .success(.show(let model)):
            try check(!model.isEmpty && model.utf8.count <= limits.maxModelBytes, "show model out of bounds: \(model)")
        case .failure(let error):
            try checkEqual(error.status, 400, "a body refusal's status")
            try checkEqual(error.type, "invalid_request_error", "a body refusal's type")
            try check(error.message.utf8.count <= 400, "refusal message of \(error.message.utf8.count) bytes")
            try check(error.param.map { $0.utf8.count <= 80 } ?? true, "refusal param too long")
            let encoded = OpenAIEncoder.error(error)
            let parsed = try Self.parse(encoded, "an encoded error")
            try checkEqual(parsed["error"]?["message"], .string(error.message), "error message round trip")
        }
    }

    static func checkDecoded(_ r: LocalChatRequest, _ limits: LocalAPILimits, ollama: Bool) throws(InvariantViolation) {
        try check(r.messages.count <= limits.maxMessages, "\(r.messages.count) messages")
        try check(ollama || !r.messages.isEmpty, "an OpenAI request without messages")
        try check(r.tools.count <= limits.maxTools, "\(r.tools.count) tools")
        try check(r.stop.count <= limits.maxStops, "\(r.stop.count) stops")
        if let model = r.model {
            try check(!model.isEmpty && model.utf8.count <= limits.maxModelBytes && model.lowercased() != "auto",
                      "model out of bounds: \(model)")
            try check(!model.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "model with controls")
        }
        if let t = r.temperature { try check(t >= 0 && t <= 2, "temperature \(t)") }
        if let p = r.topP { try check(p >= 0 && p <= 1, "top_p \(p)") }
        if let m = r.maxTokens { try check(m >= 1 && m <= limits.maxTokens, "max tokens \(m)") }
        for tool in r.tools {
            let node = try Self.parse(Array(tool.utf8), "a tool")
            try check(node.isObject, "a tool that is no object: \(tool)")
        }
        try check(!r.includeUsage || !ollama, "include_usage from an Ollama request")
        // Whatever text came in goes out through the encoders and parses back to itself.
        for message in r.messages.prefix(8) {
            let sse = OpenAIEncoder.chunk(id: "c", created: 0, model: r.model ?? "auto", delta: .content(message.content))
            try check(sse.starts(with: Array("data: ".utf8)) && sse.suffix(2) == [0x0A, 0x0A], "SSE framing")
            let chunk = try Self.parse(Array(sse.dropFirst(6).dropLast(2)), "an SSE chunk")
            try checkEqual(chunk["choices"]?.arrayValue?.first?["delta"]?["content"], .string(message.content),
                           "content through an SSE chunk")
            try checkEqual(chunk["model"], .string(r.model ?? "auto"), "model through an SSE chunk")
            let line = OllamaEncoder.chatLine(model: r.model ?? "auto", createdAt: "t", content: message.content,
                                              thinking: message.role)
            try check(line.last == 0x0A && line.dropLast().firstIndex(of: 0x0A) == nil, "an NDJSON line with a newline inside")
            let node = try Self.parse(Array(line.dropLast()), "an NDJSON line")
            try checkEqual(node["message"]?["content"], .string(message.content), "content through an NDJSON line")
        }
    }

    static func parse(_ bytes: [UInt8], _ what: String) throws(InvariantViolation) -> JSONNode {
        let result: Result<JSONNode, JSONNode.ParseError> = bytes.withUnsafeBufferPointer { b in
            do throws(JSONNode.ParseError) { return .success(try JSONNode.parse(b)) } catch { return .failure(error) }
        }
        switch result {
        case .success(let node): return node
        case .failure(let error): throw InvariantViolation("\(what) is not JSON: \(error)")
        }
    }

    // MARK: The gate

    static let token = "sk-fuzz-token"
    static let origin = "http://localhost:3000"

    static func runGate(_ input: [UInt8]) throws(InvariantViolation) {
        guard let control = input.first else { return }
        var parser = HTTPRequestHeadParser()
        parser.append(input.dropFirst())
        guard let head = try? parser.next() else { return }
        let configuration = LocalAPIGate.Configuration(
            token: control & 1 != 0 ? Self.token : nil, listenHost: control & 2 != 0 ? "192.168.1.20" : "127.0.0.1",
            allowedHosts: control & 4 != 0 ? ["studio.lan"] : [], corsOrigin: control & 8 != 0 ? Self.origin : nil,
            maxBodyBytes: control & 16 != 0 ? 64 : 1 << 20)
        let gate = LocalAPIGate(configuration)
        let decision = gate.decide(head, bodyBytes: Int(control >> 5) * 20)
        let cors = gate.corsHeaders(head)
        try check(cors.isEmpty || (configuration.corsOrigin != nil && head.header("Origin") == configuration.corsOrigin),
                  "CORS headers for origin \(head.header("Origin") ?? "none")")
        switch decision {
        case .refuse(let error):
            try check([401, 403, 404, 405, 413].contains(error.status), "refusal status \(error.status)")
            try check(error.code != nil && error.message.utf8.count <= 200, "refusal without a code or too long")
            _ = OpenAIEncoder.error(error)
        case .preflight:
            try check(head.method == "OPTIONS" && configuration.corsOrigin != nil, "a preflight without --cors")
            try check(!cors.isEmpty, "a preflight without CORS headers")
        case .serve(let endpoint):
            let host = head.header("Host")
            try check(host != nil, "served without a Host")
            let name = Self.bareHost(host ?? "")
            let allowed = Set(["localhost", "127.0.0.1", "::1", configuration.listenHost] + configuration.allowedHosts)
            try check(allowed.contains(name), "served to Host '\(host ?? "")'")
            if let token = configuration.token {
                let auth = head.header("Authorization") ?? ""
                try check(auth.lowercased().hasPrefix("bearer ") && auth.dropFirst(7) == token[...],
                          "served with Authorization '\(auth)'")
            }
            try check(max(head.contentLength ?? 0, Int(control >> 5) * 20) <= configuration.maxBodyBytes,
                      "served a body over the limit")
            if case .model(let id) = endpoint { try check(!id.isEmpty, "an empty model id") }
        }
    }

    /// The Host header's name as the rule reads it (the harness's own, simpler reading).
    static func bareHost(_ header: String) -> String {
        let value = header.lowercased().filter { $0 != " " && $0 != "\t" }
        if value.hasPrefix("["), let close = value.firstIndex(of: "]") {
            return String(value[value.index(after: value.startIndex)..<close])
        }
        if value.filter({ $0 == ":" }).count > 1 { return value }
        return String(value.split(separator: ":", omittingEmptySubsequences: false).first ?? "")
    }

    // MARK: Seeds

    static let requestBodies = [
        #"{"model":"qwen2.5:7b","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"temperature":0.7}"#,
        #"{"model":"auto","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"stop":["\n"],"reasoning_effort":"low"}"#,
        #"{"model":"llama3.2:3b","messages":[{"role":"user","content":"why \"sky\"\u0001 é","images":[]}],"think":true,"options":{"num_predict":12,"top_p":0.9,"stop":"x"},"functions":[{"name":"g"}]}"#,
        #"{"messages":[{"role":"assistant","content":null},{"role":"tool","content":"42"}],"n":1,"seed":-3,"max_completion_tokens":5}"#,
    ]

    static let requestSeeds: [[UInt8]] = Self.requestBodies.flatMap { body -> [[UInt8]] in
        let bytes = Array(body.utf8)
        return [bytes.prefixed(0), bytes.prefixed(1), bytes.prefixed(2), bytes.prefixed(0x80), bytes.prefixed(0x81)]
    } + [Array(#"{"model":"qwen2.5:7b"}"#.utf8).prefixed(2), Array("{".utf8).prefixed(0)]

    static let gateHeads = [
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost:11435\r\nAuthorization: Bearer sk-fuzz-token\r\nContent-Length: 10\r\n\r\n",
        "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:11435\r\nOrigin: http://localhost:3000\r\n\r\n",
        "GET /v1/models/qwen2.5%3A7b HTTP/1.1\r\nHost: [::1]:11435\r\nOrigin: http://localhost:3000\r\nAuthorization: bearer sk-fuzz-token\r\n\r\n",
        "GET /api/tags HTTP/1.1\r\nHost: studio.lan\r\n\r\n",
        "DELETE /api/chat HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    ]

    static let gateSeeds: [[UInt8]] = Self.gateHeads.flatMap { head -> [[UInt8]] in
        let bytes = Array(head.utf8)
        return [bytes.prefixed(0), bytes.prefixed(1), bytes.prefixed(0x0F), bytes.prefixed(0xF7)]
    }
}
