//===- Lowering.cpp - From a spec's problem to the program that runs ------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Lowering.h"

using namespace flexpipe::sched;

Program flexpipe::sched::programOf(const BuiltProblem &built,
                                   const ScheduleResult &schedule) {
  Program program = toProgram(built.problem, schedule, built.numStages,
                              built.stageEdges, built.sharedStages);
  // What each stage holds, for the cost model and the runtime: modules,
  // then registered stages (named by themselves).
  program.stageMeta = built.stageMeta;
  program.moduleNames = built.moduleNames;
  return program;
}

llvm::Error flexpipe::sched::finishProgram(Program &program,
                                           const SimCosts &costs,
                                           const BubbleOptimizations &opts,
                                           SeparationResult *figures) {
  if (opts.splitBackward || opts.separation)
    splitBackward(program);
  if (opts.separation) {
    SeparationResult separated =
        separateGradients(program, costs, *opts.separation);
    if (!separated.ok)
      return llvm::createStringError("gradient separation failed: " +
                                     separated.error);
    program = std::move(separated.program);
    if (figures)
      *figures = std::move(separated);
  }
  insertCommunication(program);
  if (opts.asyncLookahead > 0)
    postReceivesEarly(program, opts.asyncLookahead);
  return llvm::Error::success();
}

namespace {

/// The bubble optimizations and communication on a lowered order
/// (finishProgram), keeping separation's figures.
llvm::Error finishLowered(const LoweringOptions &options,
                          LoweredProgram &lowered) {
  const BubbleOptimizations &bubbles = options.bubbles;
  SeparationResult figures;
  if (llvm::Error error = finishProgram(
          lowered.program, lowered.costs ? *lowered.costs : SimCosts(), bubbles,
          bubbles.separation ? &figures : nullptr))
    return error;
  if (bubbles.separation)
    lowered.separation = std::move(figures);
  return llvm::Error::success();
}

/// One order of the problem lowered: programOf, priced where `price`
/// (always, to finish with separation), finished where `finish`.
llvm::Error lowerOrder(const BuiltProblem &built, const ScheduleResult &order,
                       const LoweringOptions &options, bool finish, bool price,
                       LoweredProgram &out) {
  out.program = programOf(built, order);
  if (price || (finish && options.bubbles.separation))
    if (llvm::Error error = programCosts(
            out.program, options.model, options.cluster, options.profile,
            options.dp, options.timeModel, out.costs.emplace()))
      return error;
  return finish ? finishLowered(options, out) : llvm::Error::success();
}

} // namespace

llvm::Error flexpipe::sched::lowerProblem(const BuiltProblem &built,
                                          const LoweringOptions &options,
                                          LoweredProgram &out) {
  // With a model and a cluster, the cost model's choice between its greedy
  // order and the step model's is judged by the simulation: the scheduler's
  // durations see neither messages (on a fast device a small model's
  // latencies outweigh its computations) nor ranks that share cores. Each
  // order is judged as it will run, finished, so that one whose weight
  // gradients are then separated is judged separated. The judged orders
  // are kept: the chosen one is not lowered twice.
  std::vector<LoweredProgram> judged;
  ScheduleJudge judge;
  if (options.model && options.cluster)
    judge = [&](const ScheduleResult &order) -> std::optional<double> {
      LoweredProgram lowered;
      lowered.schedule = order;
      if (llvm::Error error =
              lowerOrder(built, order, options, /*finish=*/false,
                         /*price=*/true, lowered)) {
        llvm::consumeError(std::move(error));
        return std::nullopt;
      }
      if (llvm::Error error = finishLowered(options, lowered)) {
        llvm::consumeError(std::move(error));
        return std::nullopt;
      }
      Simulator simulator;
      if (llvm::Error error = simulator.prepare(lowered.program)) {
        llvm::consumeError(std::move(error));
        return std::nullopt;
      }
      const double time = simulator.run(*lowered.costs).iterationTime;
      judged.push_back(std::move(lowered));
      return time;
    };

  out = LoweredProgram();
  out.schedule =
      schedule(built.problem, options.timeModel, judge, options.cutoff);
  if (!out.schedule.ok)
    return llvm::Error::success();
  if (options.finish)
    for (LoweredProgram &lowered : judged)
      if (sameOrder(lowered.schedule, out.schedule)) {
        out.program = std::move(lowered.program);
        out.costs = std::move(lowered.costs);
        out.separation = std::move(lowered.separation);
        return llvm::Error::success();
      }
  return lowerOrder(built, out.schedule, options, options.finish,
                    options.wantCosts, out);
}
