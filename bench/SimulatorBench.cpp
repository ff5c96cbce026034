//===- SimulatorBench.cpp - Simulator throughput --------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Prints simulations per second on one thread for 1F1B at pp=8, m=32 (the
// target of issue 4 is >= 10,000/s) and for interleaved 1F1B at pp=8, v=4,
// m=64, in three ways: run only (new costs for a prepared program), prepare
// and run (a new program each time), and the tuner's whole path per candidate
// (schedule, insert communication, prepare, run). Figures only.
//
//===----------------------------------------------------------------------===//

#include "BenchArgs.h"
#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Simulator.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace flexpipe::sched;
using Clock = std::chrono::steady_clock;

static double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

static PipelineSpec spec(int32_t pp, int32_t v, int32_t m) {
  PipelineSpec s;
  s.actors = pp;
  s.microbatches = m;
  ModuleSpec module;
  module.name = "gpt";
  module.layers = 4 * pp * v;
  module.placement.kind = v > 1 ? PlacementKind::Circular : PlacementKind::OneToOne;
  module.placement.chunks = v;
  for (int32_t a = 0; a < pp; ++a)
    module.placement.actors.push_back(a);
  s.modules.push_back(module);
  PrioritySpec priority;
  priority.cttp = v > 1 ? Cttp::Interleaved : Cttp::BwdFirst;
  if (v > 1) {
    priority.fwd = StagePriority{StageOrder::BreadthFirst, pp};
    priority.bwd = StagePriority{StageOrder::DepthFirst, pp};
  }
  s.priorities.push_back(priority);
  InflightSpec inflight;
  inflight.scope = InflightScope::PerActor;
  for (int32_t a = 0; a < pp; ++a)
    inflight.limits.push_back(v > 1 ? pp * v + pp - 2 * a - 1 : pp - a);
  s.inflight.push_back(inflight);
  return s;
}

static void row(const char *name, const PipelineSpec &s, double budget) {
  llvm::Expected<BuiltProblem> built = buildProblem(s);
  ScheduleResult result = schedule(built->problem, TimeModel::Step);
  Program program = toProgram(built->problem, result, built->numStages,
                              built->stageEdges, built->sharedStages);
  insertCommunication(program);
  size_t ops = 0;
  for (const auto &actor : program.actors)
    ops += actor.size();
  Simulator prepared;
  if (llvm::Error error = prepared.prepare(program)) {
    std::printf("%s: %s\n", name, llvm::toString(std::move(error)).c_str());
    std::exit(1);
  }
  SimCosts costs = unitCosts(program);
  for (int mode = 0; mode < 3; ++mode) {
    int64_t runs = 0;
    double sink = 0;
    Clock::time_point start = Clock::now();
    // At least one batch, however short the budget.
    while (runs == 0 || seconds(start) < budget)
      for (int i = 0; i < 8; ++i, ++runs) {
        if (mode == 0) {
          costs.duration[0][0] = 1 + 1e-9 * i; // new costs each time
          sink += prepared.run(costs).iterationTime;
        } else if (mode == 1) {
          Simulator fresh;
          llvm::cantFail(fresh.prepare(program)); // prepared above
          sink += fresh.run(costs).iterationTime;
        } else {
          ScheduleResult again = schedule(built->problem, TimeModel::Step);
          Program p = toProgram(built->problem, again, built->numStages,
                                built->stageEdges, built->sharedStages);
          insertCommunication(p);
          Simulator fresh;
          llvm::cantFail(fresh.prepare(p)); // the same program
          sink += fresh.run(unitCosts(p)).iterationTime;
        }
      }
    const double elapsed = seconds(start);
    const char *what[] = {"run only", "prepare + run",
                          "schedule + comm + prepare + run"};
    std::printf("%-32s %-32s %9.0f /s  (%7.1f us each, %zu instructions, "
                "iteration %.0f steps)\n",
                name, what[mode], runs / elapsed, 1e6 * elapsed / runs, ops,
                sink / runs);
  }
}

int main(int argc, char **argv) {
  int exitCode = 0;
  const std::optional<double> budgetArg = flexpipe::bench::secondsPerRow(
      argc, argv, "flexpipe-bench-simulator", exitCode);
  if (!budgetArg)
    return exitCode;
  const double budget = *budgetArg;
  std::printf("FlexPipe simulator benchmark (one thread, %.1f s per row)\n\n",
              budget);
  row("1F1B pp=8 m=32", spec(8, 1, 32), budget);
  row("interleaved 1F1B pp=8 v=4 m=64", spec(8, 4, 64), budget);
  return 0;
}
