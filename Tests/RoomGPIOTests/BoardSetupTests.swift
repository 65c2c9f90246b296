import Foundation
import Glibc
import RoomSettings
import XCTest

/// The board's system setup: systemd/roomd.sysusers, board/rpi-respeaker4/99-roomd.rules, the
/// configuration the roomd package ships and board/rpi-respeaker4/install.sh (docs/installation.md).
/// Everything runs against temporary roots (`--root`), dry runs, or, for udev, inside a private
/// mount namespace with a fake /sys and /dev: the machine's own /etc, /run and /dev are never
/// touched. The package installed for real: PackageLifecycleTests.
final class BoardSetupTests: XCTestCase {
    /// Repository root: this file is <root>/Tests/RoomGPIOTests/BoardSetupTests.swift.
    static let repo = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static let sysusers = repo + "/systemd/roomd.sysusers"
    static let rules = repo + "/board/rpi-respeaker4/99-roomd.rules"
    static let installer = repo + "/board/rpi-respeaker4/install.sh"

    // MARK: - systemd-sysusers

    func testSysusersCreatesTheUserAndGroupsInAnEmptyRoot() throws {
        let sysusers = try tool("systemd-sysusers")
        let root = try tempRoot()
        try FileManager.default.createDirectory(atPath: root + "/etc", withIntermediateDirectories: true)
        let r = try run(sysusers, ["--root=" + root, Self.sysusers])
        XCTAssertEqual(r.status, 0, r.stderr)

        let users = try Passwd(root)
        let groups = try Groups(root)
        let roomd = try XCTUnwrap(users.entries["roomd"], "no user roomd in \(root)/etc/passwd")
        XCTAssertTrue((1..<1000).contains(roomd.uid), "roomd must be a system user (uid \(roomd.uid))")
        XCTAssertTrue(roomd.shell.hasSuffix("/nologin"), "no login shell for roomd: \(roomd.shell)")
        XCTAssertEqual(groups.entries["roomd"]?.gid, roomd.gid, "primary group roomd")
        for name in ["roomctl", "gpio", "audio"] {
            let g = try XCTUnwrap(groups.entries[name], "group \(name) not created")
            XCTAssertTrue((1..<1000).contains(g.gid), "\(name) must be a system group (gid \(g.gid))")
        }
        // The unit relies on exactly these memberships, and nothing more.
        XCTAssertEqual(groups.memberships(of: "roomd"), ["audio", "gpio", "roomctl"])
        XCTAssertEqual(Set(groups.entries.values.map(\.gid)).count, groups.entries.count, "GIDs must be distinct")

        // A second run (every boot runs systemd-sysusers) changes nothing. It has to read the
        // mode-0000 gshadow it wrote, which only root can.
        guard getuid() == 0 else { throw XCTSkip("second systemd-sysusers run needs root (gshadow is mode 0000)") }
        let before = try [root + "/etc/passwd", root + "/etc/group"].map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        XCTAssertEqual(try run(sysusers, ["--root=" + root, Self.sysusers]).status, 0)
        let after = try [root + "/etc/passwd", root + "/etc/group"].map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        XCTAssertEqual(before, after, "systemd-sysusers is not idempotent with roomd.sysusers")
    }

    /// Debian has audio = 29 and no gpio; Raspberry Pi OS has gpio (from its image build) with
    /// the login user in it. Existing groups keep their GIDs and members; roomd is added.
    func testSysusersKeepsExistingDebianAndRaspberryPiOSGroups() throws {
        let sysusers = try tool("systemd-sysusers")
        let root = try tempRoot()
        try FileManager.default.createDirectory(atPath: root + "/etc", withIntermediateDirectories: true)
        try "root:x:0:0:root:/root:/bin/bash\npi:x:1000:1000:,,,:/home/pi:/bin/bash\n"
            .write(toFile: root + "/etc/passwd", atomically: true, encoding: .utf8)
        try "root:x:0:\naudio:x:29:pi\ngpio:x:997:pi\npi:x:1000:\n"
            .write(toFile: root + "/etc/group", atomically: true, encoding: .utf8)
        let r = try run(sysusers, ["--root=" + root, Self.sysusers])
        XCTAssertEqual(r.status, 0, r.stderr)

        let groups = try Groups(root)
        XCTAssertEqual(groups.entries["audio"]?.gid, 29)
        XCTAssertEqual(groups.entries["audio"]?.members, ["pi", "roomd"])
        XCTAssertEqual(groups.entries["gpio"]?.gid, 997)
        XCTAssertEqual(groups.entries["gpio"]?.members, ["pi", "roomd"])
        XCTAssertNotNil(groups.entries["roomctl"])
        XCTAssertEqual(groups.memberships(of: "pi"), ["audio", "gpio"], "pi's groups must not change")
        let users = try Passwd(root)
        XCTAssertNotNil(users.entries["roomd"])
        XCTAssertEqual(users.entries["pi"]?.uid, 1000)
    }

    // MARK: - udev rules

    func testRulesFileIsWellFormedAndMatchesTheSysusersGroups() throws {
        let rules = try UdevRules.parse(String(contentsOfFile: Self.rules, encoding: .utf8))
        XCTAssertFalse(rules.isEmpty, "no rules in \(Self.rules)")

        // Every group a rule hands out is one that roomd.sysusers creates (or Debian's audio).
        let sysusersText = try String(contentsOfFile: Self.sysusers, encoding: .utf8)
        let declared = Set(sysusersText.split(separator: "\n").compactMap { line -> String? in
            let f = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            return f.count >= 2 && (f[0] == "g" || f[0] == "m") ? String(f[f[0] == "g" ? 1 : 2]) : nil
        })
        for rule in rules {
            for p in rule.pairs where p.key == "GROUP" {
                XCTAssertTrue(declared.contains(p.value), "line \(rule.line): group \(p.value) is not in roomd.sysusers")
            }
            for p in rule.pairs where p.key == "MODE" {
                let mode = try XCTUnwrap(Int(p.value, radix: 8), "line \(rule.line): MODE \(p.value) is not octal")
                XCTAssertEqual(mode & 0o007, 0, "line \(rule.line): MODE \(p.value) gives access to every user")
            }
        }

        // The GPIO chips (what libgpiod opens) go to gpio, 0660.
        let chip = rules.filter { $0.matches(["SUBSYSTEM": "gpio", "KERNEL": "gpiochip0"]) }
        XCTAssertEqual(chip.count, 1, "exactly one rule for /dev/gpiochip0")
        XCTAssertEqual(chip.first?.assignment("GROUP"), "gpio")
        XCTAssertEqual(chip.first?.assignment("MODE"), "0660")
        // ... and it must not catch other GPIO-subsystem names by accident.
        XCTAssertTrue(rules.filter { $0.matches(["SUBSYSTEM": "gpio", "KERNEL": "gpio17"]) }.isEmpty)
    }

    /// The checker above must be able to fail.
    func testRulesCheckerRejectsBrokenLines() {
        let broken = [
            #"SUBSYSTEM=="gpio" GROUP="gpio""#,                 // missing comma
            #"SUBSYSTEM=="gpio", KERNAL=="gpiochip*", MODE="0660""#, // unknown key
            #"SUBSYSTEM="gpio", GROUP="gpio""#,                  // assignment to a match-only key
            #"SUBSYSTEM=="gpio", GROUP=="gpio""#,                // comparison of an assign-only key
            #"SUBSYSTEM=="gpio", GROUP="gpio"#,                  // unterminated value
            #"SUBSYSTEM=="gpio", KERNEL=="gpiochip*""#,          // matches but assigns nothing
            #"GROUP="gpio", MODE="0660""#,                       // assigns to every device
        ]
        for line in broken {
            XCTAssertThrowsError(try UdevRules.parse(line), line)
        }
        XCTAssertNoThrow(try UdevRules.parse("# comment\n\n" + #"SUBSYSTEM=="gpio", KERNEL=="gpiochip[0-9]*", \"#
            + "\n  " + #"GROUP="gpio", MODE="0660""#))
    }

    /// `udevadm verify` exists from systemd 253 (Debian 12 has 252): use it where it does.
    func testUdevadmVerifyWhereAvailable() throws {
        let udevadm = try tool("udevadm")
        let help = try run(udevadm, ["--help"])
        guard help.stdout.contains("verify") else { throw XCTSkip("udevadm has no verify (systemd < 253)") }
        let r = try run(udevadm, ["verify", "--resolve-names=never", Self.rules])
        XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
    }

    /// Runs the real udev rule set (the machine's /usr/lib/udev/rules.d plus ours) with
    /// `udevadm test` against fake devices, in a private mount namespace: tmpfs over /run, /sys
    /// and /dev, a copy of /etc/group with a gpio group bound over /etc/group. udevadm 252 sets
    /// the node's owner and mode in test mode, so the result is checked on the node itself.
    func testUdevGivesTheGpioChipToGroupGpioAndSoundIsAlreadyAudio() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root for a private mount namespace") }
        let udevadm = try tool("udevadm")
        let unshare = try tool("unshare")
        let dir = try tempRoot()
        var group = try String(contentsOfFile: "/etc/group", encoding: .utf8)
        if !group.split(separator: "\n").contains(where: { $0.hasPrefix("gpio:") }) { group += "gpio:x:4321:\n" }
        try group.write(toFile: dir + "/group", atomically: true, encoding: .utf8)
        let groups = try Groups(fileAt: dir + "/group")
        let gpioGID = try XCTUnwrap(groups.entries["gpio"]?.gid)
        let audioGID = try XCTUnwrap(groups.entries["audio"]?.gid, "no audio group on this machine")
        try Self.namespaceScript.write(toFile: dir + "/udev.sh", atomically: true, encoding: .utf8)
        let broken = try String(contentsOfFile: Self.rules, encoding: .utf8).replacingOccurrences(of: "KERNEL==", with: "KERNAL==")
        try broken.write(toFile: dir + "/broken.rules", atomically: true, encoding: .utf8)

        func scenario(_ rules: String) throws -> (nodes: [String: String], log: String) {
            let r = try run(unshare, ["--mount", "--propagation", "private", "/bin/bash", dir + "/udev.sh", rules, dir + "/group", udevadm])
            let log = r.stdout + r.stderr
            if log.contains("outside of sysfs") { throw XCTSkip("this udevadm refuses a fake /sys") }
            if r.status != 0 && log.contains("mount") { throw XCTSkip("cannot mount in a private namespace here: \(log)") }
            XCTAssertEqual(r.status, 0, log)
            var nodes: [String: String] = [:]
            for line in log.split(separator: "\n") where line.hasPrefix("NODE ") {
                let f = line.split(separator: " ")
                if f.count == 5 { nodes[String(f[1])] = "\(f[2]) \(f[3]) \(f[4])" }
            }
            return (nodes, log)
        }

        let ours = try scenario(Self.rules)
        let sound = ours.nodes["/dev/snd/pcmC0D0c"]
        if sound == "600 0 0" { throw XCTSkip("udevadm test on this systemd does not apply permissions") }
        XCTAssertEqual(ours.nodes["/dev/gpiochip0"], "660 0 \(gpioGID)", ours.log)
        XCTAssertEqual(sound, "660 0 \(audioGID)", "Debian's own rules give ALSA nodes to audio, 0660: \(ours.log)")
        let complaints = ours.log.split(separator: "\n").filter {
            $0.contains("99-roomd.rules") && !$0.contains("Reading rules file") && !$0.contains(" GROUP ") && !$0.contains(" MODE ")
        }
        XCTAssertEqual(complaints, [], "udev complains about the rules")

        // Without our file the chip stays root-only: the rule above is what does it.
        let none = try scenario("")
        XCTAssertEqual(none.nodes["/dev/gpiochip0"], "600 0 0", none.log)
        // A misspelt key is reported by udev and the rule is dropped: the checks above would see it.
        let bad = try scenario(dir + "/broken.rules")
        XCTAssertTrue(bad.log.contains("99-roomd.rules:") && bad.log.contains("Invalid key"), bad.log)
        XCTAssertEqual(bad.nodes["/dev/gpiochip0"], "600 0 0")
    }

    /// Runs inside `unshare --mount`: $1 rules file to install ("" for none), $2 group file,
    /// $3 udevadm. It refuses to create anything unless /run, /sys and /dev are its own tmpfs.
    static let namespaceScript = #"""
    set -euo pipefail
    rules=$1 groupfile=$2 udevadm=$3
    mount -t tmpfs tmpfs /run
    mount -t tmpfs tmpfs /sys
    mount -t tmpfs tmpfs /dev
    mount --bind "$groupfile" /etc/group
    for m in /run /sys /dev; do
        [ "$(stat -f -c %T "$m")" = tmpfs ] || { echo "ABORT: $m is not the private tmpfs"; exit 3; }
    done
    mknod -m 0666 /dev/null c 1 3
    mkdir -p /run/udev/rules.d
    if [ -n "$rules" ]; then cp "$rules" /run/udev/rules.d/99-roomd.rules; fi
    # A Raspberry Pi 4 SoC GPIO chip and an ALSA capture PCM, as the kernel would announce them.
    gpio=/sys/devices/platform/soc/fe200000.gpio/gpiochip0
    mkdir -p "$gpio" /sys/bus/gpio/devices
    printf 'MAJOR=254\nMINOR=0\nDEVNAME=gpiochip0\n' >"$gpio/uevent"
    ln -s /sys/bus/gpio "$gpio/subsystem"
    mknod -m 0600 /dev/gpiochip0 c 254 0
    snd=/sys/devices/platform/soc/soc:sound/sound/card0/pcmC0D0c
    mkdir -p "$snd" /sys/class/sound
    printf 'MAJOR=116\nMINOR=24\nDEVNAME=snd/pcmC0D0c\n' >"$snd/uevent"
    ln -s /sys/class/sound "$snd/subsystem"
    mkdir /dev/snd
    mknod -m 0600 /dev/snd/pcmC0D0c c 116 24
    for d in "$gpio" "$snd"; do
        SYSTEMD_DEVICE_VERIFY_SYSFS=0 "$udevadm" test --action=add "$d" 2>&1
    done
    for n in /dev/gpiochip0 /dev/snd/pcmC0D0c; do echo "NODE $n $(stat -c '%a %u %g' "$n")"; done
    """#

    // MARK: - install.sh

    // MARK: - The package's configuration and install.sh (a wrapper around the package)

    /// /etc/roomd/roomd.conf as the roomd package ships it (scripts/packaging/roomd.conf): roomd
    /// parses it, it uses the board profile the package installs for this board, and the control
    /// group the sysusers file creates. The installed package itself: PackageLifecycleTests.
    func testPackagedConfigurationSelectsTheBoardProfile() throws {
        let text = try String(contentsOfFile: Self.repo + "/scripts/packaging/roomd.conf", encoding: .utf8)
        let conf = try ApplianceConfiguration.parse(text: text, file: "/etc/roomd/roomd.conf", directory: "/etc/roomd")
        XCTAssertEqual(conf.boardPath, "/usr/share/roomd/boards/rpi-respeaker4")
        XCTAssertEqual(conf.controlGroup, "roomctl")
        XCTAssertTrue(conf.servers.isEmpty, "the shipped file must join no room (no server, no token yet)")
        // scripts/package installs board/<name>/ as /usr/share/roomd/boards/<name>/.
        let profile = try BoardProfile.parse(text: String(contentsOfFile: Self.repo + "/board/rpi-respeaker4/board.conf", encoding: .utf8),
                                             file: "board.conf")
        XCTAssertEqual(profile.name, "rpi-respeaker4")
        let packager = try String(contentsOfFile: Self.repo + "/scripts/package", encoding: .utf8)
        XCTAssertTrue(packager.contains("BOARDS=(rpi-respeaker4"), "scripts/package no longer packages board rpi-respeaker4")
    }

    /// install.sh installs the package with apt-get and checks the board profile; --dry-run shows
    /// that and changes nothing, and a wrong file is refused before anything happens. The real
    /// installation through it runs in PackageLifecycleTests.
    func testInstallerDryRunNamesThePackageAndRefusesWrongFiles() throws {
        let dpkgDeb = try tool("dpkg-deb")
        let dpkg = try tool("dpkg")
        let arch = try run(dpkg, ["--print-architecture"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let dir = try tempRoot()
        /// A package with nothing in it but its name and architecture.
        func fakeDeb(_ name: String, _ architecture: String) throws -> String {
            let tree = dir + "/\(name)-\(architecture)"
            try FileManager.default.createDirectory(atPath: tree + "/DEBIAN", withIntermediateDirectories: true)
            try """
                Package: \(name)
                Version: 0.0.1
                Architecture: \(architecture)
                Maintainer: test <test@example.invalid>
                Description: empty test package

                """.write(toFile: tree + "/DEBIAN/control", atomically: true, encoding: .utf8)
            let deb = dir + "/\(name)_0.0.1_\(architecture).deb"
            let r = try run(dpkgDeb, ["--root-owner-group", "--build", tree, deb])
            XCTAssertEqual(r.status, 0, r.stdout + r.stderr)
            return deb
        }
        let roomd = try fakeDeb("roomd", arch)
        let roomserver = try fakeDeb("roomserver", arch)
        let foreign = try fakeDeb("roomd", arch == "arm64" ? "amd64" : "arm64")

        let dry = try run("/bin/bash", [Self.installer, "--dry-run", roomd, roomserver])
        XCTAssertEqual(dry.status, 0, dry.stdout + dry.stderr)
        for expected in ["(dry run) env DEBIAN_FRONTEND=noninteractive apt-get install -y", "--force-confold", roomd, roomserver,
                         "/usr/share/roomd/boards/rpi-respeaker4", "dry run: nothing changed"] {
            XCTAssertTrue(dry.stdout.contains(expected), "dry run does not mention \(expected):\n\(dry.stdout)")
        }
        XCTAssertFalse(dry.stdout.contains("\n+ "), "the dry run ran a command:\n\(dry.stdout)")

        for (args, message) in [([foreign], "is for \(arch == "arm64" ? "amd64" : "arm64"); this machine is \(arch)"),
                                ([roomserver], "none of the files is the roomd package"),
                                ([dir + "/nope.deb"], dir + "/nope.deb: no such file"),
                                (["--rooot"], "unknown argument '--rooot'")] {
            let r = try run("/bin/bash", [Self.installer, "--dry-run"] + args)
            XCTAssertNotEqual(r.status, 0, "\(args) accepted")
            XCTAssertTrue(r.stderr.contains(message), "\(args): \(r.stderr)")
        }
    }

    // MARK: - Helpers

    func tool(_ name: String) throws -> String {
        for dir in ["/usr/bin", "/bin", "/usr/sbin", "/sbin"] where FileManager.default.isExecutableFile(atPath: dir + "/" + name) {
            return dir + "/" + name
        }
        throw XCTSkip("\(name) is not installed")
    }

    /// A fresh directory, removed after the test.
    func tempRoot() throws -> String {
        var template = Array("/tmp/roomd-board-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw NSError(domain: "mkdtemp", code: Int(errno))
        }
        let dir = String(cString: p)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        return dir
    }

    /// Runs a command to completion (runCommand) with a fresh scratch directory.
    func run(_ exe: String, _ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        try runCommand(exe, args, scratch: try tempRoot())
    }
}

// MARK: - /etc/passwd and /etc/group of a root

fileprivate struct Passwd {
    struct Entry { var uid: UInt32; var gid: UInt32; var shell: String }
    var entries: [String: Entry] = [:]

    init(_ root: String) throws {
        for line in try String(contentsOfFile: root + "/etc/passwd", encoding: .utf8).split(separator: "\n") {
            let f = line.split(separator: ":", omittingEmptySubsequences: false)
            guard f.count == 7, let uid = UInt32(f[2]), let gid = UInt32(f[3]) else { continue }
            entries[String(f[0])] = Entry(uid: uid, gid: gid, shell: String(f[6]))
        }
    }
}

fileprivate struct Groups {
    struct Entry { var gid: UInt32; var members: [String] }
    var entries: [String: Entry] = [:]

    init(_ root: String) throws { try self.init(fileAt: root + "/etc/group") }

    init(fileAt path: String) throws {
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            let f = line.split(separator: ":", omittingEmptySubsequences: false)
            guard f.count == 4, let gid = UInt32(f[2]) else { continue }
            entries[String(f[0])] = Entry(gid: gid, members: f[3].split(separator: ",").map(String.init))
        }
    }

    /// Supplementary groups that list `user`, sorted.
    func memberships(of user: String) -> [String] {
        entries.filter { $0.value.members.contains(user) }.map(\.key).sorted()
    }
}

// MARK: - A strict reader for udev rules files

/// Stricter than udev itself (which accepts a missing comma): every rule line is
/// `KEY op "value"` pairs separated by commas, keys from udev(7), comparisons (==, !=) only on
/// keys that can be compared, assignments (=, +=, -=, :=) only on keys that can be assigned, and
/// each rule both matches something and assigns something.
fileprivate enum UdevRules {
    struct Pair { var key: String; var op: String; var value: String }
    struct Rule {
        var line: Int
        var pairs: [Pair]

        func assignment(_ key: String) -> String? { pairs.last { $0.key == key && ($0.op == "=" || $0.op == ":=") }?.value }

        /// Whether a device with these properties passes every comparison this rule makes on them
        /// (comparisons on keys not given count as failing).
        func matches(_ device: [String: String]) -> Bool {
            for p in pairs where p.op == "==" || p.op == "!=" {
                guard let v = device[p.key] else { return false }
                let hit = p.value.split(separator: "|").contains { fnmatch(String($0), v, 0) == 0 }
                if hit != (p.op == "==") { return false }
            }
            return true
        }
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    static let matchOnly: Set<String> = ["ACTION", "DEVPATH", "KERNEL", "KERNELS", "SUBSYSTEM", "SUBSYSTEMS", "DRIVER",
                                         "DRIVERS", "ATTRS", "TAGS", "TEST", "PROGRAM", "RESULT", "CONST"]
    static let assignOnly: Set<String> = ["OWNER", "GROUP", "MODE", "SECLABEL", "RUN", "LABEL", "GOTO", "IMPORT", "OPTIONS"]
    static let both: Set<String> = ["NAME", "SYMLINK", "ENV", "TAG", "ATTR", "SYSCTL"]
    static let withAttribute: Set<String> = ["ATTR", "ATTRS", "SYSCTL", "ENV", "TEST", "CONST", "SECLABEL", "RUN", "IMPORT"]

    static func parse(_ text: String) throws -> [Rule] {
        var rules: [Rule] = []
        var pending = ""
        var startLine = 0
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if pending.isEmpty && (line.isEmpty || line.hasPrefix("#")) { continue }
            if pending.isEmpty { startLine = index + 1 }
            if line.hasSuffix("\\") { pending += line.dropLast() + " "; continue }
            pending += line
            rules.append(try parseRule(pending, line: startLine))
            pending = ""
        }
        if !pending.isEmpty { throw Failure(description: "line \(startLine): continuation at the end of the file") }
        return rules
    }

    static func parseRule(_ text: String, line: Int) throws -> Rule {
        func fail(_ what: String) -> Failure { Failure(description: "line \(line): \(what): \(text)") }
        let chars = Array(text)
        var i = 0
        var pairs: [Pair] = []
        func skipSpaces() { while i < chars.count && (chars[i] == " " || chars[i] == "\t") { i += 1 } }
        while true {
            skipSpaces()
            if i == chars.count { break }
            if !pairs.isEmpty {
                guard chars[i] == "," else { throw fail("expected a comma after \(pairs.last!.key)") }
                i += 1
                skipSpaces()
            }
            var key = ""
            while i < chars.count, chars[i].isUppercase || chars[i] == "_" { key.append(chars[i]); i += 1 }
            guard !key.isEmpty else { throw fail("expected a key at column \(i + 1)") }
            if i < chars.count, chars[i] == "{" {
                guard withAttribute.contains(key), let close = chars[i...].firstIndex(of: "}"), close > i + 1 else {
                    throw fail("\(key) takes no {attribute} or it is empty")
                }
                i = close + 1
            } else if withAttribute.contains(key) && !["RUN", "IMPORT", "TEST"].contains(key) {
                throw fail("\(key) needs an {attribute}")
            }
            guard matchOnly.contains(key) || assignOnly.contains(key) || both.contains(key) else { throw fail("unknown key \(key)") }
            var op = ""
            for candidate in ["==", "!=", "+=", "-=", ":=", "="] where String(chars[i..<min(i + candidate.count, chars.count)]) == candidate {
                op = candidate
                break
            }
            guard !op.isEmpty else { throw fail("\(key) has no operator") }
            i += op.count
            let isMatch = op == "==" || op == "!="
            if isMatch && assignOnly.contains(key) { throw fail("\(key) can only be assigned, not compared with \(op)") }
            if !isMatch && matchOnly.contains(key) { throw fail("\(key) can only be compared, not assigned with \(op)") }
            guard i < chars.count, chars[i] == "\"" else { throw fail("the value of \(key) is not in double quotes") }
            i += 1
            var value = ""
            var closed = false
            while i < chars.count {
                if chars[i] == "\\" && i + 1 < chars.count { value.append(chars[i + 1]); i += 2; continue }
                if chars[i] == "\"" { closed = true; i += 1; break }
                value.append(chars[i]); i += 1
            }
            guard closed else { throw fail("unterminated value of \(key)") }
            pairs.append(Pair(key: key, op: op, value: value))
        }
        guard pairs.contains(where: { $0.op == "==" || $0.op == "!=" }) else { throw fail("the rule matches every device") }
        guard pairs.contains(where: { $0.op != "==" && $0.op != "!=" }) else { throw fail("the rule assigns nothing") }
        return Rule(line: line, pairs: pairs)
    }
}
