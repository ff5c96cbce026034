//===- Options.cpp - flexpipe-compile command line ------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "Options.h"

#include <CLI/CLI.hpp>

int flexpipe::parseCompileOptions(int argc, char **argv,
                                  CompileOptions &options) {
  CLI::App app{
      "flexpipe-compile: turn a FlexPipe schedule spec (flexpipe.pipeline) "
      "into verified per-actor programs and write them in the form asked for.\n"
      "The spec goes through partition, placement, the priority-driven "
      "scheduler (CSSR + Algorithm 1), communication insertion and schedule "
      "verification. A file that already holds a flexpipe.schedule is "
      "verified and written.",
      "flexpipe-compile"};
  app.add_option("spec", options.input,
                 "The .mlir file with the spec (- for standard input)")
      ->required();
  app.add_option("--actors", options.actors,
                 "Use N actors (devices) instead of the number in each "
                 "pipeline spec; placements and in-flight rules adapt")
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  app.add_option("--microbatches", options.microbatches,
                 "Use M micro-batches per iteration instead of the spec's")
      ->check(CLI::PositiveNumber)
      ->type_name("M");
  app.add_option("--time-model", options.timeModel,
                 "How long instructions take while scheduling: step (the "
                 "paper's model, every instruction one step) or cost (actors "
                 "pick their next instruction when they become free; forward, "
                 "backward, input- and weight-gradient take 1, 2, 1, 1 units "
                 "per layer)")
      ->check(CLI::IsMember({"step", "cost"}))
      ->capture_default_str();
  app.add_option(
         "--emit", options.emit,
         "What to write: schedule (the verified flexpipe.schedule IR), text "
         "(an ASCII grid, one row per actor, one column per step), torch-csv "
         "(PyTorch's compute_only CSV for _PipelineScheduleRuntime._load_csv) "
         "or torch-csv-comms (the compute_comms variant with sends and "
         "receives)")
      ->check(CLI::IsMember({"schedule", "text", "torch-csv", "torch-csv-comms"}))
      ->capture_default_str();
  app.add_option("-o,--output", options.output,
                 "Output file (- for standard output)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &error) {
    return app.exit(error) == 0 ? 0 : 1;
  }
  return -1;
}
