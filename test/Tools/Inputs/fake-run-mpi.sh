#!/bin/sh
# Stands in for a compiled candidate's run-mpi.sh in noise-floor.test: its
# n-th run prints the n-th time of times.txt beside it (cycling), as a real
# run prints its mean iteration time.
dir=$(cd "$(dirname "$0")" && pwd) || exit 1
n=$(cat "$dir/count" 2>/dev/null || echo 0)
echo $((n + 1)) > "$dir/count"
total=$(wc -l < "$dir/times.txt")
t=$(sed -n "$((n % total + 1))p" "$dir/times.txt")
echo "mean iteration time $t ms (iterations after the first)"
