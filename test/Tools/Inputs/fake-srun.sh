#!/bin/sh
# Stands in for srun in launchers.test: runs --ntasks=N copies of the
# program with SLURM_PROCID 0..N-1 one after another (other options are
# skipped) and exits with the largest exit code.
tasks=1
while [ $# -gt 0 ]; do
  case $1 in
    --ntasks=*) tasks=${1#--ntasks=} ;;
    -*) ;;
    *) break ;;
  esac
  shift
done
worst=0
t=0
while [ "$t" -lt "$tasks" ]; do
  SLURM_PROCID=$t "$@"
  code=$?
  [ "$code" -gt "$worst" ] && worst=$code
  t=$((t + 1))
done
exit "$worst"
