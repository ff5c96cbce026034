//===- FormatProfile.h - A profile as YAML, for the tests -------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// formatProfile writes a Profile in the format loadProfile reads, so that the
// unit and fuzz tests can check that a profile reads back to what was read.
// The product's profiles are written by the runtime (--profile,
// runtime/lib/Executor.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_UNIT_FORMATPROFILE_H
#define FLEXPIPE_TEST_UNIT_FORMATPROFILE_H

#include "flexpipe/Scheduling/CostModel.h"

#include <sstream>
#include <string>

namespace flexpipe::sched {

inline std::string formatProfile(const Profile &profile) {
  std::ostringstream os;
  os.precision(9);
  os << "# FlexPipe profile: mean seconds per stage and instruction type for "
        "one micro-batch\n";
  if (profile.microBatchSize)
    os << "micro_batch_size: " << *profile.microBatchSize << "\n";
  if (!profile.modules.empty()) {
    os << "modules:\n";
    for (const Profile::ModuleShape &m : profile.modules)
      os << "  - {hidden: " << m.hidden << ", heads: " << m.heads
         << ", seq: " << m.seq << ", vocab: " << m.vocab << "}\n";
  }
  os << (profile.stages.empty() ? "stages: []\n" : "stages:\n");
  for (const Profile::Stage &s : profile.stages) {
    os << "  - {stage: " << s.stage;
    if (s.layers)
      os << ", layers: " << *s.layers;
    if (s.first)
      os << ", first: " << (*s.first ? "true" : "false");
    if (s.last)
      os << ", last: " << (*s.last ? "true" : "false");
    if (!s.actors.empty()) {
      os << ", actors: [";
      for (size_t i = 0; i < s.actors.size(); ++i)
        os << (i ? ", " : "") << s.actors[i];
      os << "]";
    }
    os << ", fwd_s: " << s.fwd << ", bwd_s: " << s.bwd
       << ", igrad_s: " << s.igrad << ", wgrad_s: " << s.wgrad;
    if (s.activationBytes)
      os << ", activation_bytes: " << *s.activationBytes;
    if (s.weightGradBytes)
      os << ", weight_grad_bytes: " << *s.weightGradBytes;
    os << "}\n";
  }
  if (profile.listsMessages && profile.messages.empty())
    os << "messages: []\n";
  if (!profile.messages.empty()) {
    os << "messages:\n";
    for (const Profile::Message &m : profile.messages)
      os << "  - {from: " << m.from << ", to: " << m.to
         << ", seconds: " << m.seconds << "}\n";
  }
  if (profile.defaultMessageTime)
    os << "default_message_s: " << *profile.defaultMessageTime << "\n";
  if (!profile.optimizerStep.empty()) {
    os << "optimizer_s: [";
    for (size_t a = 0; a < profile.optimizerStep.size(); ++a)
      os << (a ? ", " : "") << profile.optimizerStep[a];
    os << "]\n";
  }
  if (profile.instructionOverhead)
    os << "instruction_s: " << *profile.instructionOverhead << "\n";
  if (profile.execSeconds)
    os << "exec_s: " << *profile.execSeconds << "\n";
  return os.str();
}

} // namespace flexpipe::sched

#endif // FLEXPIPE_TEST_UNIT_FORMATPROFILE_H
