//===- OptionValues.h - Spellings of the enum pass options ------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The command-line spellings of the scheduling library's enums, one list per
// enum, for the passes' options (Passes.td) and the spec-to-schedule
// pipeline's (Passes.h) alike.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_OPTIONVALUES_H
#define FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_OPTIONVALUES_H

#include "flexpipe/Scheduling/Placement.h"
#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/Scheduler.h"

#include "llvm/Support/CommandLine.h"

namespace flexpipe {

inline llvm::cl::ValuesClass timeModelValues() {
  return llvm::cl::values(
      clEnumValN(sched::TimeModel::Step, "step",
                 "every instruction one step (the paper's)"),
      clEnumValN(sched::TimeModel::Cost, "cost",
                 "durations from costs; an actor picks when it is free"));
}

inline llvm::cl::ValuesClass stepRuleValues() {
  return llvm::cl::values(
      clEnumValN(sched::StepRule::NextType, "next-type",
                 "a failed fetch moves on to the next instruction type"),
      clEnumValN(sched::StepRule::Literal, "literal",
                 "the paper as written: the first non-empty reorder queue "
                 "decides"));
}

inline llvm::cl::ValuesClass balanceValues() {
  return llvm::cl::values(
      clEnumValN(sched::Balance::Layers, "layers", "an even split"),
      clEnumValN(sched::Balance::Cost, "cost", "balanced FLOPs"));
}

inline llvm::cl::ValuesClass channelRuleValues() {
  return llvm::cl::values(
      clEnumValN(sched::ChannelRule::PerStage, "stage",
                 "sender, receiver, kind, sending stage (tagged)"),
      clEnumValN(sched::ChannelRule::PerPair, "pair",
                 "sender and receiver (untagged runtimes)"));
}

} // namespace flexpipe

#endif // FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_OPTIONVALUES_H
