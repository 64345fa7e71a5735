/// Gates two and three (design.md §C4): can the agent drive the model? Only vision AND tools pass the browser.
public enum Capabilities {
    /// Takes images: the pipeline tag first ("full stop"); then a vision-only model_type (never a dual-use
    /// one); last, for a repo with neither signal, a name sniff (`-vl-`, `vision`).
    public static func isVision(repoID: String, pipelineTag: String?, modelType: String?) -> Bool {
        Self.isVision(RepoNameScan(repoID: repoID), pipelineTag: pipelineTag, modelType: modelType)
    }

    static func isVision(_ scan: RepoNameScan, pipelineTag: String?, modelType: String?) -> Bool {
        if let tag = pipelineTag, ModelTypes.visionPipelineTags.contains(tag) { return true }
        if let type = modelType, ModelTypes.visionOnly.contains(type) { return true }
        guard pipelineTag == nil, modelType == nil else { return false }
        return scan.contains(Self.dashVLDash) || scan.lower.suffix(3).elementsEqual(Self.dashVL)
            || scan.contains(RepoNameParser.vision)
    }

    /// Can follow a tool-calling protocol: the checkpoint is instruction-tuned, which only its naming tells
    /// (`instruct`, `chat`, an `-it` token, `reasoning`, `thinking`). An availability hint, not a guarantee: a
    /// base checkpoint ships no chat template; a false positive ignores the tool menu, which the harness tolerates.
    public static func supportsTools(repoID: String) -> Bool {
        Self.supportsTools(RepoNameScan(repoID: repoID))
    }

    static func supportsTools(_ scan: RepoNameScan) -> Bool {
        Self.instructionWords.contains { scan.contains($0) } || scan.hasToken(Self.it)
    }

    static let instructionWords = ["instruct", "chat", "reasoning", "thinking"].map { Array($0.utf8) }
    static let it = Array("it".utf8), dashVLDash = Array("-vl-".utf8), dashVL = Array("-vl".utf8)
}
