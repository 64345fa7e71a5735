/// The one rule for what a runtime's capability list says about a model (Ollama's names: `completion`, `tools`,
/// `vision`, `thinking`, `embedding`, …), used wherever a model is judged: the Homebase's verifier and admission,
/// the handset's endpoint verification, the pins. Before, two copies disagreed on a model whose list was empty.
public enum ModelCapabilities {
    /// Whether the model can answer a chat. An empty list means the runtime did not say (older servers, some
    /// OpenAI-compatible ones): counted as capable, since a trial completion then gives the honest answer; a list
    /// that names capabilities without `completion` (an embedding model) is not.
    public static func canComplete(_ capabilities: [String]) -> Bool {
        capabilities.isEmpty || capabilities.contains("completion")
    }

    /// Whether the model reasons before it answers (Ollama's `thinking`): only such a model may be sent `think`
    /// (Ollama answers an effort for any other with 400), and its reasoning streams apart from the answer. An empty
    /// list says nothing, so no.
    public static func canThink(_ capabilities: [String]) -> Bool {
        capabilities.contains("thinking")
    }
}
