@testable import RoomAudio
import RoomCaptureChain
import RoomOpus
import XCTest

/// Loss-driven FEC: the listeners' reports turn the encoder's protection on at once and off
/// only after a clean stretch; a clean network gets the lower bitrate.
final class LossAdaptationTests: XCTestCase {
    func testProtectionFollowsTheReports() {
        var a = LossAdaptation(initialPercent: 5)
        XCTAssertEqual(a.expectedLossPercent, 5, "protects before anyone reported")
        // A lossy first report confirms it; clean reports then switch it off only after three in a row.
        XCTAssertTrue(a.update(reportedPercent: 2))
        XCTAssertEqual(a.expectedLossPercent, 3)
        XCTAssertFalse(a.update(reportedPercent: 0))
        XCTAssertFalse(a.update(reportedPercent: 0.2))
        XCTAssertTrue(a.update(reportedPercent: 0))
        XCTAssertEqual(a.expectedLossPercent, 0)
        // One lossy report turns it on, sized to the loss (3…10 %).
        XCTAssertTrue(a.update(reportedPercent: 1.2))
        XCTAssertEqual(a.expectedLossPercent, 3)
        XCTAssertTrue(a.update(reportedPercent: 7.4))
        XCTAssertEqual(a.expectedLossPercent, 7)
        XCTAssertTrue(a.update(reportedPercent: 30))
        XCTAssertEqual(a.expectedLossPercent, 10)
        // A clean report between lossy ones does not switch it off (the count restarts).
        XCTAssertFalse(a.update(reportedPercent: 0))
        XCTAssertFalse(a.update(reportedPercent: 0))
        XCTAssertTrue(a.update(reportedPercent: 4))
        XCTAssertFalse(a.update(reportedPercent: 0))
        XCTAssertFalse(a.update(reportedPercent: 0))
        XCTAssertEqual(a.expectedLossPercent, 4)
        XCTAssertTrue(a.update(reportedPercent: 0))
        XCTAssertEqual(a.expectedLossPercent, 0)
        // Off: 0.7 % is below the 1 % that turns it on.
        XCTAssertFalse(a.update(reportedPercent: 0.7))
        XCTAssertFalse(a.update(reportedPercent: .nan))
        XCTAssertEqual(a.expectedLossPercent, 0)
    }

    /// The protection a call starts with is a guess: the first clean report ends it (a clean
    /// call leaves SILK + FEC two seconds earlier), while one report showing loss keeps it.
    func testTheStartingGuessEndsWithTheFirstCleanReport() {
        var clean = LossAdaptation(initialPercent: 5)
        XCTAssertTrue(clean.update(reportedPercent: 0.3), "below 0.5 %: clean")
        XCTAssertEqual(clean.expectedLossPercent, 0)
        // Loss seen once: relaxing takes three clean reports from then on.
        XCTAssertTrue(clean.update(reportedPercent: 1.5))
        XCTAssertFalse(clean.update(reportedPercent: 0))
        XCTAssertFalse(clean.update(reportedPercent: 0))
        XCTAssertTrue(clean.update(reportedPercent: 0))

        var lossy = LossAdaptation(initialPercent: 5)
        XCTAssertTrue(lossy.update(reportedPercent: 8), "a first report showing loss sizes the protection")
        XCTAssertEqual(lossy.expectedLossPercent, 8)
        XCTAssertFalse(lossy.update(reportedPercent: 0))
        XCTAssertEqual(lossy.expectedLossPercent, 8, "one clean report after loss was seen is not enough")
    }

    func testCleanNetworkBitrateIsSpeechOnly() {
        let opus = OpusSettings()
        let speech = AudioProfileSettings(.speech, processing: ProcessingSettings(), opus: opus, environment: false)
        let music = AudioProfileSettings(.music, processing: ProcessingSettings(), opus: opus, environment: false)
        XCTAssertTrue(speech.adaptsToLoss)
        var a = LossAdaptation(initialPercent: 5)
        XCTAssertEqual(a.bitrate(for: speech), 96000)
        for _ in 0..<LossAdaptation.cleanReportsToRelax { _ = a.update(reportedPercent: 0) }
        XCTAssertEqual(a.bitrate(for: speech), 96000, "the transform layer's clean rate")
        XCTAssertEqual(a.bitrate(for: music), music.encoder.bitrate, "music keeps its rate")
        XCTAssertEqual(a.coding(for: music), EncoderCoding(bitrate: music.encoder.bitrate, expectedLossPercent: 0, musicSignal: true, complexity: 5))
        // A speech bitrate set below the clean rate is not raised.
        var low = opus
        low.bitrate = 32000
        XCTAssertEqual(a.bitrate(for: AudioProfileSettings(.speech, processing: ProcessingSettings(), opus: low, environment: false)), 32000)
        // FEC off or adaptation off: fixed.
        var fixed = opus
        fixed.adaptToLoss = false
        XCTAssertFalse(AudioProfileSettings(.speech, processing: ProcessingSettings(), opus: fixed, environment: false).adaptsToLoss)
        var noFEC = opus
        noFEC.inbandFEC = false
        XCTAssertFalse(AudioProfileSettings(.speech, processing: ProcessingSettings(), opus: noFEC, environment: false).adaptsToLoss)
        XCTAssertEqual(try opus.overridden(by: "adapt=0,clean_bitrate=48000").adaptToLoss, false)
        XCTAssertEqual(try opus.overridden(by: "clean_bitrate=48000").cleanNetworkBitrate, 48000)
        XCTAssertEqual(try opus.overridden(by: "clean_complexity=2").cleanNetworkComplexity, 2)
        XCTAssertThrowsError(try opus.overridden(by: "clean_complexity=11"))
        XCTAssertThrowsError(try opus.overridden(by: "clean_celt=yes"))
        XCTAssertThrowsError(try opus.overridden(by: "adapt=2"))
    }

    private func row(_ ssrc: UInt32, received: Int, lost: Int, late: Int = 0) -> StreamStatistics.Row {
        StreamStatistics.Row(ssrc: ssrc, received: received, lost: lost, late: late, fecRecovered: 0, concealed: 0,
                             jitterMs: 0, delayMs: 0, targetMs: 0, skipped: 0, shedMs: 0, stretched: 0, backlog: 0)
    }

    func testReceiveWindowsCountLossSinceTheLastReport() {
        var w = ReceiveLossWindow()
        XCTAssertTrue(w.next([row(1, received: 500, lost: 40)]).isEmpty, "the first window only sets the baseline")
        // 95 arrived (5 of them late) and 5 lost of 100: 50 permille.
        let r = w.next([row(1, received: 590, lost: 45, late: 5), row(2, received: 10, lost: 0)])
        XCTAssertEqual(r.map(\.ssrc), [1])
        XCTAssertEqual(r.first?.permille, 50)
        // A talker pausing (under 20 packets) gives no report; stream 2 has its baseline now.
        XCTAssertTrue(w.next([row(1, received: 600, lost: 45, late: 5), row(2, received: 50, lost: 0)]).map(\.ssrc) == [2])
        // Counters that went backwards (slot reused by a new stream) skip a window.
        XCTAssertTrue(w.next([row(1, received: 30, lost: 0)]).isEmpty)
        XCTAssertEqual(w.next([row(1, received: 130, lost: 0)]).first?.permille, 0)
    }

    func testFeedbackReachesTheLoopOncePerReport() {
        let f = LossFeedback()
        XCTAssertNil(f.applied)
        XCTAssertEqual(f.reportCount, 0)
        f.report(lostPermille: 2500)
        XCTAssertEqual(f.reportCount, 1)
        XCTAssertEqual(f.latestPermille, 1000, "clamped")
        f.report(lostPermille: -3)
        XCTAssertEqual(f.latestPermille, 0)
        f.publish(expectedLoss: 0, bitrate: 64000)
        XCTAssertEqual(f.applied?.expectedLossPercent, 0)
        XCTAssertEqual(f.applied?.bitrate, 64000)
    }
}
