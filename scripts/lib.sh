# Shared by the scripts: repo root, toolchain on PATH, build helpers.
# Command substitutions ($(build_products ...)) stop at a failed command too: without this,
# bash runs them without set -e and a failed build went on to print a bin path.
shopt -s inherit_errexit
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -d /opt/swift/usr/bin ] && case ":$PATH:" in *":/opt/swift/usr/bin:"*) ;; *) PATH="/opt/swift/usr/bin:$PATH" ;; esac
export PATH

# The flags of a build for a given configuration. Release builds are what boards and servers
# install, so their programs carry the Swift runtime (--static-swift-stdlib): they need no
# toolchain, and `ldd` lists only Debian's libraries; --disable-local-rpath leaves out the
# RUNPATH $ORIGIN an installed program must not carry. Debug builds (tests) link it dynamically.
swift_build_flags() { # swift_build_flags CONFIG
  if [ "$1" = release ]; then echo "-c release --static-swift-stdlib --disable-local-rpath"; else echo "-c $1"; fi
}

# build_products CONFIG: builds roomd, roomctl, roomserver and the plugins; prints the build
# directory. Fails (non-zero) when the build fails.
build_products() {
  local flags
  flags="$(swift_build_flags "$1")"
  # shellcheck disable=SC2086
  (cd "$ROOT" && swift build $flags >&2) || return
  # shellcheck disable=SC2086
  (cd "$ROOT" && swift build $flags --show-bin-path)
}

# free_ports tcp|udp: two loopback ports free now (bound, read back, released), on one line.
free_ports() { python3 -c 'import socket,sys
s=[socket.socket(socket.AF_INET, socket.SOCK_DGRAM if sys.argv[1]=="udp" else socket.SOCK_STREAM) for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])' "$1"; }

# dev_tls CONF_DIR [HOST...]: a throwaway CA and server certificate in CONF_DIR/tls, where
# docs/roomserver.conf.example's [tls] points (relative to the configuration file), for
# 127.0.0.1, 127.0.0.2 (roomproxy), localhost and each HOST; roomd then trusts CONF_DIR/tls/ca.pem.
# Signalling runs over TLS as installed (docs/security.md); nothing here is a secret worth keeping.
dev_tls() {
  local dir="$1" san="DNS:localhost,IP:127.0.0.1,IP:127.0.0.2" host
  shift
  for host in "$@"; do
    case "$host" in
      127.0.0.1|127.0.0.2|localhost|0.0.0.0) ;;
      *[!0-9.]*) san="$san,DNS:$host" ;;
      *) san="$san,IP:$host" ;;
    esac
  done
  rm -rf "$dir/tls"
  mkdir -p "$dir/tls"
  "$ROOT/scripts/make-dev-certs" "$dir/tls" --san "$san" > "$dir/tls/pin"
}

# Speech for demos and benches: espeak-ng at the board rate, mono 16-bit.
make_speech() { # make_speech OUT.wav RATE VOICE "text"
  local out="$1" rate="$2" voice="$3" text="$4" tmp
  tmp="$(mktemp --suffix=.wav)"
  espeak-ng -v "$voice" -s 150 -w "$tmp" "$text"
  sox "$tmp" -r "$rate" -c 1 -b 16 "$out" norm -3
  rm -f "$tmp"
}
