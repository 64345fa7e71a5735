// swift-tools-version:6.0
import PackageDescription

// Layers, arrows pointing down (design/style.md §1):
//   executables → HomebaseDevice (the handset's and guest's side) → services (RelayService, HomebaseService,
//   HomebaseRouter) → HomebaseEngines (chat engines over HTTP), HomebaseNode → Transport / Store / Crypto
//   → HomebaseCore (pure: no sockets, clocks, randomness or C). HomebaseService never imports HomebaseRouter
//   or HomebaseDevice: the daemon needs only the engines. Map: docs/architecture.md.
// Only HomebaseCrypto imports CSodium and CSHA256Shim, only HomebaseStore imports CSQLite, only HomebaseTransport
// imports CLinux/CCurl/CCurlShim, only RelayFleet imports CNats.
let package = Package(
    name: "Homebase",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "relay", targets: ["relay"]),
        .executable(name: "homebase", targets: ["homebase"]),
        .executable(name: "handset", targets: ["handset"]),
        .executable(name: "guest", targets: ["guest"]),
        .executable(name: "conformance", targets: ["conformance"]),
        .executable(name: "ollama-emulator", targets: ["ollama-emulator"]),
        .executable(name: "hub-emulator", targets: ["hub-emulator"]),
        // For Fuzz/Package.swift, which links the harnesses into a libFuzzer binary (tools/fuzz).
        .library(name: "FuzzHarnesses", targets: ["FuzzHarnesses"]),
    ],
    targets: [
        // C libraries from Debian.
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CLinux"),
        // NATS with JetStream for relay fleets (issue 24); only RelayFleet imports it.
        .systemLibrary(name: "CNats", pkgConfig: "libnats", providers: [.apt(["libnats-dev"])]),
        .target(name: "CCurlShim", dependencies: ["CCurl"]),
        // SHA-256 blocks on the x86 SHA extensions (issue 22); libsodium stays the fallback, no libcrypto.
        .target(name: "CSHA256Shim"),

        // Pure core.
        .target(name: "HomebaseCore"),
        // Pure rules of on-device curation (docs/design.md §C): catalog, gates, sizes, DownloadState, the floor.
        .target(name: "HomebaseCuration", dependencies: ["HomebaseCore"]),
        // Shells.
        .target(name: "HomebaseCrypto", dependencies: ["HomebaseCore", "CSodium", "CSHA256Shim"]),
        .target(name: "HomebaseStore", dependencies: ["HomebaseCore", "CSQLite"]),
        .target(name: "HomebaseTransport", dependencies: ["HomebaseCore", "CLinux", "CCurl", "CCurlShim"]),
        // The relay's fleet shell: a NATS connection, request/reply, the JetStream mailbox.
        .target(name: "RelayFleet", dependencies: ["HomebaseCore", "HomebaseStore", "CNats"]),
        // Services.
        .target(name: "RelayService",
                dependencies: ["HomebaseCore", "HomebaseCrypto", "HomebaseStore", "HomebaseTransport", "RelayFleet"]),
        .target(name: "HomebaseNode",
                dependencies: ["HomebaseCore", "HomebaseCrypto", "HomebaseStore", "HomebaseTransport"]),
        // Chat engines (OpenAI-compatible, Anthropic), their stream decoders and HTTP transport.
        .target(name: "HomebaseEngines", dependencies: ["HomebaseCore", "HomebaseTransport"]),
        // LLMRouter, its providers and stores, the relay inference client.
        .target(name: "HomebaseRouter",
                dependencies: ["HomebaseCore", "HomebaseCrypto", "HomebaseStore", "HomebaseTransport",
                               "HomebaseNode", "HomebaseCuration", "HomebaseEngines"]),
        // The phone's side: the handset/guest CLI, console, session, on-device models and Hub downloads.
        .target(name: "HomebaseDevice",
                dependencies: ["HomebaseCore", "HomebaseCrypto", "HomebaseStore", "HomebaseTransport",
                               "HomebaseNode", "HomebaseCuration", "HomebaseEngines", "HomebaseRouter"]),
        .target(name: "HomebaseService",
                dependencies: ["HomebaseCore", "HomebaseCrypto", "HomebaseStore", "HomebaseTransport",
                               "HomebaseNode", "HomebaseEngines"]),

        // Executables: parse, configure, run.
        .executableTarget(name: "relay", dependencies: ["RelayService"]),
        .executableTarget(name: "homebase", dependencies: ["HomebaseService"]),
        .executableTarget(name: "handset", dependencies: ["HomebaseDevice", "HomebaseRouter", "HomebaseEngines"]),
        .executableTarget(name: "guest", dependencies: ["HomebaseDevice", "HomebaseRouter", "HomebaseEngines"]),
        .target(name: "ConformanceKit",
                dependencies: ["HomebaseCore", "HomebaseCrypto", "HomebaseTransport", "HomebaseNode"]),
        .executableTarget(name: "conformance", dependencies: ["ConformanceKit"]),
        .target(name: "OllamaEmulatorKit", dependencies: ["HomebaseCore", "HomebaseTransport"]),
        .executableTarget(name: "ollama-emulator", dependencies: ["OllamaEmulatorKit"]),
        .target(name: "HubEmulatorKit",
                dependencies: ["HomebaseCore", "HomebaseCrypto", "HomebaseTransport", "HomebaseCuration"]),
        .executableTarget(name: "hub-emulator", dependencies: ["HubEmulatorKit"]),
        .executableTarget(name: "catalog-bench", dependencies: ["HomebaseCuration"]),
        .executableTarget(name: "relay-bench", dependencies: ["HomebaseCore", "HomebaseCrypto", "HomebaseTransport"]),
        .executableTarget(name: "inference-bench",
                          dependencies: ["HomebaseCore", "HomebaseCrypto", "HomebaseNode", "HomebaseTransport"]),
        .target(name: "APIEmulatorKit", dependencies: ["HomebaseCore", "HomebaseTransport", "OllamaEmulatorKit"]),
        // One fuzz harness per parser that faces the network or the disk, and their seeds. Built here so the
        // suite replays seeds and regressions through the same code; fuzzed by Fuzz/Package.swift.
        .target(name: "FuzzHarnesses",
                dependencies: ["HomebaseCore", "HomebaseCrypto", "HomebaseEngines", "HomebaseService",
                               "RelayService"]),

        .testTarget(name: "HomebaseCoreTests", dependencies: ["HomebaseCore"]),
        .testTarget(name: "HomebaseCurationTests", dependencies: ["HomebaseCuration"]),
        .testTarget(name: "OnDeviceModelTests",
                    dependencies: ["HomebaseDevice", "HomebaseRouter", "HomebaseEngines", "HomebaseCuration",
                                   "HubEmulatorKit", "HomebaseTransport", "HomebaseCrypto", "HomebaseCore",
                                   "HomebaseNode"]),
        .testTarget(name: "HomebaseCryptoTests", dependencies: ["HomebaseCrypto", "CSodium"]),
        .testTarget(name: "HomebaseStoreTests", dependencies: ["HomebaseStore"]),
        .testTarget(name: "HomebaseTransportTests", dependencies: ["HomebaseTransport", "HomebaseCrypto"]),
        .testTarget(name: "RelayServiceTests", dependencies: ["RelayService", "HomebaseCrypto", "HomebaseTransport"]),
        .testTarget(name: "HomebaseNodeTests", dependencies: ["HomebaseNode", "RelayService"]),
        .testTarget(name: "HomebaseEnginesTests",
                    dependencies: ["HomebaseEngines", "OllamaEmulatorKit", "HomebaseTransport"]),
        .testTarget(name: "HomebaseRouterTests",
                    dependencies: ["HomebaseRouter", "HomebaseDevice", "HomebaseEngines", "APIEmulatorKit",
                                   "OllamaEmulatorKit", "HomebaseTransport"]),
        .testTarget(name: "HomebaseServiceTests",
                    dependencies: ["HomebaseService", "HomebaseEngines", "HomebaseRouter", "OllamaEmulatorKit"]),
        .testTarget(name: "ConformanceKitTests",
                    dependencies: ["ConformanceKit", "RelayService", "HomebaseService", "OllamaEmulatorKit"]),
        .testTarget(name: "OllamaEmulatorKitTests", dependencies: ["OllamaEmulatorKit", "HomebaseTransport"]),
        .testTarget(name: "FuzzHarnessesTests", dependencies: ["FuzzHarnesses"]),
        .testTarget(name: "IntegrationTests",
                    dependencies: ["RelayService", "HomebaseService", "HomebaseEngines", "HomebaseRouter",
                                   "HomebaseDevice", "HomebaseNode", "OllamaEmulatorKit"]),
    ],
    swiftLanguageModes: [.v6]
)
