//===- flexpipe-compile.cpp - The FlexPipe driver -------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// spec -> (flexpipe-spec-to-schedule pipeline) -> verified schedule -> output.
// Every error is a located diagnostic and exit code 1.
//
//===----------------------------------------------------------------------===//

#include "Options.h"

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/Simulator.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <numeric>

using namespace mlir;
using namespace flexpipe;

static int compile(const CompileOptions &options) {
  MLIRContext context;
  DialectRegistry registry;
  registry.insert<FlexPipeDialect, func::FuncDialect, emitc::EmitCDialect>();
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(options.input, &error);
  if (!input) {
    llvm::errs() << "flexpipe-compile: " << error << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);

  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  // Cost files.
  if (!options.cluster.empty() && options.model.empty()) {
    llvm::errs() << "flexpipe-compile: --cluster needs --model (the cluster "
                    "prices a model)\n";
    return 1;
  }
  if (!options.model.empty() && options.cluster.empty()) {
    llvm::errs() << "flexpipe-compile: --model needs --cluster (device "
                    "throughput, memory and links)\n";
    return 1;
  }
  sched::ModelConfig model;
  sched::ClusterConfig cluster;
  sched::Profile profile;
  if (!options.model.empty())
    for (const std::string &problem :
         {sched::loadModel(options.model, model),
          sched::loadCluster(options.cluster, cluster)})
      if (!problem.empty()) {
        llvm::errs() << problem << "\n";
        return 1;
      }
  if (!options.profile.empty())
    if (std::string problem = sched::loadProfile(options.profile, profile);
        !problem.empty()) {
      llvm::errs() << problem << "\n";
      return 1;
    }

  size_t specs = 0, schedules = 0;
  for (Operation &op : module->getBody()->getOperations()) {
    if (auto pipeline = dyn_cast<PipelineOp>(op)) {
      ++specs;
      Builder b(&context);
      if (options.actors > 0)
        pipeline.setActorsAttr(b.getI64IntegerAttr(options.actors));
      if (options.microbatches > 0)
        pipeline.setMicrobatchesAttr(b.getI64IntegerAttr(options.microbatches));
      // The model file's sizes replace the spec's layer counts.
      if (!options.model.empty())
        for (auto m : pipeline.getBody().getOps<ModalityOp>()) {
          const sched::ModuleModel *sizes = model.module(m.getSymName().str());
          if (!sizes) {
            m.emitError() << "module @" << m.getSymName()
                          << " is not in the model file '" << options.model
                          << "'; name its modules after the spec's";
            return 1;
          }
          m.setLayersAttr(b.getI64IntegerAttr(sizes->layers));
        }
    } else if (isa<ScheduleOp>(op)) {
      ++schedules;
    }
  }
  if (specs + schedules == 0) {
    emitError(module->getLoc())
        << "'" << options.input
        << "' holds no flexpipe.pipeline or flexpipe.schedule to compile";
    return 1;
  }
  if (schedules > 0 && (options.actors > 0 || options.microbatches > 0) &&
      specs == 0) {
    emitError(module->getLoc())
        << "--actors and --microbatches change specs; '" << options.input
        << "' holds only schedules, whose sizes are fixed";
    return 1;
  }
  // The overrides may make a spec invalid (an explicit map for other sizes,
  // an in-flight rule that starves an actor): verify before scheduling.
  if (failed(verify(*module)))
    return 1;

  PassManager pm(&context);
  SpecToScheduleOptions pipelineOptions;
  pipelineOptions.timeModel = options.timeModel;
  pipelineOptions.modelFile = options.model;
  pipelineOptions.balance = options.balance;
  pipelineOptions.clusterFile = options.cluster;
  buildSpecToSchedulePipeline(pm, pipelineOptions);
  if (failed(pm.run(*module)))
    return 1;

  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(options.output, &error);
  if (!output) {
    llvm::errs() << "flexpipe-compile: " << error << "\n";
    return 1;
  }
  llvm::raw_ostream &os = output->os();

  if (options.emit == "schedule") {
    module->print(os);
    output->keep();
    return 0;
  }
  SmallVector<ScheduleOp> all(module->getOps<ScheduleOp>());
  const bool many = options.emit == "text" || options.emit == "report";
  if (!many && all.size() != 1) {
    emitError(module->getLoc())
        << "--emit=" << options.emit << " writes one schedule, but '"
        << options.input << "' holds " << all.size()
        << "; keep one pipeline per file";
    return 1;
  }
  for (ScheduleOp schedule : all) {
    ScheduleProgram read = readSchedule(schedule);
    if (options.emit == "report" || options.emit == "svg" ||
        options.emit == "trace") {
      sched::Simulator simulator;
      if (!simulator.prepare(read.program, error)) {
        schedule.emitError() << error;
        return 1;
      }
      sched::SimCosts costs;
      if (!options.model.empty()) {
        std::vector<int64_t> devices(read.program.numActors);
        std::iota(devices.begin(), devices.end(), 0);
        error = sched::modelCosts(read.program, model, cluster,
                                  options.profile.empty() ? nullptr : &profile,
                                  devices, costs);
      } else if (!options.profile.empty()) {
        error = sched::profileCosts(read.program, profile, costs);
      } else {
        costs = sched::unitCosts(read.program);
      }
      if (!error.empty()) {
        schedule.emitError() << error;
        return 1;
      }
      sched::SimResult result = simulator.run(costs);
      sched::ReportContext context;
      context.name = schedule.getSymName().str();
      if (!options.model.empty() && !model.modules.empty())
        context.tokensPerIteration =
            static_cast<double>(read.program.numMicrobatches) *
            model.microBatchSize * model.modules.front().seq;
      if (options.emit == "report")
        os << sched::formatReport(read.program, result, costs, context);
      else if (options.emit == "svg")
        os << sched::formatSvg(read.program, result, costs, context);
      else
        os << sched::formatTrace(read.program, result, costs, context);
      continue;
    }
    sched::Timeline timeline = sched::unitTimeline(read.program);
    if (!timeline.ok) {
      schedule.emitError() << "cannot be replayed to a timeline";
      return 1;
    }
    if (options.emit == "text") {
      os << "schedule @" << schedule.getSymName() << ": "
         << read.program.numActors << " actors, " << read.program.numStages
         << " stages, " << read.program.numMicrobatches << " micro-batches, "
         << static_cast<int64_t>(timeline.makespan)
         << " steps when every computation takes one step\n"
         << "(cells: stage, F forward / B backward / I input gradient / W "
            "weight gradient, micro-batch; . idle)\n"
         << sched::formatTextGrid(read.program, timeline);
    } else if (options.emit == "torch-csv") {
      os << sched::formatTorchCsv(read.program, timeline);
    } else {
      os << sched::formatTorchCsvComms(read.program);
    }
  }
  output->keep();
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  CompileOptions options;
  if (int code = parseCompileOptions(argc, argv, options); code >= 0)
    return code;
  registerFlexPipePassesAndPipelines();
  return compile(options);
}
