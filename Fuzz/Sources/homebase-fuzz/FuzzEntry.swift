#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import FuzzHarnesses

// libFuzzer's entry points. Not `main.swift`: libFuzzer provides `main` (platform-notes §7).

/// The target named by `HOMEBASE_FUZZ_TARGET`, looked up once.
let target: FuzzTarget = {
    let name = getenv("HOMEBASE_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzTargets.named(name) else {
        let names = FuzzTargets.all.map(\.name).joined(separator: " ")
        report("set HOMEBASE_FUZZ_TARGET to one of: \(names)")
        exit(2)
    }
    return target
}()

/// Before fuzzing: checks the target's name (`--list` prints the targets and exits), and with `HOMEBASE_FUZZ_WRITE_SEEDS=DIR` writes the target's
/// seeds into DIR (one file each, named by index) and exits, which is how tools/fuzz makes a corpus.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
) -> Int32 {
    if getenv("HOMEBASE_FUZZ_TARGET").map({ String(cString: $0) }) == "--list" {
        for target in FuzzTargets.all { print("\(target.name)\t\(target.summary)") }
        exit(0)
    }
    let target = target
    if let directory = getenv("HOMEBASE_FUZZ_WRITE_SEEDS").map({ String(cString: $0) }) {
        for (i, seed) in target.seeds().enumerated() {
            let path = directory + "/seed-\(target.name)-\(i)"
            guard let file = fopen(path, "wb") else {
                report("cannot write \(path)")
                exit(1)
            }
            _ = seed.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
        }
        exit(0)
    }
    return 0
}

/// One input: the harness's own checks throw, and a broken property is a crash libFuzzer keeps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let input = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    do throws(InvariantViolation) {
        try target.run(input)
    } catch {
        report("\(target.name): \(error)")
        abort()
    }
    return 0
}

/// A line on standard error (`stderr` itself is shared mutable state to Swift 6).
func report(_ message: String) {
    var line = "homebase-fuzz: \(message)\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
