import HomebaseCore
import HomebaseTransport

/// Checks a relay URL before it is kept (`homebase config --relay`, issue 39): opens the relay's WebSocket as a
/// device would (the same subprotocol and access token) and closes it again. Only the upgrade, no login: a
/// running daemon with the same key keeps its connection (a second login would replace it, 4001). What the
/// upgrade meets (nothing listening, an HTTP status, a refused token, a TLS mismatch) is the answer.
public enum RelayProbe {
    /// Nil when the relay accepted the upgrade; else what stood in the way.
    public static func check(url: String, token: String?, timeout: Duration = .seconds(5)) -> RelayConnectProblem? {
        var o = WebSocketClient.Options(subprotocol: "homebase-relay.v1")
        o.connectTimeout = timeout
        if let token { o.headers = [("Authorization", "Bearer \(token)")] }
        do {
            let ws = try WebSocketClient.connect(url, options: o)
            ws.close(code: 1000, reason: "checked")
            return nil
        } catch {
            return RelayConnectProblem(cause: WebSocketClient.problemCause(error), url: url,
                                       tokenSent: token != nil || url.contains("token="))
        }
    }
}
