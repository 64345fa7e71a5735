import Foundation
import HomebaseCore
import HomebaseCuration
import HomebaseNode

/// `handset models …` and `config device-model ID`: the on-device catalog, downloads and state, printed for people
/// or (`--json`) for scripts. The shapes are in README.md ("handset models").
public enum ModelsConsole {
    /// Runs one models command. `interrupt` is set by the executable's SIGINT handler to cancel a download.
    public static func run(_ command: ModelsCommand, _ s: DeviceSession) async throws {
        let store = s.models
        switch command {
        case .catalog(let json, let refresh, let all):
            let load: CatalogLoad
            do { load = try await store.loadCatalog(refresh: refresh) } catch {
                throw CLIError("cannot load the catalog: \(error.description)")
            }
            if let warning = load.warning { Console.err("using the cached catalog: \(warning)") }
            let machine = store.machine()
            if json { CLI.printJSON(Self.catalogJSON(load, all: all, machine: machine, store: store)) } else {
                Self.printCatalog(load, all: all, machine: machine)
            }
        case .download(let id, let json):
            try await Self.download(id, json: json, s)
        case .cancel(let id):
            switch store.cancel(id) {
            case .requested: print("cancel requested for \(id); its partial files are removed as it stops")
            case .cleanedUp: print("\(id): its download had stopped; partial files removed")
            case .notDownloading: throw CLIError("\(id) is not downloading")
            }
        case .delete(let id):
            try store.delete(id)
            print("deleted \(id) (weights, marker, loaded copy)" + Self.floorNote(s))
        case .customAdd(let id):
            switch try store.addCustom(id) {
            case .added: print("added custom repo \(id) (not checked: a wrong id fails at download)")
            case .alreadyPresent: print("\(id) is already a custom repo")
            case .invalid: throw CLIError("'\(id)' is not a Hub repo id (owner/name)")
            }
        case .customRemove(let id):
            let (removed, reset) = try store.removeCustom(id)
            guard removed else { throw CLIError("\(id) is not a custom repo") }
            print("removed custom repo \(id) and its weights" + (reset ? "; it was the active model: the floor answers now" : ""))
        case .customList(let json):
            let ids = store.customRepos.ids
            if json { CLI.printJSON(ids.map { ["id": $0, "state": store.state($0).name] }) } else {
                if ids.isEmpty { print("no custom repos") }
                for id in ids { print("\(id)  \(Self.stateText(store.state(id)))") }
            }
        case .state(let json):
            Self.printState(s, json: json)
        }
    }

    /// `config device-model ID`: the choice (with its vision flag) on the Hub-cache runtime, synced to siblings.
    /// An unknown id is refused: it would only ever answer from the floor.
    public static func chooseHubModel(_ id: String, _ s: DeviceSession) async throws {
        guard s.models.isKnown(id) else {
            throw CLIError("\(id) is neither curated, in the cached catalog, nor a custom repo "
                           + "(see 'handset models catalog --all', or 'handset models custom add \(id)')")
        }
        try s.settings.setDeviceModel(.hub(id))
        let choice = ModelChoice(modelID: id, vision: s.models.isVision(id), origin: s.publicKey.hex)
        var synced = ""
        if s.account.isPaired, await s.connect() {
            let n = try await s.account.chooseAndFanOut(choice, settings: s.settings, messenger: s.messenger)
            synced = "; choice synced to \(n) of \(s.account.siblings.count) siblings"
        } else {
            _ = try s.settings.choose(local: choice)
            if s.account.isPaired { synced = "; not synced (relay unreachable)" }
        }
        let now: String
        switch s.models.resolve(choice: id) {
        case .model: now = "answers from it now"
        case .floor(let reason): now = "the floor answers until it is ready (\(reason.rawValue))"
        }
        print("device model \(id) (\(choice.vision ? "vision" : "text")): \(now)\(synced)")
    }

    // MARK: Download

    static func download(_ id: String, json: Bool, _ s: DeviceSession) async throws {
        let store = s.models
        if store.state(id) == .ready {
            print("\(id) is already downloaded")
            return
        }
        let started = ContinuousClock.now
        let interactive = isatty(STDERR_FILENO) == 1
        let task = Task { () async -> Result<Void, HubError> in
            do throws(HubError) {
                try await store.download(id, progress: Self.bar(json: json, interactive: interactive, clock: s.clock))
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        let watcher = SignalWatcher(signals: [SIGINT, SIGTERM]) { _ in task.cancel() }
        let result = await task.value
        withExtendedLifetime(watcher) {}
        if interactive && !json { FileHandle.standardError.write(Data("\n".utf8)) }
        try Self.report(result, id: id, json: json, started: started, store: store)
    }

    /// The progress bar: redrawn in place every 100 ms on a terminal, a line every 2 s in a log.
    static func bar(json: Bool, interactive: Bool, clock: @escaping @Sendable () -> UInt64)
        -> @Sendable (DownloadProgress) -> Void
    {
        let last = LastDraw()
        return { p in
            guard !json, last.due(now: clock(), every: interactive ? 100 : 2000, final: p.fraction >= 1) else { return }
            FileHandle.standardError.write(Data(((interactive ? "\r" : "") + p.bar() + (interactive ? "" : "\n")).utf8))
        }
    }

    /// When the bar was last drawn.
    final class LastDraw: Sendable {
        /// When the bar was last drawn, and whether the full bar was.
        private let state = Mutex<(ms: UInt64?, full: Bool)>((nil, false))

        func due(now: UInt64, every: UInt64, final: Bool) -> Bool {
            self.state.withLock { s in
                if s.full { return false }
                if let l = s.ms, now < l + every, !final { return false }
                s = (now, final)
                return true
            }
        }
    }

    static func report(_ result: Result<Void, HubError>, id: String, json: Bool, started: ContinuousClock.Instant,
                       store: OnDeviceModelStore) throws {
        switch result {
        case .success:
            let seconds = Double((ContinuousClock.now - started).components.attoseconds) / 1e18
                + Double((ContinuousClock.now - started).components.seconds)
            let loaded = store.loadedModel(id)
            let bytes = loaded?.weightBytes ?? 0
            if json {
                CLI.printJSON(["id": id, "state": "ready", "seconds": seconds, "weight_bytes": bytes,
                               "commit": loaded?.commit ?? ""])
            } else {
                print("ready: \(id) (\(ModelSize.format(bytes)) of weights, sha256 verified) in "
                      + String(format: "%.1f s", seconds))
            }
        case .failure(.cancelled):
            throw CLIError("\(id): download cancelled; partial files removed")
        case .failure(let error):
            throw CLIError("\(id): \(error.description)")
        }
    }

    // MARK: Printing

    static func stateText(_ state: DownloadState) -> String {
        switch state {
        case .downloading(let p): return "downloading \(Int(p * 100))%"
        case .failed(let why): return "failed: \(why)"
        default: return state.name
        }
    }

    static func floorNote(_ s: DeviceSession) -> String {
        guard let choice = s.settings.modelChoice?.modelID, s.settings.deviceModel?.isHub == true else { return "" }
        if case .floor(let reason) = s.models.resolve(choice: choice) {
            return "; the device model \(choice) is not ready: the floor answers (\(reason.rawValue))"
        }
        return ""
    }

    /// `text` padded to `width`, never cut (issue 39: an ID copied from the listing must download); a longer
    /// text pushes the rest of its line right and keeps one space after it.
    static func column(_ text: String, _ width: Int) -> String {
        text.count < width ? text.padding(toLength: width, withPad: " ", startingAt: 0) : text + " "
    }

    static func printCatalog(_ load: CatalogLoad, all: Bool, machine: DownloadStateMachine) {
        let c = load.catalog.counts
        print("catalog (\(load.source.rawValue)): \(c.fetched) repos → \(c.loadable) loadable → \(c.nameable) nameable"
              + " → vision \(c.vision), tools \(c.tools) → \(c.shown) shown")
        print("curated:")
        for m in CuratedModels.all {
            let size = m.size(in: load.catalog)
            print("  \(Self.column(m.title, 14)) \(Self.column(m.id, 46))"
                  + " \(m.isVision ? "vision" : "text  ")  \(Self.column(size.label, 9))"
                  + " \(m.minRAMGB) GB RAM  \(Self.stateText(machine.state(m.id)))")
        }
        let families = all ? CatalogBuilder.tree(load.catalog.all) : load.catalog.families
        print(all ? "every loadable, nameable model (V = vision, T = tools):" : "browser (vision and tools):")
        for family in families {
            print("  \(family.name)")
            for series in family.series {
                print("    \(series.name)")
                for size in series.sizes {
                    print("      \(size.label)")
                    for e in size.entries {
                        let gates = all ? " \(e.isVision ? "V" : "-")\(e.supportsTools ? "T" : "-")" : ""
                        print("        \(Self.column(e.parsed.quant.description, 10))"
                              + "\(Self.column(e.id, 52))\(gates)"
                              + " \(Self.column(e.size.label, 9)) \(e.minRAMGB) GB RAM"
                              + "  \(Self.stateText(machine.state(e.id)))")
                    }
                }
            }
        }
    }

    static func entryJSON(_ e: CatalogEntry, machine: DownloadStateMachine) -> [String: Any] {
        ["id": e.id, "family": e.parsed.family, "series": e.parsed.series, "size": e.parsed.sizeLabel,
         "quant": e.parsed.quant.description, "vision": e.isVision, "tools": e.supportsTools,
         "pipeline_tag": e.pipelineTag ?? NSNull(), "model_type": e.modelType ?? NSNull(),
         "size_bytes": e.size.bytes, "size_source": e.size.source.rawValue, "min_ram_gb": e.minRAMGB,
         "state": machine.state(e.id).name]
    }

    static func catalogJSON(_ load: CatalogLoad, all: Bool, machine: DownloadStateMachine,
                            store: OnDeviceModelStore) -> [String: Any] {
        let c = load.catalog.counts
        return [
            "org": store.access.org, "source": load.source.rawValue, "fetched_at_ms": load.fetchedAtMs,
            "warning": load.warning ?? NSNull(),
            "counts": ["fetched": c.fetched, "loadable": c.loadable, "nameable": c.nameable, "vision": c.vision,
                       "tools": c.tools, "shown": c.shown],
            "curated": CuratedModels.all.map { m -> [String: Any] in
                let size = m.size(in: load.catalog)
                return ["id": m.id, "title": m.title, "vision": m.isVision, "size_bytes": size.bytes,
                        "size_source": size.source.rawValue, "min_ram_gb": m.minRAMGB, "state": machine.state(m.id).name]
            },
            "models": (all ? CatalogBuilder.tree(load.catalog.all).flatMap { $0.series.flatMap { $0.sizes.flatMap(\.entries) } }
                       : load.catalog.shown).map { Self.entryJSON($0, machine: machine) },
        ]
    }

    static func printState(_ s: DeviceSession, json: Bool) {
        let store = s.models
        let machine = store.machine()
        var ids = CuratedModels.all.map(\.id) + store.customRepos.ids + machine.readyIDs.sorted()
        for key in store.device.keys(withPrefix: OnDeviceModelStore.Key.download) {
            ids.append(String(key.dropFirst(OnDeviceModelStore.Key.download.count)))
        }
        var seen: Set<String> = []
        ids = ids.filter { seen.insert($0).inserted }
        let choice = s.settings.deviceModel?.isHub == true ? s.settings.modelChoice?.modelID : nil
        let resolution = store.resolve(choice: choice)
        let answers: String
        let reason: String?
        switch resolution {
        case .model(let id): (answers, reason) = (id, nil)
        case .floor(let r): (answers, reason) = (FloorProvider.modelName, r.rawValue)
        }
        if json {
            CLI.printJSON([
                "device_capable": machine.isCapable, "choice": choice ?? NSNull(), "answers": answers,
                "floor_reason": reason ?? NSNull(), "hub_cache": store.access.layout.root,
                "models": ids.map { id -> [String: Any] in
                    var o: [String: Any] = ["id": id, "state": machine.state(id).name,
                                            "custom": store.customRepos.contains(id)]
                    if case .downloading(let p) = machine.state(id) { o["progress"] = p }
                    if case .failed(let why) = machine.state(id) { o["error"] = why }
                    return o
                },
            ])
            return
        }
        print("device \(machine.isCapable ? "can" : "cannot") run downloaded models; hub cache \(store.access.layout.root)")
        print("choice: \(choice ?? "none"); answering on-device: \(answers)" + (reason.map { " (\($0))" } ?? ""))
        for id in ids { print("  \(Self.column(id, 48)) \(Self.stateText(machine.state(id)))") }
    }
}

import HomebaseRouter
import Synchronization
import HomebaseTransport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
