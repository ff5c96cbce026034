//===- FuzzCompile.cpp - Fuzz target: spec to schedule to rank programs ---===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What `flexpipe-compile` does with a spec: the spec-to-schedule pipeline
// (partition, placement, the scheduler, gradient separation, communication,
// the deadlock verifier) under either time model, then every output: the
// text grid, the simulation with its report and SVG, the PyTorch CSV formats
// and, for one input in four, the EmitC lowering to rank programs. The
// properties checked are the ones a user relies on:
//
// - a schedule the pipeline accepted verifies again when read back, and
//   replays to a timeline and a simulation;
// - a schedule PyTorch can run exports to compute_comms CSV, which reads back
//   and verifies under PyTorch's untagged channels;
// - the schedule description the lowering writes is one the runtime reads.
//
// Specs larger than 32 actors or 512 actor-micro-batches are skipped: the
// scheduler is linear in their size, and libFuzzer wants fast inputs.
//
//===----------------------------------------------------------------------===//

#include "FuzzMlir.h"

#include "flexpipe/Conversion/FlexPipeToEmitC/FlexPipeToEmitC.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Runtime/Schedule.h"
#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/Simulator.h"
#include "flexpipe/Scheduling/TorchFormat.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/Hashing.h"

#include <algorithm>

using namespace flexpipe;
using namespace flexpipe::fuzz;

namespace {

/// Reads back one schedule the pipeline produced and checks every output.
void checkSchedule(ScheduleOp schedule) {
  ScheduleProgram read = readSchedule(schedule);
  const sched::Program &program = read.program;
  std::optional<sched::VerifyFailure> failure = sched::verify(program);
  FUZZ_CHECK(!failure, failure->message.c_str());

  sched::Timeline timeline = sched::unitTimeline(program);
  FUZZ_CHECK(timeline.ok, "a verified schedule must replay");
  (void)sched::formatTextGrid(program, timeline);

  sched::Simulator simulator;
  std::string error;
  error = llvm::toString(simulator.prepare(program));
  FUZZ_CHECK(error.empty(), error.c_str());
  sched::SimCosts costs = sched::unitCosts(program);
  sched::SimResult result = simulator.run(costs);
  sched::ReportContext context;
  context.name = schedule.getSymName().str();
  (void)sched::formatReport(program, result, costs, context);
  (void)sched::formatSvg(program, result, costs, context);

  if (llvm::errorToBool(sched::checkTorchExpressible(program)))
    return;
  (void)sched::formatTorchCsv(program, timeline);
  llvm::Expected<std::string> written = sched::formatTorchCsvComms(program);
  error = written ? std::string() : llvm::toString(written.takeError());
  FUZZ_CHECK(error.empty(), error.c_str());
  const std::string csv = std::move(*written);
  sched::Program imported;
  bool comms = false;
  error = llvm::toString(sched::parseTorchCsv(csv, imported, &comms));
  FUZZ_CHECK(error.empty(), (error + "\n" + csv).c_str());
  // Without transfers (one rank) the two formats are the same file.
  const bool transfers = std::any_of(
      program.actors.begin(), program.actors.end(), [](const auto &ops) {
        return std::any_of(ops.begin(), ops.end(), [](const sched::ProgOp &op) {
          return !sched::isCompute(op.kind);
        });
      });
  FUZZ_CHECK(comms || !transfers, csv.c_str());
  failure = sched::verify(imported, sched::ChannelRule::PerPair);
  FUZZ_CHECK(!failure, (failure->message + "\n" + csv).c_str());
}

/// Lowers the schedules to rank programs; the runtime must read the
/// description the lowering wrote.
void checkLowering(mlir::ModuleOp module) {
  mlir::PassManager pm(module->getContext());
  pm.addPass(createConvertToEmitCPass());
  if (mlir::failed(pm.run(module)))
    return; // e.g. a schedule the runtime's model cannot run, reported
  for (auto rank : module.getOps<mlir::ModuleOp>()) {
    auto description =
        rank->getAttrOfType<mlir::StringAttr>("flexpipe.description");
    if (!description)
      continue;
    rt::ScheduleDesc desc;
    const std::string error = rt::parseSchedule(description.str(), desc);
    FUZZ_CHECK(error.empty(), (error + "\n" + description.str()).c_str());
    return; // every rank carries the same description
  }
}

} // namespace

FLEXPIPE_FUZZ_TARGET(compile) {
  static const bool registered = [] {
    registerFlexPipePassesAndPipelines();
    return true;
  }();
  (void)registered;
  FuzzContext fuzz;
  const std::string text(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module = fuzz.parse(text);
  if (!module)
    return;
  for (auto pipeline : module->getOps<PipelineOp>())
    if (pipeline.getActors() > 32 || pipeline.getMicrobatches() > 512 ||
        pipeline.getActors() * pipeline.getMicrobatches() > 512)
      return;
  // The options, from the input's hash: the same input always runs alike.
  const size_t hash = llvm::hash_value(text);
  SpecToScheduleOptions options;
  options.timeModel =
      hash & 1 ? sched::TimeModel::Cost : sched::TimeModel::Step;
  options.stepRule =
      hash & 2 ? sched::StepRule::Literal : sched::StepRule::NextType;
  options.balance =
      (hash & 4) && (hash & 32) ? sched::Balance::Cost : sched::Balance::Layers;
  mlir::PassManager pm(&fuzz.context);
  buildSpecToSchedulePipeline(pm, options);
  const int before = fuzz.errors;
  if (mlir::failed(pm.run(*module))) {
    FUZZ_CHECK(fuzz.errors > before, "the pipeline failed without an error");
    return;
  }
  for (auto schedule : module->getOps<ScheduleOp>())
    checkSchedule(schedule);
  if ((hash >> 3) % 4 == 0)
    checkLowering(*module);
}
