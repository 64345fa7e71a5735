import Testing
@testable import HomebaseRouter

@Suite struct CloudKeyStoreTests {
    let backend = InMemorySettingsBackend()
    var store: CloudKeyStore { CloudKeyStore(backend: self.backend) }

    @Test(arguments: CloudProvider.allCases)
    func theFirstKeyIsActiveAndMirroredIntoTheLegacySlot(provider: CloudProvider) throws {
        #expect(try self.store.add("  sk-one \n", to: provider))
        #expect(try self.store.add("sk-two", to: provider))
        #expect(self.store.list(provider) == ["sk-one", "sk-two"])
        #expect(self.backend.string(forKey: provider.slot) == "sk-one")
        #expect(self.backend.string(forKey: provider.listSlot) == #"["sk-one","sk-two"]"#)
        #expect(self.store.activeKey(provider) == "sk-one")
    }

    @Test func slotsAreTheSeedsNames() {
        #expect(CloudProvider.openai.slot == "openai.api_key")
        #expect(CloudProvider.anthropic.slot == "anthropic.api_key")
        #expect(CloudProvider.anthropic.listSlot == "anthropic.api_key.list")
        #expect(CloudProvider(argument: "claude") == .anthropic)
        #expect(CloudProvider(argument: "gemini") == nil)
    }

    @Test(arguments: ["", "   ", "\n\t"])
    func blankKeysAreDropped(key: String) throws {
        #expect(try !self.store.add(key, to: .openai))
        #expect(self.store.list(.openai).isEmpty)
        #expect(self.backend.snapshot.isEmpty)
    }

    @Test func duplicatesAreDroppedFirstWins() throws {
        try self.store.setRing([" sk-a", "sk-b", "sk-a ", "", "sk-c", "sk-b"], for: .openai)
        #expect(self.store.list(.openai) == ["sk-a", "sk-b", "sk-c"])
        #expect(try !self.store.add("sk-b", to: .openai))
        #expect(self.store.list(.openai) == ["sk-a", "sk-b", "sk-c"])
    }

    @Test func aDamagedStoredListIsNormalisedOnRead() throws {
        try self.backend.set(#"["sk-a", "  ", "sk-a", " sk-b "]"#, forKey: "openai.api_key.list")
        #expect(self.store.list(.openai) == ["sk-a", "sk-b"])
    }

    @Test func reorderingMovesTheMirror() throws {
        try self.store.setRing(["sk-a", "sk-b", "sk-c"], for: .anthropic)
        #expect(try self.store.move(from: 2, to: 0, in: .anthropic))
        #expect(self.store.list(.anthropic) == ["sk-c", "sk-a", "sk-b"])
        #expect(self.backend.string(forKey: "anthropic.api_key") == "sk-c")
        #expect(self.store.hasAnthropicKey())
        #expect(try !self.store.move(from: 0, to: 3, in: .anthropic))
        #expect(try !self.store.move(from: -1, to: 0, in: .anthropic))
    }

    @Test func removingTheFirstKeyPromotesTheNext() throws {
        try self.store.setRing(["sk-a", "sk-b"], for: .openai)
        #expect(try self.store.remove(at: 0, from: .openai))
        #expect(self.store.activeKey(.openai) == "sk-b")
        #expect(try !self.store.remove(at: 5, from: .openai))
    }

    @Test func removingTheLastKeyDeletesBothSlots() throws {
        try self.store.add("sk-a", to: .openai)
        try self.store.add("sk-ant-a", to: .anthropic)
        #expect(try self.store.remove(at: 0, from: .openai))
        #expect(self.backend.value(forKey: "openai.api_key") == nil)
        #expect(self.backend.value(forKey: "openai.api_key.list") == nil)
        #expect(!self.store.hasBYOKey())
        #expect(self.store.hasAnthropicKey())
    }

    @Test func aLegacySingleKeyReadsAsAOneElementRing() throws {
        try self.backend.set("sk-legacy", forKey: "openai.api_key")
        #expect(self.store.list(.openai) == ["sk-legacy"])
        #expect(self.store.hasBYOKey())
        try self.store.add("sk-new", to: .openai)
        #expect(self.store.list(.openai) == ["sk-legacy", "sk-new"])
        #expect(self.store.activeKey(.openai) == "sk-legacy")
    }

    @Test func aCorruptListFallsBackToTheLegacySlot() throws {
        try self.backend.set("sk-legacy", forKey: "openai.api_key")
        try self.backend.set("{not json", forKey: "openai.api_key.list")
        #expect(self.store.list(.openai) == ["sk-legacy"])
    }

    @Test func hasKeyReadsTheLegacySlotOnly() throws {
        try self.backend.set(#"["sk-a"]"#, forKey: "openai.api_key.list")
        #expect(!self.store.hasBYOKey())
        try self.backend.set("   ", forKey: "openai.api_key")
        #expect(!self.store.hasBYOKey())
    }

    @Test(arguments: [
        ("sk-ant-api03-abcdefghijklmnop", "sk-ant-•••••"),
        ("sk-proj-abcdefghijkl", "sk-proj-•••••"),
        ("sk-abcdefghijkl", "sk-•••••"),
        ("abcdefghijkl", "•••••"),
        ("sk-", "•••••"),
        ("sk-ant-", "sk-•••••"),
        ("", "•••••"),
    ])
    func maskingKeepsThePrefixButNotTheSecret(key: String, masked: String) {
        #expect(CloudKeyStore.mask(key) == masked)
    }

    @Test func maskedListNeverContainsTheSecret() throws {
        try self.store.setRing(["sk-ant-api03-SECRET", "sk-proj-SECRET"], for: .anthropic)
        let masked = self.store.maskedList(.anthropic)
        #expect(masked == ["sk-ant-•••••", "sk-proj-•••••"])
        #expect(!masked.joined().contains("SECRET"))
    }
}
