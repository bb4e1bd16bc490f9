#!/usr/bin/env bash
# Checks what `make release` or `make release-snapshot` wrote in dist/, as a
# user would meet it, on this machine's platform (linux or darwin):
#
#   scripts/release-smoke.sh            # archives, checksums, SBOMs, npm packages
#   scripts/release-smoke.sh --image    # also build the relay image with buildah
#                                       # (as root) and probe its /ready
#
# - checksums.txt verifies every archive and SBOM;
# - every archive (four .tar.gz, the Windows .zip) holds the binary,
#   README.md and LICENSE (the repository's), nothing else; this platform's happy --version
#   prints the release's version;
# - each binary has a CycloneDX SBOM that names the module and, but for the
#   Windows stub, its modules (cobra among them);
# - `npm install --offline` of the root package with this platform's package
#   (no registry) gives node_modules/.bin/happy, which prints the version;
# - --image: the Dockerfile builds (FROM scratch, nothing pulled), the relay
#   starts in it as user 65532 and answers GET /ready with 200.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
image=false
[ "${1:-}" = --image ] && image=true

fail() { echo "release-smoke: $*" >&2; exit 1; }

version=$(node -p 'require("./dist/metadata.json").version')
goos=$(go env GOOS)
goarch=$(go env GOARCH)
echo "version $version, platform $goos/$goarch"

(cd dist && sha256sum --quiet -c checksums.txt) || fail "dist/checksums.txt does not verify"
for f in dist/*.tar.gz dist/*.zip dist/*.cdx.json; do
  grep -q "  ${f#dist/}\$" dist/checksums.txt || fail "$f is not in dist/checksums.txt"
done

for target in linux_amd64 linux_arm64 darwin_amd64 darwin_arm64 windows_amd64; do
  case "$target" in
    windows_*) a="dist/happy_${version}_${target}.zip" bin=happy.exe ;;
    *) a="dist/happy_${version}_${target}.tar.gz" bin=happy ;;
  esac
  [ -f "$a" ] || fail "$a is missing"
  case "$a" in
    *.zip) list=$(zipinfo -1 "$a") ;;
    *) list=$(tar -tzf "$a") ;;
  esac
  got=$(printf '%s\n' "$list" | LC_ALL=C sort | paste -sd' ')
  [ "$got" = "LICENSE README.md $bin" ] || fail "$a holds '$got', want 'LICENSE README.md $bin'"
done
echo "archives: 5, each with its binary, README.md and LICENSE"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
archive="dist/happy_${version}_${goos}_${goarch}.tar.gz"
tar -xzf "$archive" -C "$tmp"
cmp -s "$tmp/LICENSE" LICENSE || fail "$archive: LICENSE is not the repository's"
got=$("$tmp/happy" --version)
[ "$got" = "happy $version" ] || fail "$archive: happy --version printed '$got', want 'happy $version'"
echo "archive: $got"

for target in linux_amd64 linux_arm64 darwin_amd64 darwin_arm64 windows_amd64; do
  sbom="dist/happy_${version}_${target}.cdx.json"
  node -e '
    const b = require(process.argv[1]);
    const name = b.metadata && b.metadata.component && b.metadata.component.name;
    // The Windows stub links the standard library only: no modules.
    const wantDeps = !process.argv[1].endsWith("_windows_amd64.cdx.json");
    const cobra = (b.components || []).some((c) => c.name === "github.com/spf13/cobra");
    if (b.bomFormat !== "CycloneDX" || name !== "github.com/happy-dev/happy" || cobra !== wantDeps) {
      console.error(`${process.argv[1]}: bomFormat ${b.bomFormat}, component ${name}, ${(b.components || []).length} components`);
      process.exit(1);
    }' "$root/$sbom" || fail "$sbom is not a CycloneDX SBOM of happy"
done
echo "sboms: 5 CycloneDX documents"

case "$goarch" in amd64) cpu=x64 ;; *) cpu=$goarch ;; esac
mkdir "$tmp/npm"
(cd "$tmp/npm" && npm install --offline --no-audit --no-fund --loglevel=error \
  "$root/dist/npm/happy-dev-happy-$version.tgz" "$root/dist/npm/happy-dev-happy-$goos-$cpu-$version.tgz" >/dev/null)
got=$("$tmp/npm/node_modules/.bin/happy" --version)
[ "$got" = "happy $version" ] || fail "npm: happy --version printed '$got', want 'happy $version'"
for p in happy "happy-$goos-$cpu"; do
  cmp -s "$tmp/npm/node_modules/@happy-dev/$p/LICENSE" LICENSE || fail "npm: @happy-dev/$p carries no LICENSE, or not the repository's"
done
echo "npm: $got, each package with the LICENSE"

$image || exit 0
export BUILDAH_ISOLATION=chroot
tag="localhost/happy-relay-smoke:$version"
buildah --storage-driver vfs bud --quiet --build-arg TARGETARCH="$goarch" -t "$tag" . >/dev/null
ctr=$(buildah --storage-driver vfs from "$tag")
port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
# The image's entrypoint and user, on loopback: the host's network, so
# that this script can probe it.
buildah --storage-driver vfs run --network host "$ctr" -- /usr/local/bin/happy server --listen "127.0.0.1:$port" >"$tmp/relay.log" 2>&1 &
relay=$!
cleanup_image() {
  kill "$relay" 2>/dev/null || true
  wait "$relay" 2>/dev/null || true
  buildah --storage-driver vfs rm "$ctr" >/dev/null || true
  buildah --storage-driver vfs rmi "$tag" >/dev/null || true
  rm -rf "$tmp"
}
trap cleanup_image EXIT
ready=""
for _ in $(seq 100); do
  ready=$(curl -fsS -m 2 "http://127.0.0.1:$port/ready" 2>/dev/null) && break
  kill -0 "$relay" 2>/dev/null || { cat "$tmp/relay.log" >&2; fail "the relay in the image exited"; }
  sleep 0.2
done
[ "$ready" = '{"status":"ready"}' ] || { cat "$tmp/relay.log" >&2; fail "image: /ready answered '$ready'"; }
pid=$(ss -Hltnp "sport = :$port" | sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -n1)
uid=$(stat -c %u "/proc/$pid")
[ "$uid" = 65532 ] || fail "image: the relay runs as uid $uid, want 65532"
echo "image: /ready $ready, uid $uid"
