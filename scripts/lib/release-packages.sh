# Sourced by tests/softroce/run-all.sh, scripts/gpu-bundle.sh and scripts/image.sh: the
# packages built in release for the Soft-RoCE VMs, the GPU bundle and the OCI image. One
# selection for all three, because cargo's artifact names do not carry the feature set and
# features unify per selection: the bundle's four packages built after the workspace's
# release build recompiled 15 crates.
RELEASE_PACKAGES=(-p bench-bw -p bench-lat -p bench-collective -p bench-congestion -p fabric-doctor -p aggregate -p fabcheck)
