import HomebaseCore
import HomebaseNode
import HomebaseRouter

extension DeviceSession {
    /// `config device-engine URL|off`: verifies the engine (it lists a model and completes one token) before
    /// storing it; `nil` forgets it. Returns the line to print.
    public func configureDeviceEngine(url: String?) async throws -> String {
        guard let url else {
            try self.settings.setDeviceEngine(nil)
            return "device engine off: the built-in floor answers on-device"
        }
        guard let http = self.http.engineHTTP else { throw CLIError("this build cannot reach a device engine") }
        switch await DeviceEngine.verify(url: url, http: http) {
        case .success(let engine):
            try self.settings.setDeviceEngine(engine)
            return "device engine \(engine.model) at \(engine.url): on-device answers come from it (the floor stays last)"
        case .failure(let error):
            throw CLIError("\(error.description); nothing was saved")
        }
    }
}
