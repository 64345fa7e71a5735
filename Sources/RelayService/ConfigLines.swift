/// The line format of the relay's files (config, tokens, allowlist): lines end at any line break (CRLF counts as
/// one), a `#` starts a comment, and white space around an entry is dropped. All by Unicode scalar, not
/// `Character`: a combining mark after a `#`, a `=`, a space or a line break joins it into one `Character`,
/// which a split by `Character` does not see (found by fuzzing: Fixtures/fuzz/regressions/relay-config).
enum ConfigLines {
    /// The non-empty entries of `text` with their line numbers (from 1), comments and white space removed.
    static func entries(of text: String) -> [(number: Int, text: String)] {
        var out: [(number: Int, text: String)] = []
        let scalars = text.unicodeScalars
        var number = 1
        var start = scalars.startIndex
        var i = start
        func entry(_ end: String.Index) {
            let line = scalars[start..<end]
            let entry = Self.trimmed(line[..<(line.firstIndex(of: "#") ?? line.endIndex)])
            if !entry.isEmpty { out.append((number, entry)) }
        }
        while i < scalars.endIndex {
            let c = scalars[i]
            // The breaks `Character.isNewline` knows: LF, VT, FF, CR, NEL, LINE and PARAGRAPH SEPARATOR.
            guard (0x0A...0x0D).contains(c.value) || c.value == 0x85 || c.value == 0x2028 || c.value == 0x2029 else {
                i = scalars.index(after: i)
                continue
            }
            entry(i)
            var next = scalars.index(after: i)
            if c == "\r", next < scalars.endIndex, scalars[next] == "\n" { next = scalars.index(after: next) }
            number += 1
            start = next
            i = next
        }
        entry(scalars.endIndex)
        return out
    }

    /// `scalars` without the white space (Unicode White_Space) at either end.
    static func trimmed(_ scalars: Substring.UnicodeScalarView) -> String {
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }

    /// `entry` split at its first `separator` scalar, both sides trimmed; nil without one.
    static func split(_ entry: String, at separator: Unicode.Scalar) -> (String, String)? {
        let scalars = entry.unicodeScalars[...]
        guard let i = scalars.firstIndex(of: separator) else { return nil }
        return (Self.trimmed(scalars[..<i]), Self.trimmed(scalars[scalars.index(after: i)...]))
    }
}
