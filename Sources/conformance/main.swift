import ConformanceKit
import Foundation

// Thin: ConformanceKit parses, runs and reports. Lines go out unbuffered so a long run shows progress.
let code = await ConformanceCommand.run(Array(CommandLine.arguments.dropFirst())) { line in
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
exit(code)
