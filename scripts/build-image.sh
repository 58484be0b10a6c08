#!/usr/bin/env bash
# Build docker/Dockerfile with no Docker daemon and no image registry, as root: Debian's buildah
# and podman (runtime runc), overlay storage under WORK_DIR, and a base image made locally with
# debootstrap from the apt mirror this machine already uses (Debian's python3, not python.org's).
#
#   scripts/build-image.sh PROJECT_DIR WORK_DIR [TAG]      (TAG: localhost/acp-proxy:local)
#
# Then:  eval "$(scripts/build-image.sh ... | tail -1)"; podman run --rm TAG --version
#
# The debootstrap rootfs (~2.5 min to make) is cached as a tarball in $ACP_PROXY_IMAGE_CACHE
# (default /var/tmp/acp-proxy-ci) so a second build on the same machine only imports it.
# pip in the build trusts this machine's CA bundle: mounted read-only for the RUN steps only,
# never copied into the image. Prints "export CONTAINERS_CONF=... CONTAINERS_STORAGE_CONF=..."
# last, for podman to find the same storage.
set -euo pipefail
SRC=$(cd "${1:?usage: build-image.sh PROJECT_DIR WORK_DIR [TAG]}" && pwd)
W=${2:?usage: build-image.sh PROJECT_DIR WORK_DIR [TAG]}
TAG=${3:-localhost/acp-proxy:local}
CACHE=${ACP_PROXY_IMAGE_CACHE:-/var/tmp/acp-proxy-ci}
SUITE=${SUITE:-bookworm}
BASE=${BASE_IMAGE:-localhost/acp-proxy-base:debian-$SUITE}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
for tool in buildah podman debootstrap runc; do
    command -v "$tool" >/dev/null || { echo "build-image: $tool is not installed" >&2; exit 2; }
done
mkdir -p "$W" "$CACHE"
W=$(cd "$W" && pwd)
# crun fails here on setrlimit and cgroups, runc works; storage under WORK_DIR; /etc untouched.
cat > "$W/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
printf '[storage]\ndriver = "overlay"\ngraphroot = "%s/storage"\nrunroot = "%s/run"\n' \
    "$W" "$W" > "$W/storage.conf"
export CONTAINERS_CONF=$W/containers.conf CONTAINERS_STORAGE_CONF=$W/storage.conf

rootfs_tar=$CACHE/debian-$SUITE-python3-rootfs.tar
if [ ! -s "$rootfs_tar" ]; then
    # The first non-security Debian mirror of this machine's apt sources (deb822 or one-line).
    MIRROR=${MIRROR:-$( { cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
                            | awk '/^[[:space:]]*URIs:/ {print $2}';
                          cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
                            | sed -E 's/\[[^]]*\]//' | awk '$1 == "deb" {print $2}'; } \
                        | grep -v security | head -1 || true)}
    [ -n "$MIRROR" ] || { echo "build-image: no apt mirror in /etc/apt/sources.list*" >&2; exit 1; }
    rootfs=$CACHE/rootfs.$$
    rm -rf "$rootfs"
    debootstrap --variant=minbase --include=python3,python3-pip,python-is-python3,ca-certificates \
        "$SUITE" "$rootfs" "$MIRROR" > "$W/debootstrap.log" 2>&1 \
        || { echo "build-image: debootstrap failed, see $W/debootstrap.log" >&2; exit 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
    tar -C "$rootfs" -cf "$rootfs_tar.$$" . && mv "$rootfs_tar.$$" "$rootfs_tar"
    rm -rf "$rootfs"
fi
if ! podman image exists "$BASE"; then
    podman import -q -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c 'ENV LANG=C.UTF-8' -c 'CMD ["python3"]' "$rootfs_tar" "$BASE" >/dev/null
fi
# The base by digest, as a production build pins python:3.11.7-slim-bookworm@sha256:...
repo=$BASE; [[ ${BASE##*/} == *:* ]] && repo=${BASE%:*}   # the name without its tag
BASE_PINNED=$repo@$(podman image inspect -f '{{.Digest}}' "$BASE")
# --format docker keeps HEALTHCHECK (buildah's default OCI format drops it).
cd "$SRC"
buildah bud --isolation chroot --network host --pull=never --layers --format docker \
    --build-arg "PYTHON_IMAGE=$BASE_PINNED" \
    -v "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro" \
    --ignorefile docker/Dockerfile.dockerignore \
    -f docker/Dockerfile -t "$TAG" . > "$W/build.log" 2>&1 \
    || { tail -20 "$W/build.log" >&2; echo "build-image: build failed: $W/build.log" >&2; exit 1; }
podman image inspect -f '{{.Size}}' "$TAG" \
    | awk -v tag="$TAG" '{printf "built %s, %.0f MB\n", tag, $1/1e6}'
echo "export CONTAINERS_CONF=$CONTAINERS_CONF CONTAINERS_STORAGE_CONF=$CONTAINERS_STORAGE_CONF"
