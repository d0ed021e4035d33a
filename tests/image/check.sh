#!/usr/bin/env bash
# Proves the OCI image (scripts/image.sh) without a container daemon:
#   - skopeo reads it: the labels (version, revision, source, created), the entrypoint
#     and the non-root user are in its config, and the docker-archive names the same
#     layers;
#   - its root filesystem, unpacked by umoci as a runtime would, runs in a chroot as the
#     image's user (uid 10001), nothing from this host bind-mounted but /proc, /sys and
#     /dev: every tool starts; the entrypoint with no arguments says what the image holds;
#     bench-bw --serve answers a coordinator over loopback; bench-bw over verbs loads
#     libibverbs and its providers and says "no RDMA device"; fabric-doctor audits this
#     host's interfaces; the acceptance procedure itself (`fabcheck accept` on the shipped
#     loopback profile, 3 ranks under the image's mpirun) runs, judges and signs; the
#     signature verifies here with stock ssh-keygen against the published key;
#   - reproducible: a second build of the same commit gives the same config and layer
#     digests, and a build dated a day later the same base layer.
#
#   tests/image/check.sh [OUT]     (default: target/image; built if absent)
#
# Needs root (umoci unpack keeps the image's owners; chroot; mounts in a private mount
# namespace). Exit 0 when every check passes, 1 when one fails, 2 when it cannot run.
#
# The base's own reproducibility (two debootstraps of the same packages give the same
# files) is not run here, because the base is cached: checked by hand on 2026-12-07, two
# debootstraps a minute apart, normalised, gave identical file lists, modes, owners,
# times and SHA-256 sums (222 MiB each).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(realpath -m "${1:-$ROOT/target/image}")

if [[ $(id -u) -ne 0 ]]; then
    echo "image-check: needs root (umoci unpack, chroot, mounts)" >&2
    exit 2
fi
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)
if [[ "${1:-}" != "__inside" && -z "${IMAGE_CHECK_NS:-}" ]]; then
    [[ -f $OUT/oci/index.json ]] || "$ROOT/scripts/image.sh" "$OUT" || exit 2
    IMAGE_CHECK_NS=1 exec unshare --mount --propagation private "$0" "$OUT"
fi

. "$ROOT/tests/lib/expect.sh"
START=$(date +%s)

# 1. What skopeo reads.
INSPECT=$(skopeo inspect "oci:$OUT/oci:$VERSION") || { echo "image-check: skopeo cannot read oci:$OUT/oci:$VERSION" >&2; exit 1; }
CONFIG=$(skopeo inspect --config "oci:$OUT/oci:$VERSION")
check_inspect() {
    python3 - "$INSPECT" "$CONFIG" "$VERSION" "$(git -C "$ROOT" rev-parse HEAD)" << 'EOF'
import json, sys
inspect, config, version, commit = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
labels = inspect.get("Labels") or {}
c = config["config"]
problems = []
want = {"org.opencontainers.image.version": version, "org.opencontainers.image.title": "fabcheck"}
for k, v in want.items():
    if labels.get(k) != v:
        problems.append(f"label {k} is {labels.get(k)!r}, not {v!r}")
if not labels.get("org.opencontainers.image.revision", "").startswith(commit):
    problems.append(f"label revision {labels.get('org.opencontainers.image.revision')!r} is not HEAD {commit}")
for k in ("source", "created", "licenses"):
    if not labels.get("org.opencontainers.image." + k):
        problems.append(f"label org.opencontainers.image.{k} missing")
if c.get("Entrypoint") != ["/usr/local/bin/fabcheck-entrypoint"]:
    problems.append(f"entrypoint {c.get('Entrypoint')}")
if c.get("User") != "fabcheck":
    problems.append(f"user {c.get('User')!r}")
if len(inspect["Layers"]) != 2:
    problems.append(f"{len(inspect['Layers'])} layers, not 2 (base, suite)")
print("; ".join(problems) if problems else
      f"labels version {version}, revision {labels['org.opencontainers.image.revision'][:12]}, "
      f"entrypoint {c['Entrypoint'][0]}, user {c['User']}, {len(inspect['Layers'])} layers")
sys.exit(1 if problems else 0)
EOF
}
if line=$(check_inspect); then ok "skopeo inspect: $line"; else failed "skopeo inspect: $line"; fi
ARCHIVE=$OUT/fabcheck-$VERSION.tar
layers() { skopeo inspect "$1" | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["Layers"]))'; }
# The docker-archive holds the layers uncompressed: compare the uncompressed digests.
diff_ids() { skopeo inspect --config "$1" | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["rootfs"]["diff_ids"]))'; }
if [[ -f $ARCHIVE ]] && [[ $(diff_ids "docker-archive:$ARCHIVE") == "$(diff_ids "oci:$OUT/oci:$VERSION")" ]]; then
    ok "docker-archive $(basename "$ARCHIVE"): the same layers ($(du -m "$ARCHIVE" | cut -f1) MiB)"
else
    failed "docker-archive $ARCHIVE is missing or holds other layers than the OCI layout"
fi

# 2. The root filesystem, unpacked, in a chroot.
BUNDLE=$OUT/unpacked
rm -rf "$BUNDLE"
umoci unpack --image "$OUT/oci:$VERSION" "$BUNDLE" > /dev/null || { echo "image-check: umoci unpack failed" >&2; exit 1; }
R=$BUNDLE/rootfs
ok "unpacked: $(du -sm "$R" | cut -f1) MiB; the largest: $(du -sm "$R"/usr/lib/x86_64-linux-gnu/* "$R"/usr/share/* "$R"/usr/local/bin/* 2> /dev/null | sort -rn | head -4 | awk '{ n = $2; sub(".*/", "", n); printf "%s%s %d MiB", (NR > 1 ? ", " : ""), n, $1 }')"
mount -t proc proc "$R/proc" &&
    mount -t sysfs sys "$R/sys" &&
    mount --bind /dev "$R/dev" &&
    mount -t tmpfs tmpfs "$R/dev/shm" &&
    mount -t tmpfs -o mode=1777 tmpfs "$R/tmp" || { echo "image-check: mounts failed" >&2; exit 2; }
# inside CMD...: CMD in the chroot as the image's user, with the image's environment.
inside() {
    OUTPUT=$(timeout 300 chroot --userspec=fabcheck:fabcheck "$R" env -i HOME=/home/fabcheck \
        PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin "$@" 2>&1)
}
for t in bench-bw bench-lat bench-collective bench-congestion fabric-doctor aggregate fabcheck; do
    expect "$t starts" 0 "Usage" "$t" --help
done
for t in mpirun ibv_devinfo ibstat ibnetdiscover smpquery ip dcb ethtool lldpcli ssh; do
    inside sh -c "command -v $t" || failed "$t is not in the image"
done
expect "the entrypoint alone says what the image holds" 0 "fabcheck $VERSION, commit" fabcheck-entrypoint
expect "the entrypoint runs its arguments" 0 "Usage: aggregate" fabcheck-entrypoint aggregate --help
expect "bench-bw verbs without a NIC (libibverbs and its providers load)" 2 "no RDMA device" \
    bench-bw --transport verbs -s 64 -n 10

# Two bench-bw --serve agents in the image (as the DaemonSet runs them) and the
# coordinator (as the sweep Job runs it) sweep over loopback, authenticated by a secret
# in the environment.
SECRET=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
P1=$((20000 + RANDOM % 20000))
P2=$((P1 + 1))
AGENTS=()
for p in $P1 $P2; do
    chroot --userspec=fabcheck:fabcheck "$R" env -i HOME=/home/fabcheck PATH=/usr/local/bin:/usr/bin:/bin \
        FABCHECK_SECRET="$SECRET" timeout 120 bench-bw --serve -p "$p" --timeout 30 > "$OUT/serve-$p.log" 2>&1 &
    AGENTS+=($!)
done
printf '127.0.0.1:%s\n127.0.0.1:%s\n' $P1 $P2 > "$R/tmp/hosts.txt"
expect "bench-bw --serve agents answer a coordinator over loopback" 0 "2 agents|agents" \
    env FABCHECK_SECRET="$SECRET" bench-bw --hosts /tmp/hosts.txt --pattern all-pairs --include-local -s 64K -n 200 --json /tmp/sweep.json
kill "${AGENTS[@]}" 2> /dev/null
wait "${AGENTS[@]}" 2> /dev/null
grep -q '"launcher": *"agents"' "$R/tmp/sweep.json" 2> /dev/null &&
    ok "the sweep's document says launcher agents" || failed "the sweep wrote no agents document"

# Its verdict on this host's interfaces is not the point (no RDMA here): that it reads
# them and writes its document is. Exit 0 or 1 (findings); 2 is an error.
inside fabric-doctor --json /tmp/audit.json
rc=$?
if [[ $rc -le 1 ]] && grep -q '"audit"' "$R/tmp/audit.json" 2> /dev/null; then
    ok "fabric-doctor audits this host's interfaces: exit $rc, $(grep -m1 -oE '[0-9]+ (port|interface)s?.{0,40}' <<< "$OUTPUT" || echo "its document written")"
else
    failed "fabric-doctor: exit $rc, no audit document:"
    sed 's/^/    /' <<< "$OUTPUT" | tail -10
fi

# The acceptance procedure from the image alone: runs, judgement, signed report.
expect "aggregate keygen" 0 "" aggregate keygen /tmp/key
expect "fabcheck accept, loopback profile, 3 ranks under the image's mpirun" 0 "PASS" \
    fabcheck accept --profile loopback-demo-cluster --local 3 --out /tmp/accept --sign /tmp/key
REPORT=$R/tmp/accept/report
if [[ -f $REPORT/report.html && -f $REPORT/MANIFEST.sha256.sig ]] &&
    (cd "$REPORT" && ssh-keygen -Y verify -f <(echo "fabcheck $(cat "$R/tmp/key.pub")") -I fabcheck \
        -n fabcheck-report -s MANIFEST.sha256.sig < MANIFEST.sha256 > /dev/null 2>&1 &&
        sha256sum --quiet -c MANIFEST.sha256); then
    ok "the report (report.html, $(ls "$REPORT" | wc -l) files) verifies here with ssh-keygen and sha256sum"
else
    failed "the image's signed report is missing or does not verify"
fi
umount "$R/tmp" "$R/dev/shm" "$R/dev" "$R/sys" "$R/proc" 2> /dev/null

# 3. Reproducible: the same commit built again gives the same digests.
if [[ ${IMAGE_CHECK_REBUILD:-1} != 0 ]]; then
    digests() { skopeo inspect --raw "oci:$1:$VERSION" | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m["config"]["digest"], *[l["digest"] for l in m["layers"]])'; }
    first=$(digests "$OUT/oci")
    # Built the way the first was (its target directory and profile settings: binaries
    # built with other settings differ, and so would the suite's layer).
    (. "$OUT/build-env" && "$ROOT/scripts/image.sh" "$OUT/again") > "$OUT/again.log" 2>&1 ||
        failed "the second build failed (see $OUT/again.log)"
    second=$(digests "$OUT/again/oci")
    revision() { skopeo inspect "oci:$1:$VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Labels"]["org.opencontainers.image.revision"])'; }
    if [[ $(revision "$OUT/oci") != "$(revision "$OUT/again/oci")" ]]; then
        failed "the image in $OUT was built from $(revision "$OUT/oci"), this checkout is $(revision "$OUT/again/oci"): run scripts/image.sh again, then this check"
    elif [[ $first == "$second" ]]; then
        ok "a second build gives the same config and layer digests (${first:7:12}...)"
    else
        failed "a second build differs: $first against $second"
    fi
    # A later commit (another SOURCE_DATE_EPOCH) changes the suite's layer, never the base's:
    # a registry keeps one base layer for every commit of a package list.
    (. "$OUT/build-env" && SOURCE_DATE_EPOCH=$((SOURCE_DATE_EPOCH + 86400)) \
        "$ROOT/scripts/image.sh" "$OUT/later") > "$OUT/later.log" 2>&1 ||
        failed "the build with a later date failed (see $OUT/later.log)"
    read -r _ base_now suite_now <<< "$first"
    read -r _ base_later suite_later <<< "$(digests "$OUT/later/oci")"
    if [[ $base_now == "$base_later" && $suite_now != "$suite_later" ]]; then
        ok "a later commit's date keeps the base layer (${base_now:7:12}...) and changes the suite's"
    else
        failed "a later date gave base $base_later (was $base_now), suite $suite_later (was $suite_now)"
    fi
    rm -rf "$OUT/again" "$OUT/later"
fi
rm -rf "$BUNDLE"
echo "image-check: $(($(date +%s) - START)) s"
exit $FAILED
