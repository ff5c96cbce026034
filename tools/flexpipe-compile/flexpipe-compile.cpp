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

#include "../LongLines.h"
#include "../OutputFile.h"
#include "../ProcessSetup.h"
#include "../ShellQuote.h"
#include "Options.h"
#include "Ranks.h"

#include "flexpipe/Config.h"
#include "flexpipe/Conversion/FlexPipeToEmitC/FlexPipeToEmitC.h"
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Plugin.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/Simulator.h"
#include "flexpipe/Scheduling/TorchFormat.h"
#include "flexpipe/Support/InputLimits.h"
#include "flexpipe/Support/ReadInput.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

using namespace mlir;
using namespace flexpipe;

/// Marks a module imported from a compute_comms CSV: its transfers follow
/// PyTorch's rule of one FIFO channel per rank pair.
static constexpr llvm::StringLiteral kUntaggedAttr = "flexpipe.untagged";

/// What a schedule that does not say what its stages hold (no stage_info: a
/// PyTorch CSV, a hand-written schedule) holds with a model file: the
/// file's one module, its layers split evenly over the stages in order
/// (sched::evenPartition), for the cost model and the runtime. Returns why
/// not, or an empty string.
static std::string splitModelEvenly(sched::Program &program,
                                    const sched::ModelConfig &model,
                                    const std::string &modelFile) {
  if (model.modules.size() != 1)
    return "a schedule without stage_info is read as one chain of stages, "
           "but the model file '" +
           modelFile + "' has " + std::to_string(model.modules.size()) +
           " modules; give it one, or the schedule a stage_info";
  const sched::ModuleModel &module = model.modules.front();
  if (module.layers < program.numStages)
    return "cannot split the " + std::to_string(module.layers) +
           " layers of module '" + module.name + "' over " +
           std::to_string(program.numStages) + " stages";
  const std::vector<int64_t> layers =
      sched::evenPartition(module.layers, program.numStages);
  program.moduleNames = {module.name};
  program.stageMeta.clear();
  for (int32_t s = 0; s < program.numStages; ++s) {
    sched::StageMeta meta;
    meta.module = 0;
    meta.layers = layers[s];
    meta.first = s == 0;
    meta.last = s == program.numStages - 1;
    program.stageMeta.push_back(meta);
  }
  return "";
}

/// Reads a PyTorch schedule CSV into a module holding one flexpipe.schedule
/// named after the file, its stages sized by the model file where one is
/// given (splitModelEvenly). Prints an error naming the file and returns
/// null when the file cannot be read.
static OwningOpRef<ModuleOp>
importTorchSchedule(MLIRContext &context, const std::string &input,
                    const CompileOptions &options,
                    const sched::ModelConfig &model) {
  // The lines as the reader numbers them, for the diagnostics' echo too.
  const std::string text = sched::torchCsvLines(input);
  const std::string file =
      options.input == "-" ? std::string("<stdin>") : options.input;
  auto fail = [&](const std::string &message) {
    llvm::errs() << file << ": error: " << message << "\n";
    return OwningOpRef<ModuleOp>();
  };
  // At its cell, with the line, as the verifier's diagnostics are (a line
  // with control bytes, or that is not UTF-8, is not echoed to the
  // terminal).
  auto report = [&](llvm::Error error) {
    llvm::handleAllErrors(
        std::move(error),
        [&](const sched::TorchCsvError &e) {
          if (e.line <= 0)
            return (void)fail(e.what);
          llvm::SourceMgr lines;
          lines.AddNewSourceBuffer(
              llvm::MemoryBuffer::getMemBuffer(text, file, false),
              llvm::SMLoc());
          const llvm::SMLoc at =
              lines.FindLocForLineAndColumn(1, e.line, std::max(1, e.column));
          const llvm::SMDiagnostic diagnostic =
              lines.GetMessage(at, llvm::SourceMgr::DK_Error, e.what);
          if (!sched::isTerminalSafe(diagnostic.getLineContents()))
            llvm::errs() << file << ":" << e.line << ":"
                         << std::max(1, e.column) << ": error: " << e.what
                         << "\n";
          else
            diagnostic.print(nullptr, llvm::errs());
        },
        [&](const llvm::ErrorInfoBase &e) { fail(e.message()); });
    return OwningOpRef<ModuleOp>();
  };
  sched::Program program;
  bool comms = false;
  std::vector<std::vector<int32_t>> cells;
  if (llvm::Error error = sched::parseTorchCsv(text, program, &comms, &cells))
    return report(std::move(error));
  if (comms) {
    // As written: on NCCL a pair's transfers run in the order posted. (The
    // verifier's located errors, for a file it refuses, come first.)
    if (!sched::verify(program, sched::ChannelRule::PerPair))
      if (llvm::Error error = sched::checkPairOrder(program, &cells))
        return report(std::move(error));
  } else if (sched::Program lowered = program;
             sched::insertCommunication(lowered),
             llvm::errorToBool(sched::orderTransfersPerPair(lowered))) {
    // The computations' orders cannot run with those transfers: the
    // verifier says where, at the cell of the computation the transfer
    // serves (a receive stands right before it), and that the transfers
    // are PyTorch's, not the file's.
    // (A copy: the failed ordering may have moved `lowered`'s transfers.)
    sched::Program plain = program;
    sched::insertCommunication(plain);
    if (std::optional<sched::VerifyFailure> f =
            sched::verify(plain, sched::ChannelRule::PerPair);
        f && !f->at.empty()) {
      const sched::VerifyFailure::At &at = f->at.front();
      size_t k = 0;
      for (int32_t i = 0; i < at.index; ++i)
        k += sched::isCompute(plain.actors[at.actor][i].kind);
      const std::vector<int32_t> &row = cells[at.actor];
      return report(llvm::make_error<sched::TorchCsvError>(
          at.actor + 1, row.empty() ? 1 : row[std::min(k, row.size() - 1)],
          f->message +
              " (a compute_only file: these are the transfers PyTorch's "
              "runtime adds, each receive right before the computation that "
              "needs it and each send right after the one that makes it, so "
              "the ranks' orders must let each pair's messages arrive in the "
              "order sent)"));
    }
  } else {
    // What PyTorch's runtime adds to a compute_only file: each receive
    // posted where its sender sends.
    for (int32_t a = 0; a < lowered.numActors; ++a) {
      std::vector<int32_t> columns;
      size_t next = 0;
      for (const sched::ProgOp &op : lowered.actors[a])
        columns.push_back(sched::isCompute(op.kind) && next < cells[a].size()
                              ? cells[a][next++]
                              : 0);
      cells[a] = std::move(columns);
    }
    program = std::move(lowered);
    comms = true;
  }
  if (!options.model.empty())
    if (std::string problem = splitModelEvenly(program, model, options.model);
        !problem.empty())
      return fail(problem);
  Location loc = FileLineColLoc::get(&context, file, 1, 1);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(module->getBody(), module->getBody()->end());
  // Named after the file ("torch_schedule" for a file named ".csv" or for
  // standard input).
  StringRef name =
      options.input == "-" ? "" : llvm::sys::path::stem(options.input);
  ScheduleOp schedule = createSchedule(
      b, loc, b.getStringAttr(name.empty() ? "torch_schedule" : name), program);
  // Each instruction at its cell (line = rank + 1), so that the verifier's
  // diagnostics point into the file.
  for (auto actor : schedule.getBody().getOps<ActorOp>()) {
    const auto &row = cells[actor.getId()];
    const auto line = static_cast<unsigned>(actor.getId() + 1);
    actor->setLoc(FileLineColLoc::get(&context, file, line, 1));
    size_t i = 0;
    for (Operation &op : actor.getBody().front()) {
      const unsigned cell = i < row.size() ? row[i] : 0;
      op.setLoc(FileLineColLoc::get(&context, file, line, cell ? cell : 1));
      ++i;
    }
  }
  if (comms)
    (*module)->setAttr(kUntaggedAttr, b.getUnitAttr());
  return module;
}

/// The most cells (actors x steps) --emit=text and torch-csv write: about
/// 300 MB of text.
constexpr double kMaxTextGridCells = 1 << 26;

/// Whether --emit=`emit` writes what the simulator times (report, svg,
/// trace), the outputs --dp changes besides the rank programs.
static bool isSimulated(StringRef emit) {
  return emit == "report" || emit == "svg" || emit == "trace";
}

/// Option combinations the parser cannot see, and the cost files, read once
/// for every step that prices (the passes, the report, the lowering).
/// Reports and returns null on an error.
static std::shared_ptr<const sched::CostInputs>
loadCostFiles(const CompileOptions &options) {
  // (--backend with another --emit was taken and did nothing.)
  if (options.emit != "cpp" && options.emit != "exe") {
    SmallVector<StringRef> ranksOnly;
    for (StringRef name : {"--ops", "--backend"})
      if (options.isGiven(name.str()))
        ranksOnly.push_back(name);
    if (!ranksOnly.empty()) {
      llvm::errs() << "flexpipe-compile: " << llvm::join(ranksOnly, ", ")
                   << " shape" << (ranksOnly.size() == 1 ? "s" : "")
                   << " the rank programs; "
                   << (ranksOnly.size() == 1 ? "it needs" : "they need")
                   << " --emit=cpp or --emit=exe, not --emit=" << options.emit
                   << "\n";
      return nullptr;
    }
  }
  if (!options.cluster.empty() && options.model.empty()) {
    llvm::errs() << "flexpipe-compile: --cluster needs --model (the cluster "
                    "prices a model)\n";
    return nullptr;
  }
  if (!options.model.empty() && options.cluster.empty()) {
    llvm::errs() << "flexpipe-compile: --model needs --cluster (device "
                    "throughput, memory and links)\n";
    return nullptr;
  }
  auto inputs = std::make_shared<sched::CostInputs>();
  if (llvm::Error problem = sched::loadCostInputs(
          options.model, options.cluster, options.profile, *inputs)) {
    llvm::errs() << llvm::toString(std::move(problem)) << "\n";
    return nullptr;
  }
  return inputs;
}

/// The model file's sizes, or none.
static const sched::ModelConfig &modelOf(const sched::CostInputs &inputs) {
  static const sched::ModelConfig kNone;
  return inputs.model ? *inputs.model : kNone;
}

/// Reads the input: a PyTorch CSV, or MLIR parsed through `sourceMgr` (with
/// its long lines kept out of diagnostics). Null after a reported error.
static OwningOpRef<ModuleOp>
readInput(MLIRContext &context, const CompileOptions &options,
          const sched::ModelConfig &model, llvm::SourceMgr &sourceMgr,
          SourceMgrDiagnosticHandler &handler,
          std::optional<LongLineDiagnostics> &longLines) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> read =
      readInputFile(options.input);
  if (!read) {
    llvm::errs() << "flexpipe-compile: cannot open input file '"
                 << options.input << "': " << readInputError(read.getError())
                 << "\n";
    return nullptr;
  }
  std::unique_ptr<llvm::MemoryBuffer> input = std::move(*read);
  const bool fromTorch =
      options.from == "torch-csv" ||
      (options.from.empty() &&
       StringRef(options.input).ends_with_insensitive(".csv"));
  if (fromTorch)
    return importTorchSchedule(context, input->getBuffer().str(), options,
                               model);
  // Bounds MLIR's parser does not keep (InputLimits.h), before it parses;
  // the text's, not bytecode's (which keeps strings and arrays raw).
  const bool bytecode = isBytecode(input->getMemBufferRef());
  if (std::string problem =
          bytecode ? ""
                   : checkInputLimits(input->getBuffer(), options.input == "-"
                                                              ? "<stdin>"
                                                              : options.input);
      !problem.empty()) {
    llvm::errs() << problem << "\n";
    return nullptr;
  }
  if (!bytecode)
    longLines.emplace(handler, &context, input->getBuffer());
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  // Verified by applyOverrides, once --actors, --microbatches and the model
  // file have set the sizes the spec is compiled at.
  return parseSourceFile<ModuleOp>(
      sourceMgr, ParserConfig(&context, /*verifyAfterParse=*/false));
}

/// A schedule the user handed in (not one made from a spec here), and
/// whether it came with its communication.
struct HandedIn {
  ScheduleOp schedule;
  bool transfers;
};
static SmallVector<HandedIn> handedInSchedules(ModuleOp module) {
  SmallVector<HandedIn> handedIn;
  for (ScheduleOp schedule : module.getOps<ScheduleOp>()) {
    bool transfers = false;
    schedule.walk([&](Operation *op) {
      transfers |= isa<SendActOp, RecvActOp, SendGradOp, RecvGradOp>(op);
    });
    handedIn.push_back({schedule, transfers});
  }
  return handedIn;
}

/// -flexpipe-gradient-separation as this compile would run it.
static std::string separationPass(const CompileOptions &options) {
  std::string args = "requested-only=true";
  if (options.timeModel != "step")
    args += " time-model=" + options.timeModel;
  for (auto [key, file] : {std::pair{"model", &options.model},
                           std::pair{"cluster", &options.cluster}})
    if (!file->empty())
      args += std::string(" ") + key + "=" + *file;
  if (options.dp != 1)
    args += " dp=" + std::to_string(options.dp);
  return args.find(' ') == std::string::npos
             ? "--flexpipe-gradient-separation=" + args
             : "--flexpipe-gradient-separation=" + shellQuote(args);
}

/// A schedule's flexpipe.optimize records what its spec asked for;
/// flexpipe-compile applies a request when it schedules the spec, not to a
/// schedule handed in. Warns, once the schedule is verified and has its
/// communication, where it shows no sign of a request: no input-gradient
/// op (split_backward), no separation figures (gradient_separation), a
/// blocking receive (async_comm), and says how to apply it: gradient
/// separation with the costs this compile times programs with (the pass's
/// own defaults are the step model's).
static void warnUnappliedRequests(const HandedIn &handedIn,
                                  const CompileOptions &options) {
  ScheduleOp schedule = handedIn.schedule;
  auto requested = schedule->getAttrOfType<DictionaryAttr>("flexpipe.optimize");
  if (!requested)
    return;
  bool split = false, blocking = false;
  schedule.walk([&](Operation *op) {
    split |= isa<IgradOp>(op);
    blocking |= isa<RecvActOp, RecvGradOp>(op) && op->getNumResults() == 0;
  });
  SmallVector<StringRef> missing;
  SmallVector<std::string> passes;
  bool separationAfterComm = false;
  if (requested.contains("split_backward") && !split) {
    missing.push_back("split_backward");
    passes.push_back("--flexpipe-split-backward=requested-only=true");
  }
  if (requested.contains("gradient_separation") &&
      !schedule->hasAttr("flexpipe.separation")) {
    missing.push_back("gradient_separation");
    if (handedIn.transfers)
      separationAfterComm = true;
    else
      passes.push_back(separationPass(options));
  }
  if (requested.contains("async_comm") && blocking) {
    missing.push_back("async_comm");
    passes.push_back("--flexpipe-insert-comm");
    passes.push_back("--flexpipe-async-comm=requested-only=true");
  }
  if (missing.empty())
    return;
  InFlightDiagnostic warning = schedule.emitWarning();
  warning << "asks for " << llvm::join(missing, ", ")
          << " (flexpipe.optimize), which its program does not show: "
             "flexpipe-compile applies a request when it schedules a spec, "
             "not to a schedule handed in";
  if (!passes.empty())
    warning << "; apply it first with flexpipe-opt FILE "
            << llvm::join(passes, " ");
  if (separationAfterComm)
    warning << "; gradient separation reorders a program before its "
               "communication: ask for it in the spec, or hand in the "
               "program without its transfers";
}

/// With a model file, a schedule that does not say what its stages hold
/// (no stage_info) holds the model's one module split evenly, as an
/// imported PyTorch CSV does; a stage DAG or shared stages need a stage_info.
static LogicalResult sizeSchedule(ScheduleOp schedule,
                                  const CompileOptions &options,
                                  const sched::ModelConfig &model) {
  if (options.model.empty() || failed(schedule.verifyInvariantsImpl()))
    return success(options.model.empty());
  if (schedule.getStageInfoAttr())
    return success();
  // Explicit edges that spell the default chain 0 -> 1 -> ... are that
  // chain (they read "not one chain").
  SmallVector<std::pair<int64_t, int64_t>> edges = schedule.getEdgeList();
  llvm::sort(edges);
  bool chain = static_cast<int64_t>(edges.size()) + 1 ==
               static_cast<int64_t>(schedule.getStages());
  for (size_t i = 0; chain && i < edges.size(); ++i)
    chain = edges[i] == std::pair<int64_t, int64_t>(i, i + 1);
  if (!chain || schedule.getSharedAttr())
    return schedule.emitOpError()
           << "does not say what its stages hold (no stage_info), and its "
              "stages are not one chain (edges or shared stages): give it a "
              "stage_info to price it with the model file '"
           << options.model << "'";
  sched::Program program;
  program.numStages = static_cast<int32_t>(schedule.getStages());
  if (std::string problem = splitModelEvenly(program, model, options.model);
      !problem.empty())
    return schedule.emitError() << problem;
  Builder b(schedule.getContext());
  schedule.setStageInfoAttr(stageInfoAttr(b, program));
  return success();
}

/// An actor's own priority stays with its number, which is another place in
/// a resized pipeline (the last actor's 1F1B in a GPipe spec ran on a
/// middle one: plain GPipe, without a word). `resized` says how.
static void warnActorNumbers(PipelineOp pipeline, StringRef resized) {
  for (auto priority : pipeline.getBody().getOps<PriorityOp>())
    if (std::optional<ArrayRef<int64_t>> ids = priority.getActorIds();
        ids && llvm::any_of(*ids, [](int64_t id) { return id > 0; }))
      priority.emitWarning()
          << "names actors by number, and " << resized
          << ": they are the same numbers, not the same places in the "
             "pipeline; count from the last actor (-1, -2, ...) to follow "
             "the size";
}

/// --actors, --microbatches and the model file's layer counts, applied to
/// every spec; schedules keep their sizes. Then verifies the module (parsed
/// unverified): a spec is judged at the sizes it is compiled at, so a spec
/// written for other sizes may become valid or invalid (an explicit map, an
/// in-flight rule that starves an actor). An error at an op whose size an
/// option set gets a note that says where that size came from, until
/// `notes` goes (the scheduler's errors too: it is kept by locations, which
/// outlive the specs the passes replace).
struct OverrideNotes {
  /// What the options changed at each location.
  llvm::DenseMap<Location, std::string> changed;
  /// Notes for errors inside a pipeline too, when they are about what an
  /// option replaced (an in-flight limit per actor that --actors left one
  /// short, a module that needs more micro-batches than --microbatches
  /// gave).
  struct Within {
    llvm::DenseSet<Location> inner; // the pipeline's ops but itself
    llvm::SmallVector<llvm::StringRef, 2> about; // words the error's text
                                                 // mentions (any of them)
    std::string note;
  };
  std::vector<Within> within;
  std::optional<ScopedDiagnosticHandler> handler;
};

static LogicalResult applyOverrides(ModuleOp module,
                                    const CompileOptions &options,
                                    const sched::ModelConfig &model,
                                    OverrideNotes &notes) {
  Builder b(module.getContext());
  auto &changed = notes.changed;
  auto &within = notes.within;
  auto note = [&](Operation *op, const std::string &what) {
    std::string &text = changed[op->getLoc()];
    text += (text.empty() ? "" : "; ") + what;
  };
  auto inside = [](Operation *pipeline) {
    llvm::DenseSet<Location> inner;
    pipeline->walk([&](Operation *op) {
      if (op != pipeline)
        inner.insert(op->getLoc());
    });
    inner.erase(pipeline->getLoc());
    return inner;
  };
  if (failed(checkTopLevel(module)))
    return failure();
  size_t specs = 0, schedules = 0;
  for (Operation &op : module.getBody()->getOperations()) {
    if (auto schedule = dyn_cast<ScheduleOp>(op)) {
      ++schedules;
      if (failed(sizeSchedule(schedule, options, model)))
        return failure();
      continue;
    }
    auto pipeline = dyn_cast<PipelineOp>(op);
    if (!pipeline)
      continue;
    ++specs;
    // The attributes read below exist (the rest is verified at the end).
    if (failed(pipeline.verifyInvariantsImpl()) ||
        llvm::any_of(pipeline.getBody().getOps<ModalityOp>(),
                     [](auto m) { return failed(m.verifyInvariantsImpl()); }))
      return failure();
    if (options.actors > 0) {
      // Without a model, a spec's layer counts only set its stages'
      // relative sizes: they scale with the actors (layers per stage kept)
      // so that every size gets the stages the spec was written with.
      const int64_t written = pipeline.getActors();
      const std::string actors = llvm::formatv(
          "--actors {0} replaced actors({1})", options.actors, written);
      note(pipeline, actors);
      // (The stages follow the actors: per actor, or per scaled layer.)
      within.push_back({inside(pipeline), {"actor", "stage"}, actors});
      if (written != options.actors)
        warnActorNumbers(pipeline, actors);
      for (auto m : pipeline.getBody().getOps<ModalityOp>()) {
        // (A count beyond int32 is left for the verifier to refuse, not
        // scaled past 2^64 into a small one.)
        if (!options.model.empty() || written < 1 || m.getActorGroup() ||
            m.getPartition() || m.getLayers() > INT32_MAX) {
          note(m, actors);
          continue;
        }
        const int64_t layers =
            (m.getLayers() * options.actors + written - 1) / written;
        note(m, llvm::formatv("{0} and scaled layers({1}) to {2} (layers per "
                              "actor kept)",
                              actors, m.getLayers(), layers));
        m.setLayersAttr(b.getI64IntegerAttr(layers));
      }
      pipeline.setActorsAttr(b.getI64IntegerAttr(options.actors));
    }
    if (options.microbatches > 0) {
      const std::string replaced =
          llvm::formatv("--microbatches {0} replaced microbatches({1})",
                        options.microbatches, pipeline.getMicrobatches());
      note(pipeline, replaced);
      within.push_back({inside(pipeline), {"micro-batch"}, replaced});
      pipeline.setMicrobatchesAttr(b.getI64IntegerAttr(options.microbatches));
    }
    // The model file's sizes replace the spec's layer counts.
    if (!options.model.empty())
      for (auto m : pipeline.getBody().getOps<ModalityOp>()) {
        const sched::ModuleModel *sizes = model.module(m.getSymName().str());
        if (!sizes)
          return m.emitError() << "module @" << m.getSymName()
                               << " is not in the model file '" << options.model
                               << "'; name its modules after the spec's";
        if (static_cast<uint64_t>(sizes->layers) != m.getLayers())
          note(m, llvm::formatv("the model file '{0}' gives @{1} {2} layers, "
                                "in place of the spec's layers({3})",
                                options.model, m.getSymName(), sizes->layers,
                                m.getLayers()));
        m.setLayersAttr(b.getI64IntegerAttr(sizes->layers));
      }
  }
  notes.handler.emplace(module.getContext(), [&notes](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return failure();
    const Location at = diag.getLocation();
    const std::string own = notes.changed.lookup(at);
    if (!own.empty())
      diag.attachNote() << own;
    // (Unless the op's own note says it already.)
    const std::string text = diag.str();
    for (const OverrideNotes::Within &w : notes.within)
      if (llvm::any_of(w.about,
                       [&](llvm::StringRef word) {
                         return llvm::StringRef(text).contains(word);
                       }) &&
          w.inner.contains(at) && !llvm::StringRef(own).contains(w.note))
        diag.attachNote() << w.note;
    return failure(); // on to the handler that prints it
  });
  if (specs + schedules == 0) {
    // At the first op, else the file's start (an implicit module is at
    // line 0).
    Location at = module.getLoc();
    if (!module.getBody()->empty())
      at = module.getBody()->front().getLoc();
    else if (auto file = dyn_cast<FileLineColLoc>(at); file && !file.getLine())
      at = FileLineColLoc::get(file.getFilename(), 1, 1);
    return emitError(at)
           << "'" << options.input
           << "' holds no flexpipe.pipeline or flexpipe.schedule to compile";
  }
  // (At the first schedule: a file without `module {` has an implicit one,
  // located at line 0.)
  if (schedules > 0 && specs == 0) {
    // (--balance and --step-rule were taken and did nothing.)
    SmallVector<StringRef> specOnly;
    for (StringRef name :
         {"--actors", "--microbatches", "--balance", "--step-rule"})
      if (options.isGiven(name.str()))
        specOnly.push_back(name);
    if (!specOnly.empty())
      return emitError((*module.getOps<ScheduleOp>().begin()).getLoc())
             << llvm::join(specOnly, ", ") << " change"
             << (specOnly.size() == 1 ? "s" : "") << " specs; '"
             << options.input
             << "' holds only schedules, whose sizes, stages and order are "
                "fixed";
  }
  return verify(module);
}

/// Specs to verified schedules: flexpipe-spec-to-schedule with the options.
static LogicalResult
scheduleSpecs(MLIRContext &context, ModuleOp module,
              const CompileOptions &options,
              std::shared_ptr<const sched::CostInputs> inputs) {
  PassManager pm(&context);
  // The pipeline's own option names read the choices (checked already by
  // the command line); the files come read.
  SpecToScheduleOptions pipelineOptions;
  std::string choices = "time-model=" + options.timeModel +
                        " step-rule=" + options.stepRule +
                        " balance=" + options.balance;
  // An imported compute_comms file runs on PyTorch's untagged messages.
  if (module->hasAttr(kUntaggedAttr))
    choices += " channels=pair";
  if (failed(pipelineOptions.parseFromString(choices)))
    return failure();
  pipelineOptions.modelFile = options.model;
  pipelineOptions.clusterFile = options.cluster;
  pipelineOptions.dp = options.dp;
  buildSpecToSchedulePipeline(pm, pipelineOptions, std::move(inputs));
  return pm.run(module);
}

/// --emit=report|svg|trace: one schedule simulated with the costs the options
/// give (model and cluster, a profile, or else by --time-model: one unit per
/// computation, or 1, 2, 1, 1 per layer as the scheduler timed them); with
/// --dp, the slowest replica's pipeline.
static LogicalResult simulate(ScheduleOp schedule,
                              const sched::Program &program,
                              const CompileOptions &options,
                              const sched::CostInputs &inputs,
                              sched::Simulator::ReplicaRun &run) {
  sched::Simulator simulator;
  if (llvm::Error error = simulator.prepare(program))
    return schedule.emitError() << llvm::toString(std::move(error));
  if (llvm::Error error = simulator.runSlowestReplica(
          program, inputs, options.dp,
          options.timeModel == "cost" ? sched::TimeModel::Cost
                                      : sched::TimeModel::Step,
          run))
    return schedule.emitError() << llvm::toString(std::move(error));
  return success();
}

static LogicalResult emitSimulated(ScheduleOp schedule,
                                   const sched::Program &program,
                                   const CompileOptions &options,
                                   const sched::CostInputs &inputs,
                                   raw_ostream &os) {
  sched::Simulator::ReplicaRun run;
  if (failed(simulate(schedule, program, options, inputs, run)))
    return failure();
  const sched::SimCosts &costs = run.costs;
  const sched::SimResult &result = run.result;
  sched::ReportContext context;
  context.name = schedule.getSymName().str();
  context.replica = run.replica;
  context.replicas = options.dp;
  if (inputs.hasModel() && !inputs.model->modules.empty()) {
    const sched::ModelConfig &model = *inputs.model;
    // simulate() checked that the cluster holds the job.
    const sched::ClusterConfig cluster = llvm::cantFail(
        sched::clusterForJob(*inputs.cluster, program.numActors, options.dp));
    context.tokensPerIteration = static_cast<double>(program.numMicrobatches) *
                                 model.microBatchSize *
                                 model.tokensPerSample(program.moduleNames);
    // The gradient all-reduce, exchanges and optimizer step after the
    // pipeline, as flexpipe-tune prices them (the step as a run's own
    // profile measured it, where it did).
    const sched::StageLayout layout = sched::stageLayoutOf(program);
    context.after = sched::afterPipeline(
        layout, sched::actorHoldings(layout, model, cluster), options.dp, model,
        cluster, inputs.profileOrNull());
  }
  if (options.emit == "report")
    os << sched::formatReport(program, result, costs, context);
  else if (options.emit == "svg")
    os << sched::formatSvg(program, result, costs, context);
  else
    os << sched::formatTrace(program, result, costs, context);
  return success();
}

/// --emit=text|torch-csv|torch-csv-comms: one schedule replayed in unit
/// steps.
static LogicalResult emitReplayed(ScheduleOp schedule,
                                  const ScheduleProgram &read,
                                  const CompileOptions &options,
                                  raw_ostream &os) {
  const sched::Program &program = read.program;
  sched::Timeline timeline = sched::unitTimeline(program);
  if (!timeline.ok)
    return schedule.emitError() << "cannot be replayed to a timeline";
  // The grid and PyTorch's compute_only CSV have a cell per actor and step,
  // most of them idle at large sizes: bounded so that they stay files to
  // read, not gigabytes built in memory.
  const double cells =
      static_cast<double>(program.numActors) * timeline.makespan;
  if ((options.emit == "text" || options.emit == "torch-csv") &&
      cells > kMaxTextGridCells)
    return schedule.emitError()
           << "--emit=" << options.emit << " would write " << program.numActors
           << " actors x " << static_cast<int64_t>(timeline.makespan)
           << " steps, more than " << static_cast<int64_t>(kMaxTextGridCells)
           << " cells; use --emit=report, svg, trace"
           << (options.emit == "torch-csv" ? ", schedule or torch-csv-comms"
                                           : " or schedule");
  if (options.emit == "text") {
    os << "schedule " << sched::formatSymbol(schedule.getSymName().str())
       << ": " << sched::formatShape(program) << ", "
       << static_cast<int64_t>(timeline.makespan)
       << " steps when every computation takes one step\n"
       << "(cells: stage, F forward / B backward / I input gradient / W "
          "weight gradient"
       << (llvm::any_of(program.actors,
                        [](const auto &ops) {
                          return llvm::any_of(ops, [](const sched::ProgOp &op) {
                            return op.kind == sched::OpKind::Exec;
                          });
                        })
               ? " / @name a registered instruction"
               : "")
       << ", micro-batch; . idle)\n"
       << sched::formatTextGrid(program, timeline);
    // Collectives take no step in this model, so they have no cells: said
    // below the grid, once per stage and group (--emit=schedule lists them).
    std::map<std::tuple<int32_t, sched::OpKind, int32_t>, int64_t> collectives;
    for (const auto &ops : program.actors)
      for (const sched::ProgOp &op : ops)
        if (sched::isCollective(op.kind))
          ++collectives[{op.stage, op.kind, op.group}];
    for (const auto &[key, count] : collectives) {
      const auto &[stage, kind, group] = key;
      const std::vector<int32_t> &members = program.groups[group];
      os << "not drawn: " << sched::opKindName(kind) << " of stage " << stage
         << " on actors [";
      llvm::interleaveComma(members, os);
      os << "], " << count / static_cast<int64_t>(members.size())
         << " instances (collectives take no step)\n";
    }
    return success();
  }
  // A registered instruction or collective is refused at its op (in a
  // spec's schedule, the flexpipe.instruction it runs).
  std::pair<int32_t, int32_t> at{-1, -1};
  if (llvm::Error error = sched::checkTorchExpressible(program, &at)) {
    Operation *where = schedule;
    if (at.first >= 0) {
      const int32_t source = program.actors[at.first][at.second].source;
      if (source >= 0 &&
          source < static_cast<int32_t>(read.ops[at.first].size()))
        where = read.ops[at.first][source];
    }
    return where->emitError() << "--emit=" << options.emit << " cannot write '"
                              << schedule.getSymName()
                              << "': " << llvm::toString(std::move(error));
  }
  if (options.emit == "torch-csv") {
    os << sched::formatTorchCsv(program, timeline);
    return success();
  }
  llvm::Expected<std::string> csv = sched::formatTorchCsvComms(program);
  if (!csv)
    return schedule.emitError()
           << "--emit=torch-csv-comms: " << llvm::toString(csv.takeError());
  os << *csv;
  return success();
}

/// --emit=cpp|exe with a model: each schedule's peak activation memory per
/// actor as the cost model predicts it (the report's), for the ranks to
/// print beside what they measure (kPredictedPeakAttr).
/// The backends keep different attention arrays: the CPU backend the
/// scores (s x s per head), the CUDA backend none (it recomputes them, as
/// FlashAttention does). A model file that says otherwise gets predicted
/// peaks that the ranks do not reach (or exceed); say so once.
static void warnAttentionMismatch(const CompileOptions &options,
                                  const sched::ModelConfig &model) {
  const bool keepsNoScores = options.backend != "cpu";
  if (model.flashAttention == keepsNoScores)
    return;
  llvm::errs() << "flexpipe-compile: warning: the " << options.backend
               << " backend's attention keeps "
               << (keepsNoScores ? "no scores (it recomputes them)"
                                 : "its s x s scores per head")
               << ", but '" << options.model << "' prices it as "
               << (model.flashAttention ? "flash" : "materialized")
               << ": the peak activation memory predicted for the ranks "
               << (keepsNoScores ? "counts scores they do not keep"
                                 : "leaves out the scores they keep")
               << "; say 'attention: "
               << (keepsNoScores ? "flash" : "materialized")
               << "' there for this backend\n";
}

/// The CPU backend computes in fp32 whatever the model file's dtype says;
/// a model priced in 2-byte elements (bf16, the default, or fp16) predicts
/// half its activation memory.
static void warnDtypeMismatch(const CompileOptions &options,
                              const sched::ModelConfig &model) {
  if (options.backend != "cpu" || model.dtypeBytes == 4)
    return;
  llvm::errs() << "flexpipe-compile: warning: the cpu backend computes in "
                  "fp32, but '"
               << options.model << "' prices " << model.dtype
               << " activations (dtype " << model.dtype
               << (model.dtype == "bf16" ? ", also the default" : "")
               << "): the peak activation memory predicted for the ranks is "
                  "half what they keep; say 'dtype: fp32' there for this "
                  "backend\n";
}

static LogicalResult predictMemory(ModuleOp module,
                                   const CompileOptions &options,
                                   const sched::CostInputs &inputs) {
  if (!inputs.hasModel())
    return success();
  warnAttentionMismatch(options, *inputs.model);
  warnDtypeMismatch(options, *inputs.model);
  for (ScheduleOp schedule : module.getOps<ScheduleOp>()) {
    sched::Simulator::ReplicaRun run;
    if (failed(simulate(schedule, readSchedule(schedule).program, options,
                        inputs, run)))
      return failure();
    schedule->setAttr(kPredictedPeakAttr,
                      DenseF64ArrayAttr::get(schedule.getContext(),
                                             run.result.peakActivation));
  }
  return success();
}

static int compile(const CompileOptions &options) {
  MLIRContext context;
  DialectRegistry registry;
  registry.insert<FlexPipeDialect, func::FuncDialect, emitc::EmitCDialect>();
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);

  std::shared_ptr<const sched::CostInputs> inputs = loadCostFiles(options);
  if (!inputs)
    return 1;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::optional<LongLineDiagnostics> longLines;
  OwningOpRef<ModuleOp> module = readInput(context, options, modelOf(*inputs),
                                           sourceMgr, handler, longLines);
  if (!module)
    return 1;
  const SmallVector<HandedIn> handedIn = handedInSchedules(*module);
  OverrideNotes notes;
  if (failed(applyOverrides(*module, options, modelOf(*inputs), notes)) ||
      failed(scheduleSpecs(context, *module, options, inputs)))
    return 1;
  for (const HandedIn &schedule : handedIn)
    warnUnappliedRequests(schedule, options);

  SmallVector<ScheduleOp> all(module->getOps<ScheduleOp>());
  // Every output but the schedule IR and the text views is of one schedule:
  // two in one file wrote the second's rank sources over the first's, beside
  // the first's description.
  const bool many = options.emit == "schedule" || options.emit == "text" ||
                    options.emit == "report";
  if (!many && all.size() != 1) {
    // At the second schedule (the module's own location is FILE:0:0).
    emitError(all.size() > 1 ? all[1].getLoc() : module->getLoc())
        << "--emit=" << options.emit << " writes one schedule, but '"
        << options.input << "' holds "
        << (all.empty()
                ? std::string("none")
                : std::to_string(all.size()) + "; keep one pipeline per file");
    return 1;
  }
  if (options.emit == "cpp" || options.emit == "exe")
    return failed(predictMemory(*module, options, *inputs))
               ? 1
               : writeRanks(context, *module, options,
                            inputs->model
                                ? std::shared_ptr<const sched::ModelConfig>(
                                      inputs, &*inputs->model)
                                : nullptr);

  // Rendered whole, then written: a refused export leaves -o as it was.
  std::string text;
  llvm::raw_string_ostream os(text);
  if (options.emit == "schedule") {
    module->print(os);
    return writeOutputFile("flexpipe-compile", options.output, text) ? 0 : 1;
  }
  const bool simulated = isSimulated(options.emit);
  for (ScheduleOp schedule : all) {
    ScheduleProgram read = readSchedule(schedule);
    if (failed(simulated
                   ? emitSimulated(schedule, read.program, options, *inputs, os)
                   : emitReplayed(schedule, read, options, os)))
      return 1;
  }
  return writeOutputFile("flexpipe-compile", options.output, text) ? 0 : 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  flexpipe::keepFreedMemory();
  CompileOptions options;
  if (int code = parseCompileOptions(argc, argv, options); code >= 0)
    return code;
  for (const std::string &path : options.plugins)
    if (std::string error = flexpipe::plugin::Registry::global().load(path);
        !error.empty()) {
      llvm::errs() << "error: --load-plugin " << error << "\n";
      return 1;
    }
  registerFlexPipePassesAndPipelines();
  registerFlexPipeConversionPasses();
  return compile(options);
}
