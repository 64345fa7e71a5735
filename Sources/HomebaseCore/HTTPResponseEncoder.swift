/// Builds HTTP/1.1 response bytes: status line, fields, Content-Length bodies and chunked transfer coding
/// (RFC 9112 §4, §6, §7.1). Pure; the caller writes the bytes.
///
/// Header names and values come from our own code, so a CR or LF in them is a bug: it traps rather than
/// letting a caller inject a header.
public enum HTTPResponseEncoder {
    /// The standard reason phrase for a status (RFC 9110 §15), or `"Unknown"`.
    public static func reasonPhrase(for status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 499: "Client Closed Request"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Unknown"
        }
    }

    /// `HTTP/1.1 <status> <reason>\r\n`, the fields, and the blank line. Adds nothing on its own.
    public static func head(status: Int, headers: [HTTPHeaderField]) -> [UInt8] {
        precondition((100...999).contains(status), "status must have three digits")
        var out = Array("HTTP/1.1 \(status) \(self.reasonPhrase(for: status))\r\n".utf8)
        for field in headers {
            precondition(!field.name.isEmpty && field.name.utf8.allSatisfy(HTTPSyntax.isTokenChar), "bad header name")
            precondition(field.value.utf8.allSatisfy(HTTPSyntax.isFieldValueChar), "bad header value")
            out += Array(field.name.utf8)
            out += [UInt8(ascii: ":"), UInt8(ascii: " ")]
            out += Array(field.value.utf8)
            out += [13, 10]
        }
        out += [13, 10]
        return out
    }

    /// A whole response with `Content-Length` set from `body`. With `includeBody: false` (a HEAD request) the
    /// length is still announced but the body is left out (RFC 9110 §9.3.2).
    public static func response(
        status: Int, headers: [HTTPHeaderField], body: [UInt8], includeBody: Bool = true
    ) -> [UInt8] {
        var fields = headers.filter { !HTTPSyntax.equalsIgnoringCase($0.name, "Content-Length") }
        fields.append(HTTPHeaderField(name: "Content-Length", value: String(body.count)))
        var out = self.head(status: status, headers: fields)
        if includeBody { out += body }
        return out
    }

    /// The head of a chunked response: `headers` plus `Transfer-Encoding: chunked`.
    public static func chunkedHead(status: Int, headers: [HTTPHeaderField]) -> [UInt8] {
        var fields = headers.filter {
            !HTTPSyntax.equalsIgnoringCase($0.name, "Content-Length")
                && !HTTPSyntax.equalsIgnoringCase($0.name, "Transfer-Encoding")
        }
        fields.append(HTTPHeaderField(name: "Transfer-Encoding", value: "chunked"))
        return self.head(status: status, headers: fields)
    }

    /// One chunk: hex size, CRLF, data, CRLF. Empty input gives no bytes, because a zero-size chunk would end
    /// the body.
    public static func chunk<C: Collection>(_ data: C) -> [UInt8] where C.Element == UInt8 {
        guard !data.isEmpty else { return [] }
        var out = Array(String(data.count, radix: 16).utf8)
        out += [13, 10]
        out += data
        out += [13, 10]
        return out
    }

    /// The last chunk with no trailers: `0\r\n\r\n`.
    public static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)
}
