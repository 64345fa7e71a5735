/// Gates two and three (seed 002 §4): can the agent drive the model? Only vision AND tools pass the browser.
public enum Capabilities {
    /// Takes images: the pipeline tag first ("full stop"); then a vision-only model_type (never a dual-use
    /// one); last, for a repo with neither signal, a name sniff (`-vl-`, `vision`).
    public static func isVision(repoID: String, pipelineTag: String?, modelType: String?) -> Bool {
        if let tag = pipelineTag, ModelTypes.visionPipelineTags.contains(tag) { return true }
        if let type = modelType, ModelTypes.visionOnly.contains(type) { return true }
        guard pipelineTag == nil, modelType == nil else { return false }
        let name = RepoNameParser.name(of: repoID).lowercased()
        return name.contains("-vl-") || name.hasSuffix("-vl") || name.contains("vision")
    }

    /// Can follow a tool-calling protocol: the checkpoint is instruction-tuned, which only its naming tells
    /// (`instruct`, `chat`, an `-it` token, `reasoning`, `thinking`). An availability hint, not a guarantee: a
    /// base checkpoint ships no chat template; a false positive ignores the tool menu, which the harness tolerates.
    public static func supportsTools(repoID: String) -> Bool {
        let name = RepoNameParser.name(of: repoID).lowercased()
        for needle in ["instruct", "chat", "reasoning", "thinking"] where name.contains(needle) { return true }
        return RepoNameParser.tokens(name).contains("it")
    }
}
