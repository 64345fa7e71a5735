/// RFC 3339 times as Ollama writes them (`2024-06-04T14:38:31.83753-07:00`, `…Z`, fractions of up to nine
/// digits), to milliseconds since 1970. Pure; nil for anything else, including out-of-range fields.
public enum RFC3339 {
    public static func milliseconds(_ text: String) -> UInt64? {
        let b = Array(text.utf8)
        guard b.count >= 20, b.count <= 40 else { return nil }
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var n = 0
            for c in b[from..<(from + count)] {
                guard (48...57).contains(c) else { return nil }
                n = n * 10 + Int(c - 48)
            }
            return n
        }
        guard let year = number(0, 4), b[4] == 45, let month = number(5, 2), b[7] == 45, let day = number(8, 2),
              b[10] == 84 || b[10] == 116 || b[10] == 32, let hour = number(11, 2), b[13] == 58,
              let minute = number(14, 2), b[16] == 58, let second = number(17, 2)
        else { return nil }
        guard (1970...9999).contains(year), (1...12).contains(month), (1...31).contains(day), hour < 24,
              minute < 60, second < 61 else { return nil }
        var i = 19
        var millis = 0
        if i < b.count, b[i] == 46 {
            i += 1
            let start = i
            while i < b.count, (48...57).contains(b[i]) { i += 1 }
            guard i > start, i - start <= 9 else { return nil }
            let digits = min(3, i - start)
            millis = number(start, digits)! * [100, 10, 1][digits - 1]
        }
        guard i < b.count else { return nil }
        var offsetMinutes = 0
        if b[i] == 90 || b[i] == 122 {
            i += 1
        } else if b[i] == 43 || b[i] == 45 {
            guard let h = number(i + 1, 2), i + 3 < b.count, b[i + 3] == 58, let m = number(i + 4, 2), h < 24, m < 60
            else { return nil }
            offsetMinutes = (h * 60 + m) * (b[i] == 43 ? 1 : -1)
            i += 6
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        // Days since 1970-01-01 (civil from days, proleptic Gregorian).
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offsetMinutes * 60
        guard seconds >= 0 else { return nil }
        return UInt64(seconds) * 1_000 + UInt64(millis)
    }
}
