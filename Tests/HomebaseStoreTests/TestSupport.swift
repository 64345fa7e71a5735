import Foundation
import HomebaseCore
@testable import HomebaseStore

/// A fresh directory under the system temp dir, removed when the value is deinitialised.
final class TemporaryDirectory {
    let path: String

    init() throws {
        self.path = FileManager.default.temporaryDirectory
            .appendingPathComponent("homebase-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: false)
    }

    func file(_ name: String) -> String { self.path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: self.path) }
}

/// Permission bits of `path`, or nil if it does not exist.
func fileMode(_ path: String) -> UInt32? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    return UInt32(info.st_mode) & 0o777
}

/// A deterministic test key: 32 copies of `byte`.
func key(_ byte: UInt8) -> PublicKey { PublicKey(bytes: [UInt8](repeating: byte, count: 32))! }
