#!/usr/bin/env bash
# Sets up roomd on a Raspberry Pi 4 + ReSpeaker 4-Mic Array board (Debian 12 or Raspberry Pi OS):
# user and groups (sysusers.d), /etc/roomd with its owners and modes (tmpfiles.d), the board
# profile, a first roomd.conf, the udev rules for /dev/gpiochip*, and the systemd unit.
# Idempotent: a second run changes nothing and says "unchanged". Installer's guide:
# docs/installation.md.
#
#   sudo board/rpi-respeaker4/install.sh [--dry-run] [--root DIR] [--bin-dir DIR] [--no-enable]
set -euo pipefail
umask 022

PROG=${0##*/}
BOARD_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BOARD_NAME=${BOARD_DIR##*/}
REPO=$(cd "$BOARD_DIR/../.." && pwd)

usage() {
    cat <<EOF
usage: $PROG [--dry-run] [--root DIR] [--bin-dir DIR] [--no-enable]

Installs roomd's system setup for board "$BOARD_NAME" (run as root, on the board):
  - user roomd and groups roomctl, gpio (systemd-sysusers, /usr/lib/sysusers.d/roomd.conf);
    roomd joins audio, gpio and roomctl
  - /etc/roomd 0750 root:roomd (systemd-tmpfiles, /usr/lib/tmpfiles.d/roomd.conf), the board
    profile in /etc/roomd/board, and /etc/roomd/roomd.conf if there is none
  - /etc/udev/rules.d/99-roomd.rules (/dev/gpiochip* -> group gpio, 0660); reloads udev and
    re-triggers the gpio devices when udevd runs
  - /usr/lib/systemd/system/roomd.service, enabled (not started)

  --dry-run      print what would be done; change nothing (root not needed)
  --root DIR     install into DIR instead of / (an image or a staging tree); udev and the
                 running systemd are left alone
  --bin-dir DIR  also install DIR/roomd and DIR/roomctl to /usr/bin (e.g. .build/release)
  --no-enable    do not enable roomd.service
  -h, --help     this text
EOF
}

die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }
say() { printf '%s: %s\n' "$PROG" "$*"; }

ROOT=/
DRY_RUN=0
BIN_DIR=
ENABLE=1
while (($#)); do
    case $1 in
        --dry-run) DRY_RUN=1 ;;
        --root) (($# >= 2)) || die "--root needs a directory"; ROOT=$2; shift ;;
        --root=*) ROOT=${1#--root=} ;;
        --bin-dir) (($# >= 2)) || die "--bin-dir needs a directory"; BIN_DIR=$2; shift ;;
        --bin-dir=*) BIN_DIR=${1#--bin-dir=} ;;
        --no-enable) ENABLE=0 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
done

[[ -n $ROOT ]] || die "--root: empty directory name"
[[ -d $ROOT ]] || die "--root $ROOT: no such directory"
ROOT=$(cd "$ROOT" && pwd)
LIVE=0
ROOT_OPT=()
if [[ $ROOT == / ]]; then LIVE=1; else ROOT_OPT=(--root="$ROOT"); fi

# The path of an installed file inside the target root.
target() { printf '%s%s' "${ROOT%/}" "$1"; }

SYSUSERS_SRC=$REPO/systemd/roomd.sysusers
TMPFILES_SRC=$REPO/systemd/roomd.tmpfiles
UNIT_SRC=$REPO/systemd/roomd.service
RULES_SRC=$BOARD_DIR/99-roomd.rules
for f in "$SYSUSERS_SRC" "$TMPFILES_SRC" "$UNIT_SRC" "$RULES_SRC" "$BOARD_DIR/board.conf"; do
    [[ -f $f ]] || die "missing $f: run $PROG from a roomd source tree (board/$BOARD_NAME/$PROG)"
done
if [[ -n $BIN_DIR ]]; then
    for b in roomd roomctl; do
        [[ -x $BIN_DIR/$b ]] || die "--bin-dir $BIN_DIR: no executable $b there (build with: swift build -c release)"
    done
fi
for tool in systemd-sysusers systemd-tmpfiles systemctl install cmp stat awk; do
    command -v "$tool" >/dev/null || die "$tool not found (needed to install; Debian package: $(
        case $tool in systemd*) echo systemd ;; cmp) echo diffutils ;; awk) echo mawk ;; *) echo coreutils ;; esac))"
done
if ((!DRY_RUN)) && ((EUID != 0)); then
    die "must run as root: it creates a system user and writes /etc and /usr/lib (--dry-run shows what it would do)"
fi

# Runs a command, or only prints it with --dry-run. A failure stops the script naming the command.
run() {
    local shown
    shown=$(printf '%q ' "$@")
    if ((DRY_RUN)); then
        printf '(dry run) %s\n' "${shown% }"
        return 0
    fi
    printf '+ %s\n' "${shown% }"
    local rc=0
    "$@" || rc=$?
    ((rc == 0)) || die "failed (exit status $rc): ${shown% }"
}

# GID of a group in the target root's /etc/group (not the host's: with --root they differ).
# Before the group exists (only possible with --dry-run) its name stands in.
gid_of() {
    local gid=
    [[ -f $(target /etc/group) ]] && gid=$(awk -F: -v n="$1" '$1 == n { print $3; exit }' "$(target /etc/group)")
    if [[ -z $gid ]]; then
        ((DRY_RUN)) || die "group $1 is missing from $(target /etc/group) after systemd-sysusers"
        gid=$1
    fi
    printf '%s' "$gid"
}

# Does PATH exist with mode MODE (octal, e.g. 0644), owner root and group GID?
has_mode() {
    [[ -e $1 ]] || return 1
    [[ $(stat -c '%a:%u:%g' "$1") == "$(printf '%o' "$((8#$2))"):0:$3" ]]
}

# Installs SRC as DEST (a path inside the target root) with MODE, owned by root and group GID.
# Nothing happens when it is already there, identical and with the right mode and owners.
install_file() {
    local src=$1 dest=$2 mode=$3 gid=${4:-0} path
    path=$(target "$dest")
    if [[ -f $path ]] && cmp -s "$src" "$path" && has_mode "$path" "$mode" "$gid"; then
        say "unchanged: $dest"
        return 0
    fi
    run install -D -m "$mode" -o 0 -g "$gid" "$src" "$path"
}

# Like install_file for configuration the installer may have edited: an existing file that
# differs is kept (only its mode and owners are corrected), and the difference is reported.
install_config() {
    local src=$1 dest=$2 mode=$3 gid=${4:-0} path
    path=$(target "$dest")
    if [[ -f $path ]] && ! cmp -s "$src" "$path"; then
        say "kept local changes: $dest differs from $src (compare: diff $src $path)"
        if ! has_mode "$path" "$mode" "$gid"; then
            run chown "0:$gid" "$path"
            run chmod "$mode" "$path"
        fi
        return 0
    fi
    install_file "$src" "$dest" "$mode" "$gid"
}

# Creates directory DEST (inside the target root) with MODE, root and group GID, or fixes them.
install_dir() {
    local dest=$1 mode=$2 gid=${3:-0} path
    path=$(target "$dest")
    if [[ -d $path ]] && has_mode "$path" "$mode" "$gid"; then
        say "unchanged: $dest/"
        return 0
    fi
    run install -d -m "$mode" -o 0 -g "$gid" "$path"
}

((DRY_RUN)) && say "dry run: nothing will be changed"
say "board $BOARD_NAME from $BOARD_DIR into $ROOT"

# 1. Users and groups. They must exist before udev loads the rules (it resolves GROUP= names
# when it reads them) and before the unit starts (SupplementaryGroups=).
say "== user roomd, groups roomctl and gpio"
install_file "$SYSUSERS_SRC" /usr/lib/sysusers.d/roomd.conf 0644
[[ -d $(target /etc) ]] || run mkdir -p "$(target /etc)"   # systemd-sysusers needs it
run systemd-sysusers "${ROOT_OPT[@]}" roomd.conf
if ((DRY_RUN)); then
    # systemd-sysusers' own read-only preview of the accounts it would create (none when all exist).
    systemd-sysusers --dry-run "${ROOT_OPT[@]}" "$SYSUSERS_SRC" 2>&1 | sed 's/^/    /' || true
fi
ROOMD_GID=$(gid_of roomd)

# 2. /etc/roomd: owner, modes, the board profile and a first roomd.conf.
say "== /etc/roomd"
install_file "$TMPFILES_SRC" /usr/lib/tmpfiles.d/roomd.conf 0644
run systemd-tmpfiles "${ROOT_OPT[@]}" --create roomd.conf
install_dir /etc/roomd/board 0755
for f in "$BOARD_DIR"/*; do
    name=${f##*/}
    [[ -f $f ]] || continue
    case $name in
        *.sh | *.rules) continue ;;   # installer material, not part of the profile
    esac
    install_config "$f" "/etc/roomd/board/$name" 0644
done
conf_tmp=$(mktemp "${TMPDIR:-/tmp}/roomd.conf.XXXXXX")
trap 'rm -f "$conf_tmp"' EXIT
cat >"$conf_tmp" <<EOF
# roomd's configuration; every key: docs/config.md. Written once by board/$BOARD_NAME/$PROG,
# which never overwrites it. After an edit: "systemctl reload roomd" or "roomctl reload".
# To join a room, add a [room] section: server = host:port and token_file = token.

[board]
# The profile installed next to this file (relative paths are relative to /etc/roomd).
path = board

[control]
# Members of this group may change the appliance through roomctl (docs/installation.md).
group = roomctl
EOF
if [[ -f $(target /etc/roomd/roomd.conf) ]]; then
    # Written only when missing: from then on it is the installer's file.
    if has_mode "$(target /etc/roomd/roomd.conf)" 0640 "$ROOMD_GID"; then
        say "unchanged: /etc/roomd/roomd.conf (written only when missing)"
    else
        run chown "0:$ROOMD_GID" "$(target /etc/roomd/roomd.conf)"
        run chmod 0640 "$(target /etc/roomd/roomd.conf)"
    fi
else
    install_file "$conf_tmp" /etc/roomd/roomd.conf 0640 "$ROOMD_GID"
fi

# 3. udev: /dev/gpiochip* to group gpio.
say "== udev rules"
install_file "$RULES_SRC" /etc/udev/rules.d/99-roomd.rules 0644
if ((LIVE)); then
    if command -v udevadm >/dev/null && udevadm control --ping >/dev/null 2>&1; then
        run udevadm control --reload
        # Re-apply the rules to the chips that already exist (group and mode change at once).
        run udevadm trigger --settle --action=change --subsystem-match=gpio
    else
        say "udevd is not running here: the rules take effect at the next boot"
    fi
fi

# 4. Programs (only with --bin-dir).
if [[ -n $BIN_DIR ]]; then
    say "== programs from $BIN_DIR"
    install_file "$BIN_DIR/roomd" /usr/bin/roomd 0755
    install_file "$BIN_DIR/roomctl" /usr/bin/roomctl 0755
    if [[ -f $REPO/scripts/roomctl-completion.bash ]]; then
        install_file "$REPO/scripts/roomctl-completion.bash" /usr/share/bash-completion/completions/roomctl 0644
    fi
fi

# 5. The unit.
say "== systemd unit"
install_file "$UNIT_SRC" /usr/lib/systemd/system/roomd.service 0644
if ((LIVE)) && [[ -d /run/systemd/system ]]; then
    run systemctl daemon-reload
fi
if ((ENABLE)); then
    if [[ $(systemctl "${ROOT_OPT[@]}" is-enabled roomd.service 2>/dev/null) == enabled ]]; then
        say "unchanged: roomd.service is enabled"
    else
        run systemctl "${ROOT_OPT[@]}" enable roomd.service
    fi
fi

# What is left to the installer.
if ((DRY_RUN)); then say "== done (dry run: nothing changed)"; exit 0; fi
say "== done"
[[ -x $(target /usr/bin/roomd) ]] ||
    say "note: no /usr/bin/roomd yet: install it (or re-run with --bin-dir .build/release)"
[[ -e $(target /etc/roomd/token) ]] ||
    say "note: put the appliance's room token in /etc/roomd/token (install -m 0640 -g roomd token.jwt /etc/roomd/token) and set room.server and room.token_file = token in /etc/roomd/roomd.conf"
say "let a person or the test rig use roomctl: usermod -aG roomctl NAME (then log in again)"
if ((LIVE)); then
    say "start: systemctl start roomd; check the setup: docs/installation.md, section Checking"
    id roomd || true
    ls -l /dev/gpiochip* 2>/dev/null || say "no /dev/gpiochip* on this machine"
fi
