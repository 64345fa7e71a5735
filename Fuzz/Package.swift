// swift-tools-version:6.0
import PackageDescription

// The libFuzzer binary: every harness of the root package's FuzzHarnesses behind one
// LLVMFuzzerTestOneInput, the target chosen by HOMEBASE_FUZZ_TARGET. A package of its own because the
// binary has no `main` (libFuzzer brings it): the root package's `swift build --build-tests` would try to
// link it without `-sanitize=fuzzer` and fail. Build and run it with tools/fuzz.
//
// The root package is reached through the symlink work/homebase → ../.. that tools/fuzz makes (work/ is
// ignored by git): SwiftPM names a package on a path after its directory, and `..` would be named after the
// checkout, which is anything (and is `fuzz`, this package's own name, in a worktree called fuzz).
let package = Package(
    name: "HomebaseFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "work/homebase")],
    targets: [
        .executableTarget(
            name: "homebase-fuzz",
            dependencies: [.product(name: "FuzzHarnesses", package: "homebase")]),
    ],
    swiftLanguageModes: [.v6]
)
