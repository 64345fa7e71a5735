/// The floor rules (§10): whatever the user stored, downloaded, deleted, mistyped or cancelled, the agent has a
/// brain. Turning a stored model id into what answers tries the built-ins (the curated list and the catalog),
/// then the custom repos; anything unrecognised, not downloaded, or on an incapable device lands on the floor.
public enum OnDeviceResolution: Equatable, Sendable {
    /// Answer from the downloaded model.
    case model(String)
    /// The floor answers, and why.
    case floor(FloorReason)

    public enum FloorReason: String, Equatable, Sendable {
        /// No model chosen.
        case noChoice = "no_choice"
        /// The stored id is neither built in nor a custom repo (a deleted custom repo's dangling id).
        case unknownModel = "unknown_model"
        /// The device cannot run downloaded models.
        case unsupported
        /// Chosen but not (yet) downloaded: select-before-download answers from the floor until ready.
        case notDownloaded = "not_downloaded"
    }

    /// Where the hub model id in `choice` is known from.
    public enum Origin: Equatable, Sendable {
        case curated
        case catalog
        case custom
    }

    /// Resolves a stored id to a hub model origin, or `nil` for anything unrecognised.
    public static func origin(of id: String, catalog: Catalog?, custom: CustomRepos) -> Origin? {
        if CuratedModels.model(id) != nil { return .curated }
        if catalog?.entry(id) != nil { return .catalog }
        if custom.contains(id) { return .custom }
        return nil
    }

    /// What answers for the stored choice.
    public static func resolve(choice: String?, catalog: Catalog?, custom: CustomRepos,
                               states: DownloadStateMachine) -> OnDeviceResolution {
        guard let id = choice, !id.isEmpty else { return .floor(.noChoice) }
        guard Self.origin(of: id, catalog: catalog, custom: custom) != nil else { return .floor(.unknownModel) }
        switch states.state(id) {
        case .ready: return .model(id)
        case .unsupported: return .floor(.unsupported)
        case .absent, .downloading, .failed: return .floor(.notDownloaded)
        }
    }

    /// After removing a custom repo: the choice to store. Removing the active one snaps the choice back to the
    /// floor (`nil`); any other choice stays.
    public static func choiceAfterRemoving(_ removed: String, current: String?) -> String? {
        current == removed ? nil : current
    }

    /// A sibling's choice arrived: start our own download when it names a hub model we know, can run and lack.
    public static func siblingShouldDownload(_ id: String, catalog: Catalog?, custom: CustomRepos,
                                             states: DownloadStateMachine) -> Bool {
        guard Self.origin(of: id, catalog: catalog, custom: custom) != nil else { return false }
        switch states.state(id) {
        case .absent, .failed: return true
        case .unsupported, .downloading, .ready: return false
        }
    }
}
