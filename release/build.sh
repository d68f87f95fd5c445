#!/usr/bin/env bash
# Release artefacts: static Linux binaries (musl) for x86_64 and aarch64, a tarball of each with
# SHA256SUMS, and the npm packages (`bolide`, and `@bolide/linux-x64` / `@bolide/linux-arm64`
# carrying the binaries) packed as tarballs ready for `npm publish`.
#
#   release/build.sh                          # both targets, into dist/
#   release/build.sh --targets x86_64         # one
#   release/build.sh --binary x86_64=PATH     # package a binary built elsewhere (no cargo build)
#   release/build.sh --out DIR
#
# aarch64 needs a cross C compiler for ring and mimalloc (Debian: gcc-aarch64-linux-gnu) and the
# Rust target (rustup target add aarch64-unknown-linux-musl); x86_64 needs musl-tools.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/dist"
targets="x86_64,aarch64"
declare -A given=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$(mkdir -p "$2" && cd "$2" && pwd)"; shift 2 ;;
        --targets) targets="$2"; shift 2 ;;
        --binary) given["${2%%=*}"]="${2#*=}"; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "release/build.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#given[@]} -gt 0 ] && [ "$targets" = "x86_64,aarch64" ] && targets="$(IFS=,; echo "${!given[*]}")"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)"

# Every prerequisite is checked before anything is built, and each missing one named with what
# installs it (a build that fails after minutes on a missing linker helps nobody).
missing=()
need() {
    command -v "$1" >/dev/null 2>&1 && return
    [[ " ${missing[*]-} " == *" $1 ("* ]] || missing+=("$1 ($2)")
}
need npm "Debian: apt-get install npm"
need sha256sum "Debian: apt-get install coreutils"
for arch in ${targets//,/ }; do
    [ -n "${given[$arch]:-}" ] && continue
    need cargo "a Rust toolchain: rustup"
    case "$arch" in
        x86_64)
            need musl-gcc "Debian: apt-get install musl-tools"
            need strip "Debian: apt-get install binutils"
            target=x86_64-unknown-linux-musl ;;
        aarch64)
            need aarch64-linux-gnu-gcc "Debian: apt-get install gcc-aarch64-linux-gnu"
            need aarch64-linux-gnu-strip "Debian: apt-get install binutils-aarch64-linux-gnu"
            target=aarch64-unknown-linux-musl ;;
        *) continue ;;
    esac
    if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
        missing+=("the Rust target $target (rustup target add $target)")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "release/build.sh: missing before anything is built:" >&2
    printf '  - %s\n' "${missing[@]}" >&2
    exit 3
fi
mkdir -p "$out/npm"
rm -f "$out/SHA256SUMS"

for arch in ${targets//,/ }; do
    case "$arch" in
        x86_64) triple=x86_64-unknown-linux-musl; npm_cpu=x64; strip=strip ;;
        aarch64) triple=aarch64-unknown-linux-musl; npm_cpu=arm64; strip=aarch64-linux-gnu-strip
            export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc
            export CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc
            export AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar ;;
        *) echo "release/build.sh: unknown target $arch (x86_64 or aarch64)" >&2; exit 2 ;;
    esac
    stage="$out/bolide-$version-$triple"
    rm -rf "$stage" && mkdir -p "$stage"
    if [ -n "${given[$arch]:-}" ]; then
        cp "${given[$arch]}" "$stage/bolide"
    else
        echo "release: cargo build --release --locked --target $triple"
        (cd "$root" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}" \
            cargo build --release --locked -p bolide --target "$triple")
        cp "${CARGO_TARGET_DIR:-$root/target}/$triple/release/bolide" "$stage/bolide"
        "$strip" "$stage/bolide"
    fi
    cp "$root/README.md" "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$stage/"
    tar -C "$out" -czf "$stage.tar.gz" "$(basename "$stage")"
    (cd "$out" && sha256sum "$(basename "$stage").tar.gz" >> SHA256SUMS)

    # The platform's npm package: the binary, for this os and cpu only.
    pkg="$out/npm/linux-$npm_cpu"
    rm -rf "$pkg" && mkdir -p "$pkg/bin"
    cp "$stage/bolide" "$pkg/bin/bolide"
    chmod 755 "$pkg/bin/bolide"
    cp "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$pkg/"
    cat > "$pkg/package.json" <<JSON
{
  "name": "@bolide/linux-$npm_cpu",
  "version": "$version",
  "description": "The bolide binary for Linux $npm_cpu (static, musl); installed by the bolide package",
  "license": "MIT OR Apache-2.0",
  "os": ["linux"],
  "cpu": ["$npm_cpu"],
  "files": ["bin/bolide", "LICENSE-MIT", "LICENSE-APACHE"],
  "preferUnplugged": true
}
JSON
    (cd "$out/npm" && npm pack --silent "$pkg" >/dev/null)
done

# The package people install: the wrapper, with every platform package as an optional dependency.
main="$out/npm/bolide"
rm -rf "$main" && mkdir -p "$main"
cp -r "$root/npm/bolide/bin" "$root/npm/bolide/README.md" "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$main/"
cat > "$main/package.json" <<JSON
{
  "name": "bolide",
  "version": "$version",
  "description": "Load tester and benchmark harness for DDP (Meteor) and HTTP servers",
  "license": "MIT OR Apache-2.0",
  "bin": { "bolide": "bin/bolide.js" },
  "files": ["bin/bolide.js", "README.md", "LICENSE-MIT", "LICENSE-APACHE"],
  "engines": { "node": ">=16" },
  "optionalDependencies": {
    "@bolide/linux-x64": "$version",
    "@bolide/linux-arm64": "$version"
  }
}
JSON
(cd "$out/npm" && npm pack --silent "$main" >/dev/null)

# bolide-probe, published beside the wrapper: the Node probe a server loads with --require.
probe="$out/npm/bolide-probe"
rm -rf "$probe" && mkdir -p "$probe"
cp "$root/npm/bolide-probe/index.js" "$root/npm/bolide-probe/README.md" "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$probe/"
sed "s/\"version\": \"[^\"]*\"/\"version\": \"$version\"/; s/\"files\": \[\"index.js\", \"README.md\"\]/\"files\": [\"index.js\", \"README.md\", \"LICENSE-MIT\", \"LICENSE-APACHE\"]/" \
    "$root/npm/bolide-probe/package.json" >"$probe/package.json"
(cd "$out/npm" && npm pack --silent "$probe" >/dev/null)
(cd "$out/npm" && sha256sum ./*.tgz | sed 's| \./| npm/|' >> "$out/SHA256SUMS")
echo "release: $out"
(cd "$out" && ls -1 ./*.tar.gz npm/*.tgz SHA256SUMS)
