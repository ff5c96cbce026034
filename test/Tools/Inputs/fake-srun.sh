#!/bin/sh
# Stands in for srun in launchers.test: runs --ntasks=N copies of the
# program with SLURM_PROCID 0..N-1 one after another (other options are
# skipped; --export=NONE runs the tasks with only PATH and SLURM_PROCID, as
# srun exports nothing then but its own variables) and exits with the
# largest exit code.
tasks=1
clean=
while [ $# -gt 0 ]; do
  case $1 in
    --ntasks=*) tasks=${1#--ntasks=} ;;
    --export=NONE) clean=1 ;;
    -*) ;;
    *) break ;;
  esac
  shift
done
worst=0
t=0
while [ "$t" -lt "$tasks" ]; do
  if [ -n "$clean" ]; then
    env -i PATH="$PATH" SLURM_PROCID=$t "$@"
  else
    SLURM_PROCID=$t "$@"
  fi
  code=$?
  [ "$code" -gt "$worst" ] && worst=$code
  t=$((t + 1))
done
exit "$worst"
