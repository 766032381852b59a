#!/usr/bin/env bash
# Builds dbio's container images without an image registry, into the engine's local store:
#
#   base      localhost/dbio-base:SUITE      Debian minbase: debootstrap from the Debian
#                                            mirror this machine's apt uses, then `import`
#                                            (kept when it exists, unless --refresh)
#   postgres  localhost/dbio-postgres:MAJOR  Debian's PostgreSQL packages on that base
#                                            (deploy/postgres/), `dbio nightly`'s server
#   dbio      localhost/dbio:latest          deploy/Dockerfile on that base; with
#                                            --dbio-bin, that built binary copied in
#
# Usage: deploy/images.sh [base] [postgres] [dbio] [options]   (no image named: all three)
#   --engine podman|docker  the engine (default podman)
#   --suite SUITE           Debian suite of the base (default trixie)
#   --mirror URL            Debian mirror (default: the one apt's sources name for this
#                           machine's Debian release)
#   --pg-major N            PostgreSQL major of the postgres image (default 17)
#   --dbio-bin FILE         put this dbio binary in dbio's image (deploy/Dockerfile's
#                           `prebuilt` target) instead of building it from source, which
#                           needs BUILDER, an image with Rust 1.89+ (--builder IMAGE)
#   --builder IMAGE         deploy/Dockerfile's BUILDER (default: the Dockerfile's)
#   --refresh               debootstrap the base again even when it exists (newer Debian
#                           packages; the images built on the old one are rebuilt)
#
# Needs root (debootstrap), the engine, and debootstrap (Debian: apt-get install podman runc
# debootstrap). Builds run with the host's network (`--network host`: apt reaches the
# mirror; no container network is made). Exit 0 when every image named was built, 2 on bad
# usage, 1 when a step failed.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

engine=podman
suite=trixie
mirror=
pg_major=17
dbio_bin=
builder=
refresh=
images=()
while [ $# -gt 0 ]; do
    case $1 in
        base | postgres | dbio) images+=("$1") ;;
        --engine) engine=${2:?}; shift ;;
        --suite) suite=${2:?}; shift ;;
        --mirror) mirror=${2:?}; shift ;;
        --pg-major) pg_major=${2:?}; shift ;;
        --dbio-bin) dbio_bin=${2:?}; shift ;;
        --builder) builder=${2:?}; shift ;;
        --refresh) refresh=1 ;;
        -h | --help) usage ;;
        *) echo "images.sh: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done
[ ${#images[@]} -gt 0 ] || images=(base postgres dbio)
case $engine in podman | docker) ;; *) echo "images.sh: --engine is podman or docker" >&2; exit 2 ;; esac
case $pg_major in '' | *[!0-9]*) echo "images.sh: --pg-major is a number, e.g. 17" >&2; exit 2 ;; esac
if [ -n "$dbio_bin" ] && [ ! -x "$dbio_bin" ]; then
    echo "images.sh: --dbio-bin $dbio_bin is not an executable file" >&2
    exit 2
fi
base=localhost/dbio-base:$suite
wants() { local i; for i in "${images[@]}"; do [ "$i" = "$1" ] && return 0; done; return 1; }

# The Debian mirror of this machine's own release in apt's sources: one-line (.list) and
# deb822 (.sources) entries whose suite is the release's codename.
debian_mirror() {
    local id codename f
    id=$(. /etc/os-release && echo "${ID:-}")
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    if [ "$id" != debian ] || [ -z "$codename" ]; then
        return 0
    fi
    {
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -f "$f" ] || continue
            awk -v c="$codename" '$1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                if ($(i + 1) == c) print $i
            }' "$f"
        done
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] || continue
            awk -v c="$codename" 'BEGIN { RS = "" } {
                uris = ""; suites = ""; deb = 0; off = 0
                n = split($0, line, "\n")
                for (j = 1; j <= n; j++) {
                    l = line[j]
                    if (l ~ /^Types:/ && (" " l " ") ~ / deb /) deb = 1
                    if (l ~ /^Enabled:[ \t]*no/) off = 1
                    if (l ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", l); uris = l }
                    if (l ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", l); suites = " " l " " }
                }
                if (deb && !off && index(suites, " " c " ")) { split(uris, u, " "); print u[1] }
            }' "$f"
        done
    } | head -n 1
}

build_base() {
    if [ -z "$refresh" ] && "$engine" image inspect "$base" >/dev/null 2>&1; then
        kept=1
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "images.sh: the base needs root (debootstrap)" >&2
        exit 2
    fi
    command -v debootstrap >/dev/null || { echo "images.sh: debootstrap is missing (apt-get install debootstrap)" >&2; exit 2; }
    [ -n "$mirror" ] || mirror=$(debian_mirror)
    if [ -z "$mirror" ]; then
        echo "images.sh: apt's sources name no Debian mirror for this machine's release: give --mirror URL" >&2
        exit 2
    fi
    rootfs=$(mktemp -d /var/tmp/dbio-base.XXXXXX)
    # debootstrap mounts /proc and /sys inside while it works: unmount before removing.
    trap 'umount -R "$rootfs/proc" "$rootfs/sys" 2>/dev/null || true; rm -rf --one-file-system "$rootfs"' EXIT
    echo "images.sh: debootstrap --variant=minbase $suite from $mirror" >&2
    debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
        tail -n 20 "$rootfs.log" >&2
        rm -f "$rootfs.log"
        exit 1
    }
    rm -f "$rootfs.log"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | "$engine" import --change 'CMD ["/bin/bash"]' - "$base" >/dev/null
    rm -rf --one-file-system "$rootfs"
    trap - EXIT
}

build_postgres() {
    "$engine" build --network host --build-arg "BASE=$base" --build-arg "PG_MAJOR=$pg_major" \
        -t "localhost/dbio-postgres:$pg_major" deploy/postgres >&2
}

build_dbio() {
    local args=(build --network host -f "$PWD/deploy/Dockerfile" --build-arg "BASE=$base" -t localhost/dbio:latest)
    if [ -n "$builder" ]; then
        args+=(--build-arg "BUILDER=$builder")
    fi
    if [ -n "$dbio_bin" ]; then
        # A context of the binary alone: the `prebuilt` target copies it in.
        local ctx
        ctx=$(mktemp -d)
        cp "$dbio_bin" "$ctx/dbio"
        "$engine" "${args[@]}" --target prebuilt "$ctx" >&2 || { rm -rf "$ctx"; exit 1; }
        rm -rf "$ctx"
    else
        "$engine" "${args[@]}" . >&2
    fi
}

for image in base postgres dbio; do
    wants "$image" || continue
    started=$(date +%s)
    kept=
    "build_$image"
    name=$base
    [ "$image" = postgres ] && name=localhost/dbio-postgres:$pg_major
    [ "$image" = dbio ] && name=localhost/dbio:latest
    size=$("$engine" image inspect --format '{{.Size}}' "$name")
    if [ -n "$kept" ]; then
        echo "images.sh: $name kept as it is (--refresh builds it again), $((size / 1000000)) MB" >&2
    else
        echo "images.sh: $name built in $(($(date +%s) - started)) s, $((size / 1000000)) MB" >&2
    fi
done
