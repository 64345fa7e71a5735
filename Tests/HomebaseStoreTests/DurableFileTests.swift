import Foundation
import Testing
@testable import HomebaseStore

#if canImport(Glibc)
import Glibc
#endif

/// Files written whole or not at all (issue 38 item 8: the durable-file helpers live in the store).
@Suite struct DurableFileTests {
    func contents(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    @Test func aWriteReplacesTheFileWholeAndLeavesNoTemporary() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("ref")
        try DurableFile.write(Array("one".utf8), to: path)
        #expect(self.contents(path) == "one")
        try DurableFile.write(Array("two, longer".utf8), to: path)
        #expect(self.contents(path) == "two, longer")
        try DurableFile.write([], to: path)
        #expect(self.contents(path) == "")
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
    }

    @Test func aFailedRenameKeepsTheOldContentsAndRemovesTheTemporary() throws {
        let dir = try TemporaryDirectory()
        // The destination is a directory with something in it: the rename fails after the bytes were written.
        let path = dir.file("ref")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        try Data("kept".utf8).write(to: URL(fileURLWithPath: path + "/inside"))
        #expect(throws: StoreError.self) { try DurableFile.write(Array("new".utf8), to: path) }
        #expect(self.contents(path + "/inside") == "kept")
        #expect(!FileManager.default.fileExists(atPath: path + ".tmp"))
    }

    @Test func aWriteIntoAMissingDirectorySaysWhichCallAndPath() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("missing/ref")
        do {
            try DurableFile.write(Array("x".utf8), to: path)
            Issue.record("expected a failure")
        } catch {
            #expect(error == .file(operation: "open", path: path + ".tmp", errno: ENOENT))
        }
        #expect(throws: StoreError.file(operation: "open", path: dir.file("missing"), errno: ENOENT)) {
            try DurableFile.syncDirectory(dir.file("missing"))
        }
    }

    @Test func aRenameMovesTheFileAndFailsWithoutASource() throws {
        let dir = try TemporaryDirectory()
        let source = dir.file("blob.incomplete")
        try Data("blob".utf8).write(to: URL(fileURLWithPath: source))
        try DurableFile.rename(source, to: dir.file("blob"))
        #expect(self.contents(dir.file("blob")) == "blob")
        #expect(!FileManager.default.fileExists(atPath: source))
        #expect(throws: StoreError.file(operation: "rename", path: source, errno: ENOENT)) {
            try DurableFile.rename(source, to: dir.file("blob"))
        }
    }

    @Test func writeAllWritesEveryByteAndReportsAnError() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("big")
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let fd = open(path, O_WRONLY | O_CREAT, 0o644)
        #expect(bytes.withUnsafeBytes { DurableFile.writeAll(fd, $0) })
        close(fd)
        #expect(FileManager.default.contents(atPath: path).map(Array.init) == bytes)
        #expect(!bytes.withUnsafeBytes { DurableFile.writeAll(-1, $0) })
    }

    @Test func theDirectoryOfAPath() {
        #expect(DurableFile.directory(of: "/a/b/c") == "/a/b")
        #expect(DurableFile.directory(of: "c") == ".")
        #expect(DurableFile.directory(of: "/c") == "/")
    }
}
