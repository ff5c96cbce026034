# Writes OUT (a header defining FLEXPIPE_REVISION) from `git describe` of the
# source tree SRC, run at every build: the file changes, and what includes
# it recompiles, only when the revision does. "unknown" outside a checkout.
execute_process(
  COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
  OUTPUT_VARIABLE revision
  OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET
  RESULT_VARIABLE failed)
if(failed OR revision STREQUAL "")
  set(revision "unknown")
endif()
set(text "// Generated at build time by tools/Revision.cmake.\n#define FLEXPIPE_REVISION \"${revision}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
