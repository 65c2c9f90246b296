#!/usr/bin/env bash
# Installs roomd on a Raspberry Pi 4 + ReSpeaker 4-Mic Array board from its Debian package, and
# selects this board's profile. The package does the system setup (user and groups, /etc/roomd,
# the udev rule, the unit: docs/installation.md); this is a thin wrapper for the board:
#
#   sudo board/rpi-respeaker4/install.sh [--dry-run] [roomd_VERSION_ARCH.deb ...]
#
# Without a file it takes the newest roomd_*_<this machine's architecture>.deb in .build/debian/
# (where scripts/package puts them). Running it again changes nothing new.
set -euo pipefail
umask 022

PROG=${0##*/}
BOARD_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BOARD=${BOARD_DIR##*/}
REPO=$(cd "$BOARD_DIR/../.." && pwd)
PROFILE=/usr/share/roomd/boards/$BOARD
CONF=/etc/roomd/roomd.conf

usage() {
    cat <<EOF
usage: $PROG [--dry-run] [roomd_VERSION_ARCH.deb ...]

Installs roomd for board "$BOARD" (as root, on the board):
  1. apt-get install the roomd package (and any other .deb given): it creates user roomd and
     groups roomctl and gpio, /etc/roomd, /etc/roomd/roomd.conf, the udev rule for
     /dev/gpiochip*, and enables roomd.service (not started). Existing configuration is kept.
  2. board.path in $CONF -> $PROFILE, if it names another profile.
  3. Removes /etc/udev/rules.d/99-roomd.rules left by the earlier install.sh when it is the
     packaged rule (it would hide the package's updates to it).
Without a file: the newest .build/debian/roomd_*_\$(dpkg --print-architecture).deb (scripts/package).

  --dry-run   print what would be done; change nothing (root not needed)
  -h, --help  this text
EOF
}
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }
say() { printf '%s: %s\n' "$PROG" "$*"; }

DRY_RUN=0
DEBS=()
while (($#)); do
    case $1 in
        --dry-run) DRY_RUN=1 ;;
        -h | --help) usage; exit 0 ;;
        -*) die "unknown argument '$1' (see --help)" ;;
        *) DEBS+=("$1") ;;
    esac
    shift
done

for tool in dpkg dpkg-deb apt-get sed cmp; do
    command -v "$tool" >/dev/null || die "$tool not found (this installs Debian packages: Debian 12 or Raspberry Pi OS)"
done
ARCH=$(dpkg --print-architecture)
if ((${#DEBS[@]} == 0)); then
    newest=
    for deb in "$REPO"/.build/debian/roomd_*_"$ARCH".deb; do
        [[ -f $deb ]] || continue
        if [[ -z $newest ]] || dpkg --compare-versions "$(dpkg-deb -f "$deb" Version)" gt "$(dpkg-deb -f "$newest" Version)"; then
            newest=$deb
        fi
    done
    [[ -n $newest ]] || die "no roomd_*_$ARCH.deb in $REPO/.build/debian: build it with scripts/package (or give the file; docs/installation.md)"
    DEBS=("$newest")
fi
HAVE_ROOMD=0
for i in "${!DEBS[@]}"; do
    deb=${DEBS[$i]}
    [[ -f $deb ]] || die "$deb: no such file"
    deb=$(cd "$(dirname "$deb")" && pwd)/${deb##*/}   # apt-get wants a path, not a bare name
    DEBS[i]=$deb
    pkg=$(dpkg-deb -f "$deb" Package 2>/dev/null) || die "$deb is not a Debian package"
    arch=$(dpkg-deb -f "$deb" Architecture)
    [[ $arch == "$ARCH" || $arch == all ]] || die "$deb is for $arch; this machine is $ARCH (docs/arm64.md builds arm64 packages)"
    [[ $pkg == roomd ]] && HAVE_ROOMD=1
done
((HAVE_ROOMD)) || die "none of the files is the roomd package"
((DRY_RUN)) || ((EUID == 0)) || die "must run as root: it installs a package (--dry-run shows what it would do)"

# Runs a command, or only prints it with --dry-run.
run() {
    local shown
    shown=$(printf '%q ' "$@")
    if ((DRY_RUN)); then printf '(dry run) %s\n' "${shown% }"; return 0; fi
    printf '+ %s\n' "${shown% }"
    "$@" || die "failed (exit status $?): ${shown% }"
}

((DRY_RUN)) && say "dry run: nothing will be changed"
say "== 1. the package: ${DEBS[*]}"
# confold: a roomd.conf already on the board (edited, or written by the earlier install.sh) is
# kept; the package's version is put beside it as roomd.conf.dpkg-dist.
run env DEBIAN_FRONTEND=noninteractive apt-get install -y \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${DEBS[@]}"

say "== 2. board profile $BOARD"
if ((DRY_RUN)) && [[ ! -f $CONF ]]; then
    say "(dry run) $CONF comes with the package; board.path would be checked to be $PROFILE"
else
    [[ -f $PROFILE/board.conf ]] || die "the installed package has no profile $PROFILE"
    # board.path inside [board] (the package's file has it; an older one may say "board").
    current=$(sed -n '/^\[board\]/,/^\[/ s/^[[:space:]]*path[[:space:]]*=[[:space:]]*\([^#[:space:]]*\).*/\1/p' "$CONF" | tail -n 1)
    if [[ $current == "$PROFILE" ]]; then
        say "unchanged: board.path = $PROFILE"
    elif [[ -z $current ]]; then
        die "$CONF has no [board] path: add  [board]  path = $PROFILE  (docs/installation.md)"
    else
        say "board.path was $current"
        run sed -i "/^\[board\]/,/^\[/ s|^\([[:space:]]*path[[:space:]]*=[[:space:]]*\)[^#[:space:]]*|\1$PROFILE|" "$CONF"
    fi
fi

say "== 3. rules left by the earlier install.sh"
OLD_RULES=/etc/udev/rules.d/99-roomd.rules
if [[ ! -e $OLD_RULES ]]; then
    say "none"
elif cmp -s "$OLD_RULES" "$BOARD_DIR/99-roomd.rules"; then
    run rm "$OLD_RULES"
else
    say "kept $OLD_RULES: it differs from the packaged rule (compare with /lib/udev/rules.d/99-roomd.rules; it wins while it exists)"
fi

if ((DRY_RUN)); then say "== done (dry run: nothing changed)"; exit 0; fi
say "== done"
[[ -e /etc/roomd/token ]] ||
    say "next: the room token (install -m 0640 -o root -g roomd token.jwt /etc/roomd/token) and [room] server / token_file in $CONF"
say "then: systemctl start roomd; roomctl selftest (docs/installation.md)"
