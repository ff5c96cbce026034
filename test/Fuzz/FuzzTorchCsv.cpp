//===- FuzzTorchCsv.cpp - Fuzz target: PyTorch schedule CSV import --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Any text as a PyTorch pipeline schedule CSV (compute_only or
// compute_comms), as `flexpipe-compile FILE.csv` reads it. A refusal names a
// line and column; a program that is read goes through the verifier under
// the channel rule of its format, and, when it verifies, replays to a
// timeline, simulates, and a compute-only file exports in both formats and
// reads back to the same computations (compute_comms with each rank pair's
// transfers in one order).
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/Simulator.h"
#include "flexpipe/Scheduling/TorchFormat.h"

#include <string>

using namespace flexpipe::sched;

namespace {

/// The computations of every actor, in order, as text.
std::string computations(const Program &program) {
  std::string out;
  for (const std::vector<ProgOp> &ops : program.actors) {
    for (const ProgOp &op : ops)
      if (isCompute(op.kind))
        out += std::string(opLetter(op.kind)) + std::to_string(op.stage) + "." +
               std::to_string(op.mb) + " ";
    out += "\n";
  }
  return out;
}

} // namespace

FLEXPIPE_FUZZ_TARGET(torch_csv) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  Program program;
  bool comms = false;
  const std::string error =
      llvm::toString(parseTorchCsv(text, program, &comms));
  if (!error.empty()) {
    FUZZ_CHECK(!error.empty() && error.find('\n') == std::string::npos,
               error.c_str());
    return;
  }
  if (program.numActors * program.numMicrobatches > 4096)
    return;
  if (!comms)
    insertCommunication(program);
  if (verify(program, comms ? ChannelRule::PerPair : ChannelRule::PerStage))
    return; // a schedule that deadlocks or misses a dependency: refused
  Timeline timeline = unitTimeline(program);
  FUZZ_CHECK(timeline.ok, "a verified program must replay");
  Simulator simulator;
  std::string problem = llvm::toString(simulator.prepare(program));
  FUZZ_CHECK(problem.empty(), problem.c_str());
  (void)simulator.run(unitCosts(program));
  if (comms || llvm::errorToBool(checkTorchExpressible(program)))
    return;
  const std::string csv = formatTorchCsv(program, timeline);
  Program again;
  problem = llvm::toString(parseTorchCsv(csv, again));
  FUZZ_CHECK(problem.empty(), (problem + "\n" + csv).c_str());
  FUZZ_CHECK(computations(again) == computations(program), csv.c_str());
  // The compute_comms export of a valid program: written, read back with
  // the same computations, each rank pair's transfers in one order.
  llvm::Expected<std::string> withComms = formatTorchCsvComms(program);
  if (!withComms) {
    problem = llvm::toString(withComms.takeError());
    FUZZ_CHECK(false, (problem + "\n" + csv).c_str());
  }
  Program back;
  problem = llvm::toString(parseTorchCsv(*withComms, back));
  FUZZ_CHECK(problem.empty(), (problem + "\n" + *withComms).c_str());
  FUZZ_CHECK(computations(back) == computations(program), withComms->c_str());
  FUZZ_CHECK(!llvm::errorToBool(checkPairOrder(back)), withComms->c_str());
  // Its WAIT_SENDs wait for receives the peers post anyway: no hang.
  FUZZ_CHECK(!verify(back, ChannelRule::PerPair), withComms->c_str());
}
