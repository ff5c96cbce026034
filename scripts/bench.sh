#!/usr/bin/env bash
# Builds if needed and runs the benchmarks. They print figures and never fail
# on timing. Usage: scripts/bench.sh [seconds per row, default 1]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
build_all
"$BUILD_DIR/bin/flexpipe-bench-scheduler" "${1:-1}"
echo
"$BUILD_DIR/bin/flexpipe-bench-simulator" "${1:-1}"
