#!/bin/sh
# Builds g722-swift (roomd's G.722 behind the oracle's command line) with swiftc -O, the
# optimization a release build uses, straight from the package's sources.
set -e
here=$(cd "$(dirname "$0")" && pwd)
swiftc -O -wmo -module-name RoomTelephony -o "$here/g722-swift" \
    "$here/../../Sources/RoomTelephony/"G722*.swift "$here/g722-swift.swift"
