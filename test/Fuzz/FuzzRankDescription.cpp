//===- FuzzRankDescription.cpp - Fuzz target: the runtime's reader --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Any text as the schedule description that rank executables and
// flexpipe-reference read (schedule.txt). A refusal names its line; a
// description that is read is one the runtime can size: every stage on a
// valid actor, every edge between stages that exist.
//
// A 'check' line's sum is recomputed before reading (a mutated body would
// otherwise almost always be refused at that line, and the fuzzer would not
// get past it); the check itself is tested in ModelTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#include "flexpipe/Runtime/Schedule.h"
#include "flexpipe/Support/Hash.h"

#include <string>
#include <string_view>

using namespace flexpipe::rt;

FLEXPIPE_FUZZ_TARGET(rank_description) {
  std::string text(reinterpret_cast<const char *>(data), size);
  if (size_t at = text.find("\ncheck "); at != std::string::npos) {
    const size_t value = at + 7;
    const size_t end = text.find('\n', value);
    if (end != std::string::npos)
      text.replace(value, end - value,
                   std::to_string(flexpipe::fnv1a(
                       std::string_view(text).substr(end + 1))));
  }
  ScheduleDesc desc;
  const std::string error = parseSchedule(text, desc);
  if (!error.empty()) {
    FUZZ_CHECK(error.rfind("schedule description", 0) == 0, error.c_str());
    FUZZ_CHECK(error.find('\n') == std::string::npos, error.c_str());
    return;
  }
  FUZZ_CHECK(desc.actors >= 1 && desc.dp >= 1 && desc.microbatches >= 1,
             text.c_str());
  FUZZ_CHECK(static_cast<int64_t>(desc.stage.size()) == desc.stages,
             text.c_str());
  for (const ScheduleDesc::Stage &stage : desc.stage)
    for (int actor : stage.actors)
      FUZZ_CHECK(actor >= 0 && actor < desc.actors, text.c_str());
  for (auto [from, to] : desc.edges)
    FUZZ_CHECK(from >= 0 && from < desc.stages && to >= 0 && to < desc.stages,
               text.c_str());
}
