//===- Options.cpp - flexpipe-compile command line ------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "Options.h"

#include "../CliChecks.h"
#include "flexpipe/Support/InputLimits.h"

#include <CLI/CLI.hpp>

int flexpipe::parseCompileOptions(int argc, char **argv,
                                  CompileOptions &options) {
  CLI::App app{
      "flexpipe-compile: turn a FlexPipe schedule spec (flexpipe.pipeline) "
      "into verified per-actor programs and write them in the form asked for.\n"
      "The spec goes through partition, placement, the priority-driven "
      "scheduler (CSSR + Algorithm 1), communication insertion and schedule "
      "verification. A file that already holds a flexpipe.schedule, or a "
      "PyTorch schedule CSV, is verified and written.",
      "flexpipe-compile"};
  app.add_option("spec", options.input,
                 "The .mlir file with the spec (- for standard input), or a "
                 "PyTorch schedule .csv")
      ->required();
  app.add_option(
         "--from", options.from,
         "What the input is: mlir (a spec or a schedule) or "
         "torch-csv (a schedule PyTorch's _PipelineScheduleRuntime "
         "reads, compute_only or compute_comms: row r = rank r, stage "
         "s feeds s + 1, each stage on the rank whose row computes "
         "it); default: torch-csv for a .csv (or .CSV) file, mlir otherwise")
      ->check(CLI::IsMember({"mlir", "torch-csv"}));
  app.add_option(
         "--actors", options.actors,
         "Use N actors (devices) instead of the number in each "
         "pipeline spec; placements, in-flight rules and counts in pp, s "
         "and m adapt, and without --model each module's layer count "
         "scales with N (layers per stage kept)")
      ->check(integerAtLeast(1))
      ->type_name("N");
  app.add_option("--microbatches", options.microbatches,
                 "Use M micro-batches per iteration instead of the spec's")
      ->check(integerAtLeast(1))
      ->type_name("M");
  app.add_option("--time-model", options.timeModel,
                 "How long instructions take while scheduling: step (the "
                 "paper's model, every instruction one step) or cost (actors "
                 "pick their next instruction when they become free; forward, "
                 "backward, input- and weight-gradient take 1, 2, 1, 1 units "
                 "per micro-batch on an actor with an average share of the "
                 "layers, a stage in proportion to its layers, or the cost "
                 "model's durations with --model and --cluster, and a "
                 "--profile's for the stages it lists; the step model's order "
                 "is kept when it finishes earlier under those costs, or, "
                 "with files, in the simulation with messages and shared "
                 "cores); without "
                 "--model, --cluster and --profile, report, svg and trace "
                 "time the program the same way")
      ->check(CLI::IsMember({"step", "cost"}))
      ->capture_default_str();
  app.add_option("--step-rule", options.stepRule,
                 "Algorithm 1's step function: next-type (FlexPipe's "
                 "default: when the preferred instruction type's fetch finds "
                 "nothing schedulable, try the next type) or literal (as the "
                 "paper writes it: the actor stays idle for the step; "
                 "docs/Rationale.md)")
      ->check(CLI::IsMember({"next-type", "literal"}))
      ->capture_default_str();
  app.add_option(
         "--emit", options.emit,
         "What to write: schedule (the verified flexpipe.schedule IR), text "
         "(an ASCII grid, one row per actor, one column per step), torch-csv "
         "(PyTorch's compute_only CSV for _PipelineScheduleRuntime._load_csv), "
         "torch-csv-comms (its compute_comms variant: sends, receives "
         "ordered per rank pair, their waits and gradient reduction; "
         "docs/PyTorch.md), report (simulated iteration time, bubbles and "
         "memory per "
         "actor), svg (a timeline picture), trace (Chrome trace JSON for "
         "Perfetto), cpp (one C++ source per rank in the directory -o) or exe "
         "(those sources built into rank executables with launchers)")
      ->check(CLI::IsMember({"schedule", "text", "torch-csv", "torch-csv-comms",
                             "report", "svg", "trace", "cpp", "exe"}))
      ->capture_default_str();
  app.add_option("--balance", options.balance,
                 "How layers are split into stages where the spec gives no "
                 "partition: layers (evenly) or cost (balancing the stages' "
                 "FLOPs with the embedding on the first stage and the LM head "
                 "on the last; needs model<...> sizes in the spec or --model)")
      ->check(CLI::IsMember({"layers", "cost"}))
      ->capture_default_str();
  app.add_option("--backend", options.backend,
                 "Runtime backend the rank executables of --emit=exe link: "
                 "cpu (OpenBLAS and MPI; launch with run-mpi.sh) or cuda "
                 "(one GPU per rank: cuBLAS, own kernels, NCCL; built with "
                 "nvcc, launched with run-env.sh, or run-mpi.sh when the "
                 "runtime has MPI; needs a build with FLEXPIPE_ENABLE_CUDA) "
                 "or cuda-emulation (the cuda backend compiled for the CPU: "
                 "its kernels, cuBLAS products, streams and NCCL emulated, "
                 "slowly, to check a CUDA run where there is no GPU; "
                 "launched as cuda)")
      ->check(CLI::IsMember({"cpu", "cuda", "cuda-emulation"}))
      ->capture_default_str();
  app.add_option("--dp", options.dp,
                 "Data-parallel replicas of the pipeline for --emit=cpp|exe "
                 "(world size = actors x dp; rank a x dp + r runs actor a of "
                 "replica r); for report, svg and trace, the simulated "
                 "devices: actor a of replica r is device a x dp + r, as it "
                 "is rank (Megatron-LM's order, as flexpipe-tune assumes), "
                 "each replica's pipeline is simulated on its devices and the "
                 "slowest shown, and for report the gradient all-reduce over "
                 "the replicas after the pipeline. With --cluster, that "
                 "device layout also prices messages for --time-model=cost "
                 "and gradient separation (replica 0's), so "
                 "every --emit (schedule, text, torch-csv too) gives the "
                 "program for this dp")
      ->check(integerAtLeast(1, kMaxActors))
      ->capture_default_str();
  app.add_option("--model", options.model,
                 "Model YAML (docs/CostModel.md): its modules' sizes replace "
                 "the spec's layer counts (and size the rank executables), "
                 "and its costs on --cluster, which it needs, drive the "
                 "simulation and --time-model=cost")
      ->check(CLI::ExistingFile);
  app.add_option("--cluster", options.cluster,
                 "Cluster YAML (docs/CostModel.md): device throughput, memory "
                 "and links; needs --model")
      ->check(CLI::ExistingFile);
  app.add_option("--profile", options.profile,
                 "Measured profile YAML (docs/CostModel.md): its durations "
                 "replace the analytic ones; alone, it prices the stages it "
                 "lists and every other computation takes 1")
      ->check(CLI::ExistingFile);
  app.add_option("--load-plugin", options.plugins,
                 "Load a scheduler plugin (a shared library with checks, "
                 "priorities and in-flight rules that specs name; "
                 "docs/Plugins.md) before anything else; repeatable")
      ->allow_extra_args(false)
      ->type_name("PATH");
  app.add_option("--ops", options.ops,
                 "C++ source of runtime operations (FLEXPIPE_OPERATION from "
                 "flexpipe/Runtime/UserOps.h) for the registered compute "
                 "instructions the programs run (flexpipe.exec): for "
                 "--emit=exe compiled into every rank executable and into "
                 "'reference' (flexpipe-reference with the operations), which "
                 "also checks that every operation the programs run is "
                 "defined; for --emit=cpp copied beside the rank sources, "
                 "built by build.sh; repeatable (docs/Plugins.md)")
      ->check(CLI::ExistingFile)
      ->allow_extra_args(false)
      ->type_name("FILE.cpp");
  app.add_option("-o,--output", options.output,
                 "Output file (- for standard output); for cpp and exe a "
                 "directory (not -), SPEC_STEM.ranks when not given")
      ->capture_default_str();
  const int exit = parseCommandLine(app, argc, argv);
  for (const CLI::Option *option : app.get_options())
    if (option->count() > 0)
      options.given.insert(option->get_name());
  return exit;
}
