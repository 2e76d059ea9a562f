#!/usr/bin/env bash
# Runs the image `make image` built: `sluice version`, `sluice validate` of the
# configuration it ships, and checks it runs as the non-root user. Prints the
# image size.
set -euo pipefail
image=${1:-localhost/sluice:dev}
buildah=(buildah --storage-driver vfs)
ctr=$("${buildah[@]}" from --quiet "$image")
trap '"${buildah[@]}" rm "$ctr" >/dev/null' EXIT
run() { "${buildah[@]}" run --isolation chroot "$ctr" -- "$@"; }

version=$(run sluice version)
echo "image: $version"
[[ $version == "sluice "* ]] || { echo "image-test: unexpected version output: $version" >&2; exit 1; }
run sluice validate --config /etc/sluice/sluice.yaml
user=$("${buildah[@]}" inspect --type image --format '{{.OCIv1.Config.User}}' "$image")
[ "$user" = 65532:65532 ] || { echo "image-test: user is $user, want 65532:65532" >&2; exit 1; }
entry=$("${buildah[@]}" inspect --type image --format '{{.OCIv1.Config.Entrypoint}}' "$image")
[ "$entry" = "[sluice]" ] || { echo "image-test: entrypoint is $entry, want [sluice]" >&2; exit 1; }
run sluice validate --config /etc/ssl/certs/ca-certificates.crt >/dev/null 2>&1 && { echo "image-test: validate accepted a non-config" >&2; exit 1; }
echo "image size: $("${buildah[@]}" images --format "{{.Size}}" "$image")"
