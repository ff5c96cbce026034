# The seed inputs of each fuzz target: test inputs of the repository, plus
# the target's own regression corpus (test/Fuzz/corpus/<target>, which holds
# the inputs that once failed). Sourced by scripts/fuzz.sh and by the lit
# test that replays the corpora (replay.test); paths are relative to the
# repository root.
fuzz_targets() { echo parse compile yaml rank_description torch_csv; }
fuzz_seeds() {
  case "$1" in
    parse) echo schedules examples test/Dialect test/Transforms test/Schedules ;;
    compile) echo schedules examples test/Schedules test/Transforms ;;
    yaml) echo configs ;;
    rank_description) ;;
    torch_csv) echo test/unit/data/peer-orders ;;
    *) return 1 ;;
  esac
  echo "test/Fuzz/corpus/$1"
}
