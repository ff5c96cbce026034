//===- Ranks.cpp - flexpipe-compile --emit=cpp|exe ------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "Ranks.h"
#include "../OutputFile.h"
#include "../ShellQuote.h"

#include "flexpipe/Config.h"
#include "flexpipe/Conversion/FlexPipeToEmitC/FlexPipeToEmitC.h"
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Support/Layout.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <set>

// kTemplate_<file>: the files of templates/, embedded by CMake.
#include "Templates.inc"

using namespace mlir;
using namespace flexpipe;

/// Runs a program and reports a failure with its command line.
static bool execute(ArrayRef<std::string> command) {
  SmallVector<StringRef> args(command.begin(), command.end());
  std::string message;
  int code = llvm::sys::ExecuteAndWait(args.front(), args, std::nullopt, {}, 0,
                                       0, &message);
  if (code == 0)
    return true;
  llvm::errs() << "flexpipe-compile: command failed (" << code << "): ";
  for (StringRef arg : args)
    llvm::errs() << arg << ' ';
  llvm::errs() << (message.empty() ? "" : "\n" + message) << "\n";
  return false;
}

static std::string environmentOr(const char *name, const char *fallback) {
  const char *value = std::getenv(name);
  return value && *value ? value : fallback;
}

/// `path` from this process's directory, as --emit=exe reads it: build.sh
/// runs in the output directory, where a relative FLEXPIPE_RUNTIME_LIB,
/// FLEXPIPE_RUNTIME_INCLUDE or FLEXPIPE_CXX named nothing.
static std::string absolute(const std::string &path) {
  SmallString<256> absolutePath(path);
  llvm::sys::fs::make_absolute(absolutePath);
  return absolutePath.str().str();
}

/// Where --emit=exe finds the runtime's headers (`dir` "include") or
/// libraries ("lib"): the environment's `variable`; else, for a
/// flexpipe-compile installed in PREFIX/bin, PREFIX/`dir` where it holds
/// `marker`; else the build tree's `built`.
static std::string runtimePath(const char *variable, StringRef dir,
                               StringRef marker, const char *built) {
  if (const std::string value = environmentOr(variable, ""); !value.empty())
    return absolute(value);
  static int self;
  const std::string executable =
      llvm::sys::fs::getMainExecutable("flexpipe-compile", &self);
  SmallString<256> installed(
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(executable)));
  llvm::sys::path::append(installed, dir);
  SmallString<256> probe(installed);
  llvm::sys::path::append(probe, marker);
  if (!executable.empty() && llvm::sys::fs::exists(probe))
    return installed.str().str();
  return absolute(built);
}

/// How to build one rank: `before` SOURCE -o OUTPUT `after`.
struct Toolchain {
  std::vector<std::string> before, after;
};

/// The backends built with the host compiler: cpu (the MPI compiler wrapper
/// against the runtime) and cuda-emulation (the CUDA backend compiled for
/// the CPU: mpicxx when the runtime has MPI).
static std::optional<Toolchain> hostToolchain(bool emulation,
                                              const std::string &include,
                                              const std::string &libs,
                                              raw_ostream &errs) {
  const char *compilerDefault =
      !emulation || FLEXPIPE_ENABLE_MPI ? "mpicxx" : "c++";
  llvm::ErrorOr<std::string> compiler = llvm::sys::findProgramByName(
      environmentOr("FLEXPIPE_CXX", compilerDefault));
  if (!compiler) {
    errs << "flexpipe-compile: cannot find the C++ compiler '"
         << environmentOr("FLEXPIPE_CXX", compilerDefault)
         << "' (install openmpi-bin or set FLEXPIPE_CXX)\n";
    return std::nullopt;
  }
  const std::string backend =
      libs + (emulation ? "/libflexpipe_rt_cuda_emulation.a"
                        : "/libflexpipe_rt_cpu.a");
  if (!llvm::sys::fs::exists(backend)) {
    errs << "flexpipe-compile: cannot find " << backend
         << " (build the runtime, or set FLEXPIPE_RUNTIME_LIB)\n";
    return std::nullopt;
  }
  Toolchain toolchain{
      {absolute(*compiler), "-std=c++17", "-O2", "-I" + include},
      {backend, libs + "/libFlexPipeRuntime.a", "-lopenblas", "-pthread"}};
  if (emulation)
    toolchain.after.push_back("-lboost_context"); // the emulated warps
  // The build's own extra flags (a sanitizer build's -fsanitize=...).
  SmallVector<StringRef> extra;
  StringRef(FLEXPIPE_RANK_FLAGS).split(extra, ' ', -1, false);
  for (StringRef flag : extra)
    toolchain.before.push_back(flag.str());
  return toolchain;
}

/// The cuda backend: nvcc drives the host compiler (mpicxx when the runtime
/// has MPI) and links cudart; cuBLAS and NCCL are found at run time through
/// an rpath to the directories the build found them in.
static std::optional<Toolchain> cudaToolchain(const std::string &include,
                                              const std::string &libs,
                                              raw_ostream &errs) {
  if (!FLEXPIPE_ENABLE_CUDA) {
    errs << "flexpipe-compile: --backend=cuda needs the CUDA "
            "runtime backend, which this build does not have "
            "(FLEXPIPE_ENABLE_CUDA is 0 in flexpipe/Config.h: CMake "
            "found no nvcc or NCCL); reconfigure on a machine with "
            "the CUDA toolkit and NCCL, or use --backend=cpu\n";
    return std::nullopt;
  }
  llvm::ErrorOr<std::string> nvcc = llvm::sys::findProgramByName(
      environmentOr("FLEXPIPE_NVCC", FLEXPIPE_CUDA_NVCC));
  if (!nvcc) {
    errs << "flexpipe-compile: cannot find nvcc '"
         << environmentOr("FLEXPIPE_NVCC", FLEXPIPE_CUDA_NVCC)
         << "' (set FLEXPIPE_NVCC)\n";
    return std::nullopt;
  }
  const char *hostDefault = FLEXPIPE_ENABLE_MPI ? "mpicxx" : "c++";
  llvm::ErrorOr<std::string> host =
      llvm::sys::findProgramByName(environmentOr("FLEXPIPE_CXX", hostDefault));
  if (!host) {
    errs << "flexpipe-compile: cannot find the host C++ compiler '"
         << environmentOr("FLEXPIPE_CXX", hostDefault)
         << "' (set FLEXPIPE_CXX)\n";
    return std::nullopt;
  }
  const std::string library = libs + "/libflexpipe_rt_cuda.a";
  if (!llvm::sys::fs::exists(library)) {
    errs << "flexpipe-compile: cannot find " << library
         << " (build the flexpipe_rt_cuda target, or set "
            "FLEXPIPE_RUNTIME_LIB)\n";
    return std::nullopt;
  }
  Toolchain toolchain{{absolute(*nvcc), "-ccbin", absolute(*host), "-std=c++17",
                       "-O2", "-I" + include},
                      {library, libs + "/libFlexPipeRuntime.a"}};
  SmallVector<StringRef> directories;
  StringRef(FLEXPIPE_CUDA_LIBRARY_DIRS).split(directories, ':', -1, false);
  for (StringRef directory : directories) {
    toolchain.after.push_back(("-L" + directory).str());
    toolchain.after.push_back(("-Xlinker=-rpath=" + directory).str());
  }
  // No OpenBLAS: CUDA ranks link no CPU layers (ModelData.cpp).
  for (const char *lib : {"-lcublas", "-lcublasLt", "-lnccl"})
    toolchain.after.push_back(lib);
  return toolchain;
}

/// Writes `text` with every @KEY@ replaced.
static std::string
substitute(std::string text,
           ArrayRef<std::pair<std::string, std::string>> values) {
  for (const auto &[key, value] : values)
    for (size_t at = text.find(key); at != std::string::npos;
         at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  return text;
}

/// One build command and what to say when it fails.
struct BuildStep {
  std::vector<std::string> command;
  std::string failure;
};

/// Asks `reference --list-operations` which operations the --ops files
/// register; returns false after reporting why it could not.
static bool listOperations(const std::string &reference,
                           std::set<std::string> &names) {
  SmallString<128> listing;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "flexpipe-operations", "txt", listing)) {
    llvm::errs() << "flexpipe-compile: cannot create a temporary file: "
                 << ec.message() << "\n";
    return false;
  }
  llvm::FileRemover remover(listing);
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(listing),
                                          std::nullopt};
  std::string message;
  const int code =
      llvm::sys::ExecuteAndWait(reference, {reference, "--list-operations"},
                                std::nullopt, redirects, 0, 0, &message);
  if (code < 0) {
    llvm::errs() << "flexpipe-compile: cannot run " << reference
                 << " --list-operations: " << message << "\n";
    return false;
  }
  if (code != 0) {
    llvm::errs() << "flexpipe-compile: the --ops files' operations cannot be "
                    "registered; the errors are above\n";
    return false;
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      llvm::MemoryBuffer::getFile(listing);
  if (!text) {
    llvm::errs() << "flexpipe-compile: cannot read " << listing << "\n";
    return false;
  }
  SmallVector<StringRef> lines;
  (*text)->getBuffer().split(lines, '\n', -1, false);
  for (StringRef line : lines)
    names.insert(line.trim().str());
  return true;
}

namespace {
/// Where the rank files of one compile go, and what goes beside them.
struct RankOutput {
  std::string directory;
  std::vector<int64_t> actors; ///< the actor of each rank program
  int64_t dp = 1;              ///< data-parallel replicas
  /// The --ops sources, copied into the directory: (file name, source).
  std::vector<std::pair<std::string, std::string>> opsFiles;

  std::string path(const Twine &name) const {
    SmallString<256> p(directory);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  int64_t numActors() const { return static_cast<int64_t>(actors.size()); }
  int64_t world() const { return numActors() * dp; }
  /// mpirun's MPMD list: " -np 1 " and `program(actor)` per rank, joined
  /// by " :", the ranks in order (rank r runs actor actorOfRank(r, dp)).
  std::string mpmd(function_ref<std::string(int64_t)> program) const {
    std::string list;
    for (int64_t r = 0; r < world(); ++r)
      list += (r ? " :" : "") + std::string(" -np 1 ") +
              program(actors[actorOfRank(r, dp)]);
    return list;
  }
};
} // namespace

/// The directory -o names, or STEM.ranks (the input's name without its
/// extension) in the working directory; none (after an
/// error) when the input is standard input and -o is not given, or -o names
/// standard output.
static std::optional<std::string>
outputDirectory(const CompileOptions &options) {
  if (options.output != "-")
    return options.output;
  if (options.input == "-" || options.isGiven("--output")) {
    llvm::errs() << "flexpipe-compile: --emit=" << options.emit
                 << " writes a directory"
                 << (options.isGiven("--output")
                         ? ", and '-o -' names standard output"
                         : "")
                 << "; give it with -o DIR\n";
    return std::nullopt;
  }
  return llvm::sys::path::stem(options.input).str() + ".ranks";
}

/// The runtime operations the programs run, each with its first exec.
static std::vector<std::pair<std::string, Location>>
operationsRun(ModuleOp module) {
  std::vector<std::pair<std::string, Location>> operations;
  module.walk([&](ExecOp exec) {
    const std::string name = exec.getInstruction().str();
    if (llvm::none_of(operations,
                      [&](const auto &known) { return known.first == name; }))
      operations.push_back({name, exec.getLoc()});
  });
  return operations;
}

/// Lowers the schedule to EmitC: one module per rank, each with its actor.
static LogicalResult
lowerToRanks(MLIRContext &context, ModuleOp module,
             const CompileOptions &options,
             std::shared_ptr<const sched::ModelConfig> model,
             SmallVectorImpl<ModuleOp> &ranks) {
  PassManager pm(&context);
  ConvertToEmitCPassOptions lowering;
  lowering.dataParallel = options.dp;
  // The emulation runs the CUDA backend's code, channels included.
  lowering.backend =
      options.backend == "cpu" ? RuntimeBackend::Cpu : RuntimeBackend::Cuda;
  pm.addPass(createConvertToEmitCPass(lowering, std::move(model)));
  if (failed(pm.run(module)))
    return failure();
  for (auto rank : module.getOps<ModuleOp>())
    if (rank->hasAttr("flexpipe.actor"))
      ranks.push_back(rank);
  if (ranks.empty())
    return emitError(module.getLoc()) << "holds no schedule to lower";
  return success();
}

/// A new or empty directory, or an earlier output of this tool: old and new
/// rank files must not mix, so rank files beyond `numRanks` are removed.
static bool prepareDirectory(const RankOutput &out, size_t numRanks) {
  const std::string &directory = out.directory;
  if (!llvm::sys::fs::exists(directory) &&
      llvm::sys::fs::is_symlink_file(directory)) {
    llvm::errs() << "flexpipe-compile: -o '" << directory
                 << "' is a symbolic link to a directory that does not exist\n";
    return false;
  }
  if (llvm::sys::fs::exists(directory)) {
    std::error_code ec;
    if (!llvm::sys::fs::is_directory(directory)) {
      llvm::errs() << "flexpipe-compile: -o '" << directory
                   << "' exists and is not a directory\n";
      return false;
    }
    const bool empty = llvm::sys::fs::directory_iterator(directory, ec) ==
                       llvm::sys::fs::directory_iterator();
    // An earlier output: its schedule.txt is a schedule description (a
    // user's schedule.txt let the user's rank files be removed).
    auto earlier = llvm::MemoryBuffer::getFile(out.path("schedule.txt"));
    if (!empty && (!earlier || !(*earlier)->getBuffer().starts_with(
                                   "flexpipe-schedule "))) {
      llvm::errs() << "flexpipe-compile: -o '" << directory
                   << "' holds files but no earlier output of flexpipe-compile "
                      "(schedule.txt); give a new or empty directory\n";
      return false;
    }
    // Launchers, executables and build.sh of an earlier compile
    // (slurm.conf: before run-slurm.sh): this one writes its own, an
    // --emit=cpp left the old executables to be launched beside the new
    // sources, and an old build.sh builds ranks that are gone.
    for (const char *stale :
         {"run-env.sh", "run-mpi.sh", "run-slurm.sh", "slurm.conf", "reference",
          "reference.cpp", "build.sh"})
      llvm::sys::fs::remove(out.path(stale));
    for (llvm::sys::fs::directory_iterator it(directory, ec), end;
         it != end && !ec; it.increment(ec)) {
      StringRef digits = llvm::sys::path::filename(it->path());
      if (!digits.consume_front("rank"))
        continue;
      const bool source = digits.consume_back(".cpp");
      unsigned rank = 0;
      if (!digits.getAsInteger(10, rank) && (!source || rank >= numRanks))
        llvm::sys::fs::remove(it->path());
    }
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(directory)) {
    llvm::errs() << "flexpipe-compile: cannot create '" << directory
                 << "': " << ec.message() << "\n";
    return false;
  }
  return true;
}

/// Writes `file` with `fn`; reports and returns false when it cannot.
static bool writeFile(const std::string &file,
                      function_ref<LogicalResult(raw_ostream &)> fn) {
  std::string text;
  llvm::raw_string_ostream os(text);
  return succeeded(fn(os)) &&
         flexpipe::writeOutputFile("flexpipe-compile", file, text);
}

/// Writes `text` to `file`, executable when asked (for everyone the umask
/// lets, as a compiler's output is).
static bool writeText(const std::string &file, StringRef text,
                      bool executable = false) {
  if (!writeFile(file, [&](raw_ostream &os) {
        os << text;
        return success();
      }))
    return false;
  if (executable)
    llvm::sys::fs::setPermissions(
        file, static_cast<llvm::sys::fs::perms>(llvm::sys::fs::all_all &
                                                ~llvm::sys::fs::getUmask()));
  return true;
}

/// The actors of the rank modules, in id order.
static void collectRankActors(RankOutput &out, ArrayRef<ModuleOp> ranks) {
  for (ModuleOp rank : ranks)
    out.actors.push_back(
        cast<IntegerAttr>(rank->getAttr("flexpipe.actor")).getInt());
  llvm::sort(out.actors);
}

/// One C++ source per rank and the schedule description they share.
static bool writeSources(const RankOutput &out, ArrayRef<ModuleOp> ranks) {
  for (ModuleOp rank : ranks) {
    const int64_t actor =
        cast<IntegerAttr>(rank->getAttr("flexpipe.actor")).getInt();
    if (!writeFile(out.path("rank" + Twine(actor) + ".cpp"),
                   [&](raw_ostream &os) {
                     os << "// Generated by flexpipe-compile: the program of "
                           "actor "
                        << actor << ".\n";
                     return emitc::translateToCpp(rank, os);
                   }))
      return false;
  }
  return writeText(
      out.path("schedule.txt"),
      cast<StringAttr>(ranks.front()->getAttr("flexpipe.description")).str());
}

/// The --ops sources' names: C++ sources, none named like a rank (at any
/// N: the directory's rank<N>.cpp beyond this compile's ranks are removed),
/// the reference or another --ops file. Checked before anything is written
/// (a clash found after the rank sources left the directory half replaced).
static bool checkOpsFiles(RankOutput &out, const CompileOptions &options) {
  std::set<std::string> stems = {"reference"};
  for (const std::string &source : options.ops) {
    const std::string name = llvm::sys::path::filename(source).str();
    const StringRef extension = llvm::sys::path::extension(name);
    if (!llvm::is_contained(ArrayRef<StringRef>{".cpp", ".cc", ".cxx", ".C"},
                            extension)) {
      llvm::errs() << "flexpipe-compile: --ops " << source
                   << ": expected a C++ source (.cpp, .cc, .cxx or .C)\n";
      return false;
    }
    StringRef digits = llvm::sys::path::stem(name);
    if ((digits.consume_front("rank") && !digits.empty() &&
         llvm::all_of(digits, llvm::isDigit)) ||
        !stems.insert(llvm::sys::path::stem(name).str()).second) {
      llvm::errs() << "flexpipe-compile: --ops " << source
                   << ": the output directory has another file named '"
                   << llvm::sys::path::stem(name)
                   << "' (rank<N>, reference or another --ops file); rename "
                      "it\n";
      return false;
    }
    out.opsFiles.push_back({name, source});
  }
  return true;
}

/// The --ops sources, copied beside the rank sources, and `reference.cpp`
/// (flexpipe-reference with them) when there are any.
static bool copyOpsFiles(const RankOutput &out) {
  for (const auto &[name, source] : out.opsFiles)
    if (!llvm::sys::fs::equivalent(source, out.path(name)))
      if (std::error_code ec =
              llvm::sys::fs::copy_file(source, out.path(name))) {
        llvm::errs() << "flexpipe-compile: cannot copy " << source << " to "
                     << out.path(name) << ": " << ec.message() << "\n";
        return false;
      }
  return out.opsFiles.empty() ||
         writeText(out.path("reference.cpp"), kTemplate_reference_cpp);
}

/// `path` as a command's argument: "./" before a relative path that starts
/// with '-', which a compiler would read as an option.
static std::string notAnOption(std::string path) {
  return !path.empty() && path[0] == '-' ? "./" + path : path;
}

/// The build against the backend's runtime: each --ops file compiled once,
/// `reference` with them, every rank with them. `at` names a file of the
/// output directory in the commands; --emit=exe (`exe`) compiles the --ops
/// files where they are (the compiler's messages name them), build.sh the
/// copies.
static std::vector<BuildStep>
buildSteps(const RankOutput &out, const Toolchain &toolchain,
           const std::string &libs, bool exe,
           function_ref<std::string(const Twine &)> at) {
  std::vector<BuildStep> list;
  std::vector<std::string> objects;
  for (const auto &[name, source] : out.opsFiles) {
    // The source's own directory too, for the headers beside it.
    SmallString<256> directory(source);
    llvm::sys::fs::make_absolute(directory);
    llvm::sys::path::remove_filename(directory);
    const std::string object = llvm::sys::path::stem(name).str() + ".o";
    BuildStep step{toolchain.before, "flexpipe-compile: cannot compile --ops " +
                                         source +
                                         "; the compiler's messages are above"};
    step.command.insert(step.command.end(),
                        {"-I" + std::string(directory), "-c",
                         exe ? notAnOption(source) : at(name), "-o",
                         at(object)});
    list.push_back(std::move(step));
    objects.push_back(at(object));
  }
  if (!out.opsFiles.empty()) {
    BuildStep step{toolchain.before,
                   "flexpipe-compile: cannot link 'reference' with the "
                   "--ops files"};
    step.command.push_back(at("reference.cpp"));
    step.command.insert(step.command.end(), objects.begin(), objects.end());
    step.command.insert(
        step.command.end(),
        {"-o", at("reference"), libs + "/libFlexPipeRuntime.a", "-lopenblas"});
    list.push_back(std::move(step));
  }
  for (int64_t actor : out.actors) {
    const std::string name = "rank" + std::to_string(actor);
    BuildStep step{toolchain.before, "flexpipe-compile: cannot build " + name};
    step.command.push_back(at(name + ".cpp"));
    step.command.insert(step.command.end(), objects.begin(), objects.end());
    step.command.insert(step.command.end(), {"-o", at(name)});
    step.command.insert(step.command.end(), toolchain.after.begin(),
                        toolchain.after.end());
    list.push_back(std::move(step));
  }
  return list;
}

/// The launcher the compile names (run-env.sh for CUDA, run-mpi.sh else).
static const char *mainLauncher(bool cuda) {
  return cuda ? "run-env.sh" : "run-mpi.sh";
}

/// build.sh (--emit=cpp): the commands --emit=exe runs, run in the
/// directory.
static bool writeBuildScript(const RankOutput &out, ArrayRef<BuildStep> steps,
                             bool cuda) {
  std::string ops;
  if (!out.opsFiles.empty()) {
    ops = ", with the runtime operations of";
    for (const auto &[name, source] : out.opsFiles)
      ops += " " + name;
    ops += " compiled in,\n# and 'reference' (flexpipe-reference with them)";
  }
  std::string commands;
  for (const BuildStep &step : steps) {
    if (!commands.empty())
      commands += "\n";
    for (auto [i, arg] : llvm::enumerate(step.command))
      commands += (i ? " " : "") + shellQuote(arg);
  }
  return writeText(
      out.path("build.sh"),
      substitute(kTemplate_build_sh, {{"@OPS@", ops},
                                      {"@LAUNCHER@", mainLauncher(cuda)},
                                      {"@COMMANDS@", commands}}),
      /*executable=*/true);
}

/// Every operation the programs run must be registered by the --ops files;
/// `reference` (built with them) has exactly the ranks' operations.
static bool
checkOperationsRegistered(const RankOutput &out,
                          ArrayRef<std::pair<std::string, Location>> ops) {
  std::set<std::string> registered;
  if (!listOperations(out.path("reference"), registered))
    return false;
  for (const auto &[name, loc] : ops) {
    if (registered.count(name))
      continue;
    InFlightDiagnostic diag = emitError(loc)
                              << "the program runs @" << name
                              << ", but no --ops file registers an operation "
                                 "of that name (";
    if (registered.empty())
      diag << "they register none";
    for (auto [i, known] : llvm::enumerate(registered))
      diag << (i ? ", @" : "they register @") << known;
    diag << "); define it with ";
    if (llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; }))
      diag << "FLEXPIPE_OPERATION(" << name << ")";
    else
      diag << "FLEXPIPE_NAMED_OPERATION(IDENT, \"" << name << "\")";
    diag << " from flexpipe/Runtime/UserOps.h";
    return false;
  }
  return true;
}

/// --emit=exe: runs the build; the --ops files and `reference` first, to
/// check that they register every operation the programs run.
static bool buildExecutables(const RankOutput &out, ArrayRef<BuildStep> build,
                             ArrayRef<std::pair<std::string, Location>> ops) {
  if (out.opsFiles.empty())
    for (const auto &[name, loc] : ops)
      emitWarning(loc) << "the program runs @" << name
                       << ", but no --ops file was given: the ranks will stop "
                          "at start-up; pass the source that defines it with "
                          "--ops FILE.cpp";
  const size_t first = out.opsFiles.empty() ? 0 : out.opsFiles.size() + 1;
  for (size_t i = 0; i < build.size(); ++i) {
    if (i == first && first > 0 && !checkOperationsRegistered(out, ops))
      return false;
    if (!execute(build[i].command)) {
      llvm::errs() << build[i].failure << "\n";
      return false;
    }
  }
  return true;
}

/// The launchers; rank r runs actor r / dp (flexpipe::actorOfRank: replica
/// k's actor a is rank a * dp + k, on device a * dp + k). run-env.sh
/// for CUDA, run-mpi.sh where the runtime has MPI (mpirun starts CUDA ranks
/// too then), run-slurm.sh always. (prepareDirectory removes a launcher an
/// earlier compile left that this one does not write.)
static bool writeLaunchers(const RankOutput &out, bool cuda) {
  const std::vector<std::pair<std::string, std::string>> sizes = {
      {"@ACTORS@", std::to_string(out.numActors())},
      {"@DP@", std::to_string(out.dp)},
      {"@WORLD@", std::to_string(out.world())}};
  if (cuda && !writeText(out.path("run-env.sh"),
                         substitute(kTemplate_run_env_sh, sizes),
                         /*executable=*/true))
    return false;
  if (!cuda || FLEXPIPE_ENABLE_MPI) {
    std::vector<std::pair<std::string, std::string>> values = sizes;
    values.push_back({"@MPMD@", out.mpmd([](int64_t actor) {
                        return "\"$dir/rank" + std::to_string(actor) +
                               "\" \"$@\"";
                      })});
    if (!writeText(out.path("run-mpi.sh"),
                   substitute(kTemplate_run_mpi_sh, values),
                   /*executable=*/true))
      return false;
  }
  return writeText(out.path("run-slurm.sh"),
                   substitute(kTemplate_run_slurm_sh, sizes),
                   /*executable=*/true);
}

int flexpipe::writeRanks(MLIRContext &context, ModuleOp module,
                         const CompileOptions &options,
                         std::shared_ptr<const sched::ModelConfig> model) {
  RankOutput out;
  out.dp = options.dp;
  std::optional<std::string> directory = outputDirectory(options);
  if (!directory)
    return 1;
  out.directory = std::move(*directory);
  const auto operations = operationsRun(module);
  SmallVector<ModuleOp> ranks;
  if (failed(lowerToRanks(context, module, options, std::move(model), ranks)))
    return 1;
  collectRankActors(out, ranks);
  if (!checkOpsFiles(out, options) || !prepareDirectory(out, ranks.size()) ||
      !writeSources(out, ranks) || !copyOpsFiles(out))
    return 1;

  // The emulation runs the CUDA backend's ranks: its launchers.
  const bool cuda = options.backend != "cpu";
  const bool exe = options.emit == "exe";
  const std::string include =
      runtimePath("FLEXPIPE_RUNTIME_INCLUDE", "include",
                  "flexpipe/Runtime/Runtime.h", FLEXPIPE_RUNTIME_INCLUDE_DIR);
  const std::string libs =
      runtimePath("FLEXPIPE_RUNTIME_LIB", "lib", "libFlexPipeRuntime.a",
                  FLEXPIPE_RUNTIME_LIB_DIR);
  raw_ostream &errs = exe ? llvm::errs() : llvm::nulls();
  std::optional<Toolchain> toolchain =
      options.backend == "cuda"
          ? cudaToolchain(include, libs, errs)
          : hostToolchain(options.backend == "cuda-emulation", include, libs,
                          errs);
  if (!exe) {
    if (!writeLaunchers(out, cuda))
      return 1;
    if (!toolchain) {
      llvm::errs() << "flexpipe-compile: note: no build.sh written: the "
                      "toolchain of --backend="
                   << options.backend
                   << " is not available here (--emit=exe says why)\n";
      return 0;
    }
    return writeBuildScript(out,
                            buildSteps(out, *toolchain, libs, /*exe=*/false,
                                       [](const Twine &name) {
                                         // An --ops copy named like an
                                         // option (-x.cpp).
                                         return notAnOption(name.str());
                                       }),
                            cuda)
               ? 0
               : 1;
  }
  if (!toolchain ||
      !buildExecutables(out,
                        buildSteps(out, *toolchain, libs, /*exe=*/true,
                                   [&](const Twine &name) {
                                     // A directory named like an option
                                     // (-o -x).
                                     return notAnOption(out.path(name));
                                   }),
                        operations) ||
      !writeLaunchers(out, cuda))
    return 1;
  if (options.output == "-")
    llvm::outs() << "flexpipe-compile: wrote " << out.numActors()
                 << " rank executables and launchers to " << out.directory
                 << "/ (run "
                 << shellQuote(out.directory + "/" + mainLauncher(cuda))
                 << ")\n";
  return 0;
}
