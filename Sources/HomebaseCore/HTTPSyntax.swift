/// Character classes and field parsing from RFC 9110 §5.6 and RFC 9112, shared by the head parsers.
enum HTTPSyntax {
    /// `tchar` of RFC 9110 §5.6.2: the characters of methods and field names.
    static func isTokenChar(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(b)
        }
    }

    /// `field-vchar` plus SP and HTAB: VCHAR and obs-text. Every other control byte is refused.
    static func isFieldValueChar(_ b: UInt8) -> Bool {
        b == 0x09 || b == 0x20 || (b >= 0x21 && b != 0x7F)
    }

    static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.lowercased() == b.lowercased()
    }

    static func string(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    /// Parses `HTTP/1.0` or `HTTP/1.1`.
    static func version(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> HTTPVersion {
        let text = Array(bytes)
        guard text.count == 8, Array(text[0..<5]) == Array("HTTP/".utf8), text[6] == UInt8(ascii: "."),
            text[5] == UInt8(ascii: "1"), text[7] == UInt8(ascii: "0") || text[7] == UInt8(ascii: "1")
        else { throw .malformed("unsupported HTTP version") }
        return HTTPVersion(major: 1, minor: Int(text[7] - UInt8(ascii: "0")))
    }

    /// Parses `name: value` lines into fields, refusing obsolete folding, spaces before the colon and controls.
    static func fields(_ lines: ArraySlice<ArraySlice<UInt8>>) throws(HTTPParseError) -> [HTTPHeaderField] {
        var fields: [HTTPHeaderField] = []
        fields.reserveCapacity(lines.count)
        for line in lines {
            guard let first = line.first else { throw .malformed("empty header line") }
            if first == 0x20 || first == 0x09 {
                // RFC 9112 §5.2: a server must reject obs-fold (or replace it); we reject.
                throw .malformed("obsolete line folding")
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
                throw .malformed("header line without colon")
            }
            let name = line[line.startIndex..<colon]
            guard !name.isEmpty else { throw .malformed("empty header name") }
            guard name.allSatisfy(isTokenChar) else {
                // Covers whitespace before the colon, which RFC 9112 §5.1 requires us to reject.
                throw .malformed("invalid character in header name")
            }
            var value = line[(colon + 1)...]
            while let f = value.first, f == 0x20 || f == 0x09 { value = value.dropFirst() }
            while let l = value.last, l == 0x20 || l == 0x09 { value = value.dropLast() }
            guard value.allSatisfy(isFieldValueChar) else { throw .malformed("invalid character in header value") }
            fields.append(HTTPHeaderField(name: string(name), value: string(value)))
        }
        return fields
    }

    /// Rejects framing a request cannot be trusted with (RFC 9112 §6.1, §6.3): bad or conflicting
    /// Content-Length, or Content-Length together with Transfer-Encoding.
    static func validateFraming(_ fields: [HTTPHeaderField], isRequest: Bool) throws(HTTPParseError) {
        var length: String?
        var hasTransferEncoding = false
        var codings: [String] = []
        for field in fields {
            if equalsIgnoringCase(field.name, "Content-Length") {
                for part in field.value.split(separator: ",", omittingEmptySubsequences: false) {
                    let v = part.trimmingSpaces()
                    guard !v.isEmpty, v.utf8.count <= 18, v.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                        throw .malformed("invalid Content-Length")
                    }
                    if let seen = length, seen != v { throw .malformed("conflicting Content-Length") }
                    length = v
                }
            } else if equalsIgnoringCase(field.name, "Transfer-Encoding") {
                hasTransferEncoding = true
                codings += field.value.split(separator: ",").map { $0.trimmingSpaces().lowercased() }
            }
        }
        if hasTransferEncoding {
            if length != nil { throw .malformed("both Content-Length and Transfer-Encoding") }
            if isRequest && codings.last != "chunked" { throw .malformed("request transfer coding is not chunked") }
        }
    }

    /// Decodes `%XX` escapes and, in query components, `+` as space. Invalid escapes are kept literally.
    static func percentDecode(_ s: Substring, plusIsSpace: Bool) -> String {
        var out: [UInt8] = []
        let bytes = Array(s.utf8)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "%"), i + 2 < bytes.count, let h = hexValue(bytes[i + 1]), let l = hexValue(bytes[i + 2]) {
                out.append(h << 4 | l)
                i += 3
                continue
            }
            out.append(plusIsSpace && b == UInt8(ascii: "+") ? 0x20 : b)
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
