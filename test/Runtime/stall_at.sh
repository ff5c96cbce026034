#!/bin/sh
# stall_at.sh FUNCTION SECONDS PROGRAM [ARGS...]: runs PROGRAM under gdb and,
# when it first calls FUNCTION, holds it there for SECONDS before killing
# it: a rank that stops at one chosen point (a blocking MPI call in
# start-up, MPI_Finalize) while its peers wait for it.
function=$1 seconds=$2
shift 2
exec gdb -q -batch -ex "set breakpoint pending on" -ex "break $function" \
  -ex run -ex "shell sleep $seconds" -ex kill --args "$@" > /dev/null 2>&1
