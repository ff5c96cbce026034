//===- Export.h - Timelines, text grids, reports and pictures --*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_EXPORT_H
#define FLEXPIPE_SCHEDULING_EXPORT_H

#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/Simulator.h"

#include <optional>
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

/// `<stage><F|B|I|W|SEND_F|RECV_F|SEND_B|RECV_B><micro-batch>`: a cell of
/// the text grid, an action of PyTorch's CSV (sends name the sender's stage,
/// receives the receiver's) and a name in timelines; a registered
/// instruction's exec by the instruction's name from `program` (`2@norm0`:
/// two on one stage read alike as `2exec0`), other ops by their kind's name
/// (`2all_gather0`).
std::string actionName(const ProgOp &op, const Program *program = nullptr);

/// Seconds as reports, timelines and flexpipe-tune print them: "1.250 s",
/// "12.500 ms", four significant digits below a microsecond ("0.0004 ms").
std::string formatSeconds(double seconds);

/// `@name` as MLIR writes a symbol reference: bare when `name` is an
/// identifier, else quoted with `"`, `\` and bytes outside printable ASCII
/// escaped (`@"two\0Alines"`), so that a header stays one line.
std::string formatSymbol(const std::string &name);

/// "4 actors, 8 stages, 1 micro-batch": the program's shape, as reports,
/// timelines and the text grid state it.
std::string formatShape(const Program &program);

/// An ASCII grid like the paper's figures: one row per actor, one column per
/// step, cells `<stage><F|B|I|W><micro-batch>`, `.` for an idle step.
std::string formatTextGrid(const Program &program, const Timeline &timeline);

/// What a report or picture is about.
struct ReportContext {
  std::string name; ///< schedule name, written as `@name`
  /// Pictures: a title written in place of `@name` (flexpipe-tune's
  /// "best: ..."); empty: the name.
  std::string title;
  double tokensPerIteration = 0; ///< 0: no throughput line
  /// SVG: the time the plot's width stands for (0: this iteration's), so
  /// that several timelines can share one scale.
  double timeSpan = 0;
  /// Report: what follows the pipeline (afterPipeline, with a model), added
  /// to the pipeline's time for the iteration's and shown beside it where
  /// it is not 0; absent: the pipeline only.
  std::optional<AfterPipeline> after;
  /// The data-parallel replica whose pipeline this is (the slowest), of
  /// `replicas`; named where it is not replica 0.
  int64_t replica = 0, replicas = 1;
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
