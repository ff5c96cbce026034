//===- SchedulerBench.cpp - Scheduler throughput --------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Prints how fast the scheduler runs on one thread:
//  - schedules per second for 1F1B (pp=8, m=32) and interleaved 1F1B
//    (pp=8, v=4, m=64), with and without resolving the spec each time: the
//    median and the best of five repetitions (this machine is shared and
//    noisy; the spread between the two says how much);
//  - one pp=64, v=2, m=512 schedule including communication insertion and
//    verification, each phase timed.
// Targets: >= 20,000 schedules/s for 1F1B pp=8 m=32 (issue 14; issue 3
// asked for 2,000); the large schedule end to end under 200 ms. Figures
// only: nothing here fails on timing.
//
//===----------------------------------------------------------------------===//

#include "BenchArgs.h"
#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Program.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace flexpipe::sched;
using Clock = std::chrono::steady_clock;

static double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

static PipelineSpec oneF1B(int32_t pp, int32_t m) {
  PipelineSpec spec;
  spec.actors = pp;
  spec.microbatches = m;
  ModuleSpec module;
  module.name = "gpt";
  module.layers = 4 * pp;
  for (int32_t a = 0; a < pp; ++a)
    module.placement.actors.push_back(a);
  spec.modules.push_back(module);
  PrioritySpec priority;
  priority.cttp = Cttp::BwdFirst;
  spec.priorities.push_back(priority);
  InflightSpec inflight;
  inflight.scope = InflightScope::PerActor;
  for (int32_t a = 0; a < pp; ++a)
    inflight.limits.push_back(pp - a);
  spec.inflight.push_back(inflight);
  return spec;
}

static PipelineSpec interleaved(int32_t pp, int32_t v, int32_t m) {
  PipelineSpec spec = oneF1B(pp, m);
  spec.modules[0].placement.kind = PlacementKind::Circular;
  spec.modules[0].placement.chunks = v;
  spec.modules[0].layers = 2 * pp * v;
  spec.priorities[0].cttp = Cttp::Interleaved;
  spec.priorities[0].fwd = StagePriority{StageOrder::BreadthFirst, pp};
  spec.priorities[0].bwd = StagePriority{StageOrder::DepthFirst, pp};
  for (int32_t a = 0; a < pp; ++a)
    spec.inflight[0].limits[a] = pp * v + pp - 2 * a - 1;
  return spec;
}

/// Runs schedules for about `budget` seconds; prints schedules per second.
static void throughput(const char *name, const PipelineSpec &spec,
                       double budget) {
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  if (!built) {
    std::printf("%s: %s\n", name, llvm::toString(built.takeError()).c_str());
    std::exit(1);
  }
  size_t items = 0;
  {
    ScheduleResult r = schedule(built->problem, TimeModel::Step);
    if (!r.ok) {
      std::printf("%s: %s\n", name, r.error.c_str());
      std::exit(1);
    }
    for (const auto &actor : r.actors)
      items += actor.size();
  }
  // Several repetitions: on a shared machine one slow stretch would drag a
  // single long measurement down; the median and the best of them say how
  // fast the code runs and how much the machine varied.
  constexpr int kRepetitions = 5;
  for (bool resolve : {false, true}) {
    std::vector<double> rates;
    double makespan = 0;
    for (int rep = 0; rep < kRepetitions; ++rep) {
      int64_t runs = 0;
      Clock::time_point start = Clock::now();
      // At least one batch, however short the budget.
      while (runs == 0 || seconds(start) < budget / kRepetitions) {
        for (int i = 0; i < 16; ++i, ++runs) {
          if (resolve) {
            llvm::Expected<BuiltProblem> again = buildProblem(spec);
            makespan = schedule(again->problem, TimeModel::Step).makespan;
          } else {
            makespan = schedule(built->problem, TimeModel::Step).makespan;
          }
        }
      }
      rates.push_back(runs / seconds(start));
    }
    std::sort(rates.begin(), rates.end());
    const double median = rates[kRepetitions / 2];
    std::printf("%-34s %-18s %7.0f schedules/s median, %7.0f best (%5.1f us "
                "each at the median; %zu computations, makespan %.0f "
                "steps)\n",
                name, resolve ? "spec -> schedule" : "schedule only", median,
                rates.back(), 1e6 / median, items, makespan);
  }
}

int main(int argc, char **argv) {
  int exitCode = 0;
  const std::optional<double> budgetArg = flexpipe::bench::secondsPerRow(
      argc, argv, "flexpipe-bench-scheduler", exitCode);
  if (!budgetArg)
    return exitCode;
  const double budget = *budgetArg;
  std::printf("FlexPipe scheduler benchmark (one thread, %.1f s per row)\n\n",
              budget);
  throughput("1F1B pp=8 m=32", oneF1B(8, 32), budget);
  throughput("interleaved 1F1B pp=8 v=4 m=64", interleaved(8, 4, 64), budget);

  std::printf("\nOne large schedule: interleaved 1F1B pp=64 v=2 m=512\n");
  PipelineSpec spec = interleaved(64, 2, 512);
  Clock::time_point t0 = Clock::now();
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  const double tBuild = seconds(t0);
  t0 = Clock::now();
  ScheduleResult result = schedule(built->problem, TimeModel::Step);
  const double tSchedule = seconds(t0);
  if (!result.ok) {
    std::printf("schedule failed: %s\n", result.error.c_str());
    return 1;
  }
  t0 = Clock::now();
  Program program = toProgram(built->problem, result, built->numStages,
                              built->stageEdges, built->sharedStages);
  insertCommunication(program);
  const double tComm = seconds(t0);
  size_t ops = 0;
  for (const auto &actor : program.actors)
    ops += actor.size();
  t0 = Clock::now();
  std::optional<VerifyFailure> failure = verify(program);
  const double tVerify = seconds(t0);
  if (failure) {
    std::printf("verification failed: %s\n", failure->message.c_str());
    return 1;
  }
  std::printf("  resolve spec        %8.1f ms\n", 1e3 * tBuild);
  std::printf("  schedule            %8.1f ms  (%.0f steps)\n", 1e3 * tSchedule,
              result.makespan);
  std::printf("  insert comm         %8.1f ms  (%zu instructions)\n",
              1e3 * tComm, ops);
  std::printf("  verify (replay)     %8.1f ms\n", 1e3 * tVerify);
  std::printf("  total               %8.1f ms  (target < 200 ms)\n",
              1e3 * (tBuild + tSchedule + tComm + tVerify));
  return 0;
}
