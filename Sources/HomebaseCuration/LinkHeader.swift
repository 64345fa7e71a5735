/// GitHub-style `Link` pagination (reference/model-apis.md §6): `<URL>; rel="next"`, several links joined by
/// commas. The next URL is followed unchanged.
public enum LinkHeader {
    /// The `rel="next"` target, or `nil` on the last page (header missing, or no `next` link in it).
    public static func next(_ value: String?) -> String? {
        guard let value else { return nil }
        var rest = Substring(value)
        while let open = rest.firstIndex(of: "<") {
            guard let close = rest[open...].firstIndex(of: ">") else { return nil }
            let url = rest[rest.index(after: open)..<close]
            var params = rest[rest.index(after: close)...]
            // The parameters run to the next link (a comma outside <...>).
            if let nextLink = params.firstIndex(of: "<") { params = params[..<nextLink] }
            let isNext = params.split(separator: ";").contains { param in
                let p = param.filter { $0 != " " && $0 != "," }
                return p == "rel=\"next\"" || p == "rel=next"
            }
            if isNext && !url.isEmpty { return String(url) }
            rest = rest[rest.index(after: close)...]
        }
        return nil
    }
}
