import Foundation
import PackagePlugin

/// Writes the git commit the programs are built from into the target that uses this plugin
/// (`roomdCommit`), so `roomd --version` says which source a board runs. A prebuild command runs
/// at every build; it rewrites the file only when the commit changes, so nothing recompiles
/// otherwise. Outside a git checkout (a source tarball) the commit reads "unknown"; uncommitted
/// changes to tracked files add "-dirty".
@main
struct BuildInfo: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let script = #"""
            set -u
            src=$1 out=$2
            mkdir -p "$out"
            commit=$(git -C "$src" rev-parse --short=12 HEAD 2>/dev/null) || commit=unknown
            if [ "$commit" != unknown ] && [ -n "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
              commit="$commit-dirty"
            fi
            file="$out/BuildCommit.swift"
            printf '// Generated at build time by Sources/BuildInfoPlugin: do not edit.\npublic let roomdCommit = "%s"\n' "$commit" > "$file.new"
            if cmp -s "$file.new" "$file"; then rm -f "$file.new"; else mv "$file.new" "$file"; fi
            """#
        return [
            .prebuildCommand(
                displayName: "Build info: git commit of \(context.package.directoryURL.path)",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "buildinfo", context.package.directoryURL.path, output.path],
                outputFilesDirectory: output
            ),
        ]
    }
}
