import FoundationEssentials
import HomebaseCore

/// Finds files in the repository's `Fixtures/` from this file's path (Fixtures/ is outside every target).
enum Fixtures {
    static let root: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // Tests/HomebaseCoreTests/Fixtures.swift
        return parts.joined(separator: "/") + "/Fixtures"
    }()

    static func data(_ name: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: Self.root + "/" + name))
    }

    static func load<T: Decodable>(_ name: String, as: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: try Self.data(name))
    }
}

func unhex(_ s: String) -> [UInt8] {
    guard let b = Hex.decode(s) else { preconditionFailure("bad hex in test: \(s)") }
    return b
}
