import Testing
@testable import HomebaseCuration

@Suite struct FloorRulesTests {
    let curated = "mlx-community/Qwen2.5-1.5B-Instruct-4bit"

    @Test func onlyAReadyKnownModelAnswers() {
        let ready = DownloadStateMachine(isCapable: true, readyIDs: [self.curated])
        #expect(OnDeviceResolution.resolve(choice: self.curated, catalog: nil, custom: CustomRepos(), states: ready)
                == .model(self.curated))
        let absent = DownloadStateMachine(isCapable: true, readyIDs: [])
        #expect(OnDeviceResolution.resolve(choice: self.curated, catalog: nil, custom: CustomRepos(), states: absent)
                == .floor(.notDownloaded))
        var downloading = absent
        _ = downloading.start(self.curated)
        #expect(OnDeviceResolution.resolve(choice: self.curated, catalog: nil, custom: CustomRepos(),
                                           states: downloading) == .floor(.notDownloaded))
        let incapable = DownloadStateMachine(isCapable: false, readyIDs: [self.curated])
        #expect(OnDeviceResolution.resolve(choice: self.curated, catalog: nil, custom: CustomRepos(),
                                           states: incapable) == .floor(.unsupported))
        #expect(OnDeviceResolution.resolve(choice: nil, catalog: nil, custom: CustomRepos(), states: ready)
                == .floor(.noChoice))
    }

    @Test func anUnknownStoredIDLandsOnTheFloorEvenIfMarkedReady() {
        // A dangling id (a deleted custom repo, a damaged setting) degrades safely.
        let states = DownloadStateMachine(isCapable: true, readyIDs: ["someone/gone"])
        #expect(OnDeviceResolution.resolve(choice: "someone/gone", catalog: nil, custom: CustomRepos(),
                                           states: states) == .floor(.unknownModel))
        #expect(OnDeviceResolution.resolve(choice: "not a repo id", catalog: nil, custom: CustomRepos(),
                                           states: states) == .floor(.unknownModel))
        #expect(OnDeviceResolution.resolve(choice: "someone/gone", catalog: nil,
                                           custom: CustomRepos(ids: ["someone/gone"]), states: states)
                == .model("someone/gone"))
    }

    @Test func catalogEntriesResolve() {
        let catalog = CatalogBuilder.build([[HubModel(id: "mlx-community/gemma-3-12b-it-4bit",
                                                      pipelineTag: "image-text-to-text", modelType: "gemma3")]])
        #expect(OnDeviceResolution.origin(of: "mlx-community/gemma-3-12b-it-4bit", catalog: catalog,
                                          custom: CustomRepos()) == .catalog)
    }

    @Test func removingTheActiveCustomRepoSnapsToTheFloor() {
        #expect(OnDeviceResolution.choiceAfterRemoving("me/mine", current: "me/mine") == nil)
        #expect(OnDeviceResolution.choiceAfterRemoving("me/mine", current: self.curated) == self.curated)
        var custom = CustomRepos(ids: ["me/mine"])
        do { let r = custom.remove("me/mine"); #expect(r) }
        let states = DownloadStateMachine(isCapable: true, readyIDs: ["me/mine"])
        #expect(OnDeviceResolution.resolve(choice: "me/mine", catalog: nil, custom: custom, states: states)
                == .floor(.unknownModel))
    }

    @Test func aSiblingChoiceStartsADownloadOnlyWhenItHelps() {
        var states = DownloadStateMachine(isCapable: true, readyIDs: [])
        #expect(OnDeviceResolution.siblingShouldDownload(self.curated, catalog: nil, custom: CustomRepos(), states: states))
        #expect(!OnDeviceResolution.siblingShouldDownload("qwen2.5:7b", catalog: nil, custom: CustomRepos(), states: states))
        _ = states.start(self.curated)
        #expect(!OnDeviceResolution.siblingShouldDownload(self.curated, catalog: nil, custom: CustomRepos(), states: states))
        let incapable = DownloadStateMachine(isCapable: false, readyIDs: [])
        #expect(!OnDeviceResolution.siblingShouldDownload(self.curated, catalog: nil, custom: CustomRepos(),
                                                          states: incapable))
    }
}

@Suite struct CustomRepoTests {
    @Test(arguments: ["mlx-community/Qwen2.5-1.5B-Instruct-4bit", "a/b", "Org_1/model.v2-x"])
    func validIDs(id: String) { #expect(RepoID.isValid(id)) }

    @Test(arguments: ["", "noslash", "a/b/c", "/b", "a/", "a b/c", "a/b c", "../x", "a/..", "a/.hidden", "-a/b",
                      "a/b\u{0}", "ä/b", "a/" + String(repeating: "x", count: 97), "a/b..c"])
    func invalidIDs(id: String) { #expect(!RepoID.isValid(id)) }

    @Test func addIsValidatedAndIdempotent() {
        var custom = CustomRepos()
        do { let r = custom.add(" me/model "); #expect(r == .added) }
        do { let r = custom.add("me/model"); #expect(r == .alreadyPresent) }
        do { let r = custom.add("nope"); #expect(r == .invalid) }
        #expect(custom.ids == ["me/model"])
        #expect(CustomRepos(ids: ["a/b", "a/b", "bad", "c/d"]).ids == ["a/b", "c/d"])
    }
}
