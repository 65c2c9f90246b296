import RoomBase
import RoomSettings
import RoomSystem
import XCTest

/// One accepted set of log-level names (LogLevelNames) for every option, key and command:
/// roomd's `--log-level` took "warn" and "err" while its `log.level` key refused them.
final class LogLevelTests: XCTestCase {
    func testExactlyTheDocumentedNames() {
        XCTAssertEqual(LogLevel.allCases.map(\.name), LogLevelNames.all)
        for name in LogLevelNames.all { XCTAssertEqual(LogLevel(name: name)?.name, name) }
        for alias in ["warn", "err", "INFO", "Debug", "crit", ""] { XCTAssertNil(LogLevel(name: alias), alias) }
        XCTAssertEqual(ApplianceConfiguration.logLevels, LogLevelNames.all, "roomd.conf's log.level")
    }

    func testRefusalNamesTheFieldAndTheChoices() {
        XCTAssertEqual(LogLevelNames.refusal("--log-level", "warn"),
                       "--log-level: \"warn\" is not error, warning, notice, info or debug")
    }
}
