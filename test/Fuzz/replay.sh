#!/usr/bin/env bash
# Replays every fuzz target's seeds and regression corpus with
# flexpipe-fuzz-replay (on PATH). Usage: replay.sh REPOSITORY_ROOT
set -euo pipefail
cd "$1"
. test/Fuzz/seeds.sh
for target in $(fuzz_targets); do
  # shellcheck disable=SC2046 # the seed list is words
  flexpipe-fuzz-replay "$target" $(fuzz_seeds "$target")
done
