# Sourced by the chroot checks (tests/gpu-bundle/chroot-check.sh, tests/image/check.sh):
# their verdict lines. The caller defines `inside CMD...`, which runs CMD in its chroot and
# leaves the output in $OUTPUT; FAILED becomes 1 at the first failed check.
FAILED=0
ok() { echo "ok     $*"; }
failed() {
    echo "FAILED $*"
    FAILED=1
}
# expect NAME RC PATTERN CMD...: CMD must exit RC with PATTERN (grep -E) in its output,
# and never a loader error or a panic.
expect() {
    local name=$1 want=$2 pattern=$3
    shift 3
    inside "$@"
    local rc=$?
    if [[ $rc -ne $want ]] || ! grep -qE -- "$pattern" <<< "$OUTPUT" ||
        grep -qE "error while loading shared libraries|panicked|cannot open shared object" <<< "$OUTPUT"; then
        failed "$name: exit $rc (want $want, output matching /$pattern/):"
        sed 's/^/    /' <<< "$OUTPUT" | tail -20
    else
        ok "$name: exit $rc, $(grep -m1 -oE -- "$pattern.{0,80}" <<< "$OUTPUT")"
    fi
}
