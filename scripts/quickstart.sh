#!/usr/bin/env bash
# FlexPipe quick start on a fresh Debian 12 machine: installs what is missing,
# builds, and runs the main job on the embedded default schedule.
#
# The main job today: schedule the default spec (1F1B on 4 actors,
# schedules/1f1b.mlir), verify the programs and print their timeline. It grows
# as the simulator and runtime land. Another spec can be given as argument.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages
build_all

SPEC="${1:-$FLEXPIPE_ROOT/schedules/1f1b.mlir}"
log "Scheduling $SPEC"
"$BUILD_DIR/bin/flexpipe-compile" "$SPEC" --emit=text
log "Done. Next: scripts/test.sh runs every test suite."
