#!/usr/bin/env bash
# Build the sebridge container image and smoke-test it, with no container registry:
#  1. a Debian 12 (bookworm) root filesystem with Python 3.11, made from Debian's packages
#     by mmdebstrap (minimal: no recommends, no docs), cached under .cache/container/ and
#     imported as the base image (podman import);
#  2. the project's wheel and its dependencies' wheels (pip wheel), and
#     `podman build --isolation=chroot` of deploy/container/Containerfile on that base;
#  3. the image's filesystem exported (podman create + export) and, inside it, chrooted in
#     new mount and PID namespaces as the image's user (uid 10001):
#     `sebridge --version` and `sebridge demo --yes`.
# Prints the image's size and the demo's time, and writes them to .cache/container/result.json.
# Idempotent: a second run reuses the cached base (delete .cache/container/ to start over).
# Needs root, podman, mmdebstrap and uidmap (.ci/run installs them); Python 3.11 on the host.
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$(date +%s.%N)
cache=.cache/container
python=${PYTHON:-python3}
image=localhost/sebridge
packages=python3,python3-venv,ca-certificates,passwd,tini
sources=/etc/apt/sources.list.d/debian.sources
[ -e "$sources" ] || sources=/etc/apt/sources.list
mkdir -p "$cache"

say() { printf 'build-and-smoke: %s\n' "$*" >&2; }
seconds() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  say "the host's $python must be Python 3.11 (the image's): its wheels are installed there"
  exit 2
fi

# 1. The base: keyed by what goes into it, so a changed package list or mirror makes a new one.
key=$( (echo bookworm "$packages"; cat "$sources") | sha256sum | cut -c1-12)
base_tar=$cache/base-$key.tar
base_image=localhost/sebridge-base:$key
step=$(date +%s.%N)
if [ ! -s "$base_tar" ]; then
  say "making the Debian 12 base with mmdebstrap (once; cached as $base_tar)"
  mmdebstrap --quiet --format=tar --variant=essential --include="$packages" \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$base_tar.part" "$sources"
  mv "$base_tar.part" "$base_tar"
fi
if ! podman image exists "$base_image"; then
  podman import --quiet "$base_tar" "$base_image" >/dev/null
fi
say "base ready in $(seconds "$step") s"

# 2. The wheels and the image.
step=$(date +%s.%N)
context=$cache/context
rm -rf "$context" && mkdir -p "$context/wheels"
"$python" -m pip wheel --quiet --disable-pip-version-check -w "$context/wheels" . 2>&1 \
  | { grep -v '^WARNING: Location' || true; } >&2
version=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
previous=$(podman image inspect --format '{{.Id}}' "$image:latest" 2>/dev/null || true)
podman build --quiet --isolation=chroot --format=docker --build-arg "BASE=$base_image" \
  -t "$image:$version" -t "$image:latest" -f deploy/container/Containerfile "$context" >/dev/null
# The image the tags left: removed unless another tag still names it (no dangling image).
if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$image:latest")" ] \
  && [ "$(podman image inspect --format '{{len .RepoTags}}' "$previous")" = 0 ]; then
  podman rmi --force "$previous" >/dev/null || say "could not remove the previous image $previous"
fi
size=$(podman image inspect --format '{{.Size}}' "$image:latest")
say "image $image:$version built in $(seconds "$step") s: $((size / 1000000)) MB"

# 3. The smoke test, inside the image's exported filesystem.
step=$(date +%s.%N)
rootfs=$cache/rootfs
rm -rf "$rootfs" && mkdir -p "$rootfs"
container=$(podman create "$image:latest")
trap 'podman rm --force "$container" >/dev/null 2>&1 || true' EXIT
podman export "$container" | tar -x -C "$rootfs"
user=$(podman image inspect --format '{{.Config.User}}' "$image:latest")

inside() {
  # New mount and PID namespaces: /dev, a fresh /proc and a private /tmp exist only there.
  unshare --mount --pid --fork --kill-child -- sh -euc '
    root=$1; user=$2; shift 2
    mount --rbind /dev "$root/dev"
    mount -t proc proc "$root/proc"
    mount -t tmpfs tmpfs "$root/tmp"
    exec chroot --userspec="$user" "$root" /usr/bin/env -i PATH=/opt/sebridge/bin:/usr/bin:/bin \
      HOME=/var/lib/sebridge "$@"
  ' inside "$rootfs" "$user" "$@"
}

printf '[imds]\nvm_name = "vm0"\n' >"$rootfs/etc/sebridge/sebridge.toml"
healthy=$(inside /opt/sebridge/bin/python -m sebridge.cli.healthcheck) \
  || { say "the health check failed: $healthy"; exit 1; }
rm "$rootfs/etc/sebridge/sebridge.toml"
got=$(inside sebridge --version)
[ "$got" = "sebridge $version" ] || { say "sebridge --version said: $got"; exit 1; }
# PID 1 is tini, which reaps; sebridge makes itself a subreaper for its hooks' orphans.
entrypoint=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$image:latest")
case "$entrypoint" in
  '["/usr/bin/tini","--",'*) ;;
  *) say "the entrypoint does not start tini: $entrypoint"; exit 1 ;;
esac
inside /usr/bin/tini --version >/dev/null || { say "tini does not run in the image"; exit 1; }
whoami=$(inside /opt/sebridge/bin/python -c 'import os; print(os.getuid())')
[ "$whoami" = 10001 ] || { say "ran as uid $whoami, not 10001"; exit 1; }
demo_started=$(date +%s.%N)
inside sebridge demo --yes >"$cache/demo.log" 2>&1 || { cat "$cache/demo.log"; say "demo failed"; exit 1; }
demo=$(seconds "$demo_started")
grep -q "StartRequests" "$cache/demo.log" || { cat "$cache/demo.log"; say "no summary"; exit 1; }
say "smoke test passed in $(seconds "$step") s (sebridge demo --yes: $demo s)"

total=$(seconds "$started")
printf '{"image": "%s:%s", "size_bytes": %s, "demo_seconds": %s, "total_seconds": %s}\n' \
  "$image" "$version" "$size" "$demo" "$total" | tee "$cache/result.json"
