//===- Export.h - Timelines, text grids and PyTorch CSV ---------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_EXPORT_H
#define FLEXPIPE_SCHEDULING_EXPORT_H

#include "flexpipe/Scheduling/Program.h"

#include <string>
#include <vector>

namespace flexpipe::sched {

/// Start and end time of every op of every actor.
struct Timeline {
  bool ok = false;
  std::vector<std::vector<double>> start, end;
  double makespan = 0;
};

/// The simulator's timeline with every computation taking one step and
/// communication none (the paper's step model). Fails (ok = false) on a
/// program that does not terminate.
Timeline unitTimeline(const Program &program);

/// The largest number of forwards not yet released by their backward (bwd,
/// or wgrad after a split) that any actor holds at once: peak activation
/// memory in stage-micro-batch units.
int64_t peakInflight(const Program &program);

/// An ASCII grid like the paper's figures: one row per actor, one column per
/// step, cells `<stage><F|B|I|W><micro-batch>`, `.` for an idle step.
std::string formatTextGrid(const Program &program, const Timeline &timeline);

/// PyTorch's compute_only CSV (what `_PipelineScheduleRuntime._load_csv`
/// reads): one row per actor, computations in order, an empty cell for each
/// idle step.
std::string formatTorchCsv(const Program &program, const Timeline &timeline);

/// PyTorch's compute_comms CSV: computations and SEND_F / RECV_F / SEND_B /
/// RECV_B in program order (sends name the sender's stage, receives the
/// receiver's).
std::string formatTorchCsvComms(const Program &program);

/// Reads a compute_only CSV (row r = rank r, cells `<stage><F|B|I|W><mb>` in
/// execution order, empty cells ignored) into a compute-only program whose
/// stages form one chain 0 -> 1 -> ... in stage order. Returns an error or
/// "".
std::string parseTorchCsv(const std::string &text, Program &program);

struct SimResult;
struct SimCosts;

/// What a report or picture is about.
struct ReportContext {
  std::string name;         ///< schedule name
  double tokensPerIteration = 0; ///< 0: no throughput line
  /// SVG: the time the plot's width stands for (0: this iteration's), so
  /// that several timelines can share one scale.
  double timeSpan = 0;
};

/// A table per actor (busy, idle, bubble %, peak activation, static and
/// total memory, a flag when over the device memory), totals and the
/// critical path.
std::string formatReport(const Program &program, const SimResult &result,
                         const SimCosts &costs, const ReportContext &context);

/// A timeline like the paper's schedule figures: one row per actor, boxes
/// coloured by instruction type and shaded by stage, labelled with the
/// micro-batch, bubbles as gaps, a time axis and a legend.
std::string formatSvg(const Program &program, const SimResult &result,
                      const SimCosts &costs, const ReportContext &context);

/// Chrome trace JSON (Perfetto, chrome://tracing): one track per actor, one
/// event per instruction.
std::string formatTrace(const Program &program, const SimResult &result,
                        const SimCosts &costs, const ReportContext &context);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_EXPORT_H
