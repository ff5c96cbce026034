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
#include "Options.h"

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
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <numeric>
#include <optional>
#include <set>

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

/// How to build one rank: `before` SOURCE -o OUTPUT `after`.
struct Toolchain {
  std::vector<std::string> before, after;
};

/// The cpu backend: the MPI compiler wrapper against the runtime.
static std::optional<Toolchain> cpuToolchain(const std::string &include,
                                             const std::string &libs,
                                             raw_ostream &errs) {
  llvm::ErrorOr<std::string> compiler =
      llvm::sys::findProgramByName(environmentOr("FLEXPIPE_CXX", "mpicxx"));
  if (!compiler) {
    errs << "flexpipe-compile: cannot find the MPI C++ compiler "
            "'mpicxx' (install openmpi-bin or set FLEXPIPE_CXX)\n";
    return std::nullopt;
  }
  Toolchain toolchain{{*compiler, "-std=c++17", "-O2", "-I" + include},
                      {libs + "/libflexpipe_rt_cpu.a",
                       libs + "/libFlexPipeRuntime.a", "-lopenblas"}};
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
  Toolchain toolchain{
      {*nvcc, "-ccbin", *host, "-std=c++17", "-O2", "-I" + include},
      {library, libs + "/libFlexPipeRuntime.a"}};
  SmallVector<StringRef> directories;
  StringRef(FLEXPIPE_CUDA_LIBRARY_DIRS).split(directories, ':', -1, false);
  for (StringRef directory : directories) {
    toolchain.after.push_back(("-L" + directory).str());
    toolchain.after.push_back(("-Xlinker=-rpath=" + directory).str());
  }
  for (const char *lib : {"-lcublas", "-lnccl", "-lopenblas"})
    toolchain.after.push_back(lib);
  return toolchain;
}

/// run-env.sh: the ranks of this machine as processes with torchrun's
/// variables; stops them all when one fails.
static const char *const kEnvLauncher = R"sh(#!/usr/bin/env bash
# Starts the @WORLD@ ranks of this schedule (rank r runs actor r mod @ACTORS@)
# on this machine with RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE set
# as torchrun sets them; rank 0 hands the NCCL id to the others through the
# file FLEXPIPE_NCCL_ID_FILE (a fresh temporary file unless set). Each rank
# uses GPU LOCAL_RANK mod the number of visible GPUs. Extra arguments go to
# every rank (--iterations N, --losses F, ...). When a rank fails, the others
# are stopped and this script exits with the failed rank's code.
#
# Several machines: on machine n of N run this script with FLEXPIPE_NNODES=N,
# FLEXPIPE_NODE_RANK=n, FLEXPIPE_RUN_ID=<one id for all machines> and
# FLEXPIPE_NCCL_ID_FILE=<a path on a file system all machines share>; machine
# n starts ranks n*W/N to (n+1)*W/N - 1 of the W ranks.
# Several ranks on one GPU: FLEXPIPE_HOSTID_PER_RANK=1 gives each rank its own
# NCCL_HOSTID, so NCCL treats them as separate hosts (untested lead).
set -u
dir=$(cd "$(dirname "$0")" && pwd) || exit 1
actors=@ACTORS@ world=@WORLD@
nodes=${FLEXPIPE_NNODES:-1} node=${FLEXPIPE_NODE_RANK:-0}
if ! [ "$nodes" -ge 1 ] 2>/dev/null || [ $((world % nodes)) -ne 0 ] ||
   ! [ "$node" -ge 0 ] 2>/dev/null || [ "$node" -ge "$nodes" ]; then
  echo "run-env.sh: FLEXPIPE_NNODES ($nodes) must divide $world ranks and FLEXPIPE_NODE_RANK ($node) be below it" >&2
  exit 2
fi
if [ "$nodes" -gt 1 ] && { [ -z "${FLEXPIPE_NCCL_ID_FILE:-}" ] || [ -z "${FLEXPIPE_RUN_ID:-}" ]; }; then
  echo "run-env.sh: on several machines set FLEXPIPE_NCCL_ID_FILE (on a shared file system) and FLEXPIPE_RUN_ID (the same on every machine)" >&2
  exit 2
fi
per=$((world / nodes)) first=$((node * world / nodes))
scratch=
if [ -z "${FLEXPIPE_NCCL_ID_FILE:-}" ]; then
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/flexpipe-run.XXXXXX") || exit 1
  export FLEXPIPE_NCCL_ID_FILE=$scratch/nccl-id
fi
export FLEXPIPE_NCCL_ID_FILE FLEXPIPE_RUN_ID=${FLEXPIPE_RUN_ID:-run-$$-$(date +%s%N)}
pids=() ranks=()
stop() { # stop the ranks still running: TERM, then KILL after 10 s
  local p deadline=$((SECONDS + 10))
  for p in "${pids[@]}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do
    while [ -n "$p" ] && kill -0 "$p" 2>/dev/null; do
      if [ "$SECONDS" -ge "$deadline" ]; then kill -KILL "$p" 2>/dev/null; break; fi
      sleep 0.1
    done
  done
}
trap 'stop; [ -n "$scratch" ] && rm -rf "$scratch"; exit 130' INT TERM
for ((i = 0; i < per; ++i)); do
  r=$((first + i))
  (
    export RANK=$r WORLD_SIZE=$world LOCAL_RANK=$i LOCAL_WORLD_SIZE=$per
    if [ "${FLEXPIPE_HOSTID_PER_RANK:-0}" = 1 ]; then
      export NCCL_HOSTID="flexpipe-$(hostname)-rank$r"
    fi
    exec "$dir/rank$((r % actors))" "$@"
  ) &
  pids+=($!) ranks+=($r)
done
status=0 left=$per
while [ "$left" -gt 0 ]; do
  for i in "${!pids[@]}"; do
    p=${pids[$i]}
    if [ -z "$p" ] || kill -0 "$p" 2>/dev/null; then continue; fi
    wait "$p"; code=$?
    pids[$i]= left=$((left - 1))
    if [ "$code" -ne 0 ] && [ "$status" -eq 0 ]; then
      status=$code
      echo "run-env.sh: rank ${ranks[$i]} (pid $p) exited with code $code; stopping the other ranks" >&2
      stop
    fi
  done
  [ "$left" -gt 0 ] && sleep 0.2
done
[ -n "$scratch" ] && rm -rf "$scratch"
exit $status
)sh";

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

/// `arg` quoted for sh where it needs quotes.
static std::string shellQuote(StringRef arg) {
  if (!arg.empty() && llvm::all_of(arg, [](char c) {
        return llvm::isAlnum(c) || StringRef("_-./=:+,@%").contains(c);
      }))
    return arg.str();
  std::string quoted = "'";
  for (char c : arg)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

/// One build command and what to say when it fails.
struct BuildStep {
  std::vector<std::string> command;
  std::string failure;
};

/// The source of `reference`: flexpipe-reference's program, built again with
/// the --ops files' operations.
static const char *const kReferenceSource =
    R"cpp(// Generated by flexpipe-compile: flexpipe-reference with the runtime
// operations of this directory's --ops files compiled in.
#include "flexpipe/Runtime/Reference.h"

int main(int argc, char **argv) {
  return flexpipe::rt::runReference(argc, argv);
}
)cpp";

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

/// --emit=cpp|exe: one C++ source per rank, the schedule description, and
/// for exe the rank executables and launchers, in the directory -o.
static int writeRanks(MLIRContext &context, ModuleOp module,
                      const CompileOptions &options) {
  std::string directory = options.output;
  if (directory == "-") {
    if (options.input == "-") {
      llvm::errs() << "flexpipe-compile: --emit=" << options.emit
                   << " writes a directory; give it with -o DIR\n";
      return 1;
    }
    directory = llvm::sys::path::stem(options.input).str() + ".ranks";
  }
  // The runtime operations the programs run, each with its first exec.
  std::vector<std::pair<std::string, Location>> operations;
  module.walk([&](ExecOp exec) {
    const std::string name = exec.getInstruction().str();
    if (llvm::none_of(operations,
                      [&](const auto &known) { return known.first == name; }))
      operations.push_back({name, exec.getLoc()});
  });
  PassManager pm(&context);
  ConvertToEmitCPassOptions lowering;
  lowering.modelFile = options.model;
  lowering.dataParallel = options.dp;
  pm.addPass(createConvertToEmitCPass(lowering));
  if (failed(pm.run(module)))
    return 1;
  SmallVector<ModuleOp> ranks;
  for (auto rank : module.getOps<ModuleOp>())
    if (rank->hasAttr("flexpipe.actor"))
      ranks.push_back(rank);
  if (ranks.empty()) {
    emitError(module.getLoc()) << "holds no schedule to lower";
    return 1;
  }
  auto path = [&](const Twine &name) {
    SmallString<256> p(directory);
    llvm::sys::path::append(p, name);
    return std::string(p);
  };
  // A new or empty directory, or an earlier output of this tool: old and
  // new rank files must not mix.
  if (llvm::sys::fs::exists(directory)) {
    std::error_code ec;
    if (!llvm::sys::fs::is_directory(directory)) {
      llvm::errs() << "flexpipe-compile: -o '" << directory
                   << "' exists and is not a directory\n";
      return 1;
    }
    const bool empty = llvm::sys::fs::directory_iterator(directory, ec) ==
                       llvm::sys::fs::directory_iterator();
    if (!empty && !llvm::sys::fs::exists(path("schedule.txt"))) {
      llvm::errs() << "flexpipe-compile: -o '" << directory
                   << "' holds files but no earlier output of flexpipe-compile "
                      "(schedule.txt); give a new or empty directory\n";
      return 1;
    }
    // Rank files of an earlier, larger schedule.
    for (llvm::sys::fs::directory_iterator it(directory, ec), end;
         it != end && !ec; it.increment(ec)) {
      StringRef digits = llvm::sys::path::filename(it->path());
      if (!digits.consume_front("rank"))
        continue;
      digits.consume_back(".cpp");
      unsigned rank = 0;
      if (!digits.getAsInteger(10, rank) && rank >= ranks.size())
        llvm::sys::fs::remove(it->path());
    }
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(directory)) {
    llvm::errs() << "flexpipe-compile: cannot create '" << directory
                 << "': " << ec.message() << "\n";
    return 1;
  }
  auto write = [&](const std::string &file, function_ref<LogicalResult(raw_ostream &)> fn) {
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> out = openOutputFile(file, &error);
    if (!out) {
      llvm::errs() << "flexpipe-compile: " << error << "\n";
      return false;
    }
    if (failed(fn(out->os())))
      return false;
    out->keep();
    return true;
  };
  std::vector<int64_t> actors;
  for (ModuleOp rank : ranks) {
    const int64_t actor =
        cast<IntegerAttr>(rank->getAttr("flexpipe.actor")).getInt();
    actors.push_back(actor);
    if (!write(path("rank" + Twine(actor) + ".cpp"), [&](raw_ostream &os) {
          os << "// Generated by flexpipe-compile: the program of actor "
             << actor << ".\n";
          return emitc::translateToCpp(rank, os);
        }))
      return 1;
  }
  const std::string description =
      cast<StringAttr>(ranks.front()->getAttr("flexpipe.description")).str();
  if (!write(path("schedule.txt"), [&](raw_ostream &os) {
        os << description;
        return success();
      }))
    return 1;
  // The --ops sources, copied beside the rank sources.
  std::set<std::string> stems = {"reference"};
  for (int64_t actor : actors)
    stems.insert("rank" + std::to_string(actor));
  std::vector<std::pair<std::string, std::string>> opsFiles; // (name, source)
  for (const std::string &source : options.ops) {
    const std::string name = llvm::sys::path::filename(source).str();
    const StringRef extension = llvm::sys::path::extension(name);
    if (!llvm::is_contained(ArrayRef<StringRef>{".cpp", ".cc", ".cxx", ".C"},
                            extension)) {
      llvm::errs() << "flexpipe-compile: --ops " << source
                   << ": expected a C++ source (.cpp, .cc, .cxx or .C)\n";
      return 1;
    }
    if (!stems.insert(llvm::sys::path::stem(name).str()).second) {
      llvm::errs() << "flexpipe-compile: --ops " << source
                   << ": another file of the output directory is named '"
                   << llvm::sys::path::stem(name)
                   << "' (a rank, reference or another --ops file); rename "
                      "it\n";
      return 1;
    }
    if (!llvm::sys::fs::equivalent(source, path(name)))
      if (std::error_code ec = llvm::sys::fs::copy_file(source, path(name))) {
        llvm::errs() << "flexpipe-compile: cannot copy " << source << " to "
                     << path(name) << ": " << ec.message() << "\n";
        return 1;
      }
    opsFiles.push_back({name, source});
  }
  if (!opsFiles.empty() && !write(path("reference.cpp"), [&](raw_ostream &os) {
        os << kReferenceSource;
        return success();
      }))
    return 1;

  // The build against the backend's runtime: each --ops file compiled once,
  // `reference` with them, every rank with them. `at` names a file of the
  // output directory in the commands; --emit=exe compiles the --ops files
  // where they are (the compiler's messages name them), build.sh the copies.
  const bool cuda = options.backend == "cuda";
  const std::string include =
      environmentOr("FLEXPIPE_RUNTIME_INCLUDE", FLEXPIPE_RUNTIME_INCLUDE_DIR);
  const std::string libs =
      environmentOr("FLEXPIPE_RUNTIME_LIB", FLEXPIPE_RUNTIME_LIB_DIR);
  const bool exe = options.emit == "exe";
  std::optional<Toolchain> toolchain =
      cuda ? cudaToolchain(include, libs, exe ? llvm::errs() : llvm::nulls())
           : cpuToolchain(include, libs, exe ? llvm::errs() : llvm::nulls());
  auto steps = [&](function_ref<std::string(const Twine &)> at) {
    std::vector<BuildStep> list;
    std::vector<std::string> objects;
    for (const auto &[name, source] : opsFiles) {
      // The source's own directory too, for the headers beside it.
      SmallString<256> directory(source);
      llvm::sys::fs::make_absolute(directory);
      llvm::sys::path::remove_filename(directory);
      const std::string object = llvm::sys::path::stem(name).str() + ".o";
      BuildStep step{toolchain->before,
                     "flexpipe-compile: cannot compile --ops " + source +
                         "; the compiler's messages are above"};
      step.command.insert(step.command.end(),
                          {"-I" + std::string(directory), "-c",
                           exe ? source : at(name), "-o", at(object)});
      list.push_back(std::move(step));
      objects.push_back(at(object));
    }
    if (!opsFiles.empty()) {
      BuildStep step{toolchain->before,
                     "flexpipe-compile: cannot link 'reference' with the "
                     "--ops files"};
      step.command.push_back(at("reference.cpp"));
      step.command.insert(step.command.end(), objects.begin(), objects.end());
      step.command.insert(step.command.end(),
                          {"-o", at("reference"),
                           libs + "/libFlexPipeRuntime.a", "-lopenblas"});
      list.push_back(std::move(step));
    }
    for (int64_t actor : actors) {
      const std::string name = "rank" + std::to_string(actor);
      BuildStep step{toolchain->before,
                     "flexpipe-compile: cannot build " + name};
      step.command.push_back(at(name + ".cpp"));
      step.command.insert(step.command.end(), objects.begin(), objects.end());
      step.command.insert(step.command.end(), {"-o", at(name)});
      step.command.insert(step.command.end(), toolchain->after.begin(),
                          toolchain->after.end());
      list.push_back(std::move(step));
    }
    return list;
  };
  const int64_t numActors = static_cast<int64_t>(actors.size());

  if (!exe) {
    // build.sh: the same commands, run in the directory.
    if (!toolchain) {
      llvm::errs() << "flexpipe-compile: note: no build.sh written: the "
                      "toolchain of --backend="
                   << options.backend
                   << " is not available here (--emit=exe says why)\n";
      return 0;
    }
    if (!write(path("build.sh"), [&](raw_ostream &os) {
          os << "#!/bin/sh\n"
                "# Generated by flexpipe-compile: builds the rank "
                "executables of this directory as\n"
                "# --emit=exe does";
          if (!opsFiles.empty()) {
            os << ", with the runtime operations of";
            for (const auto &[name, source] : opsFiles)
              os << " " << name;
            os << " compiled in,\n# and 'reference' (flexpipe-reference "
                  "with them)";
          }
          os << ". Then launch\n# mpirun";
          for (int64_t r = 0; r < numActors * options.dp; ++r)
            os << (r ? " :" : "") << " -np 1 ./rank" << r % numActors;
          os << "\nset -e\ncd \"$(dirname \"$0\")\"\n";
          for (const BuildStep &step :
               steps([](const Twine &name) { return name.str(); })) {
            for (auto [i, arg] : llvm::enumerate(step.command))
              os << (i ? " " : "") << shellQuote(arg);
            os << "\n";
          }
          return success();
        }))
      return 1;
    llvm::sys::fs::setPermissions(
        path("build.sh"), llvm::sys::fs::all_read | llvm::sys::fs::all_exe |
                              llvm::sys::fs::owner_write);
    return 0;
  }

  if (!toolchain)
    return 1;
  if (opsFiles.empty())
    for (const auto &[name, loc] : operations)
      emitWarning(loc) << "the program runs @" << name
                       << ", but no --ops file was given: the ranks will stop "
                          "at start-up; pass the source that defines it with "
                          "--ops FILE.cpp";
  const std::vector<BuildStep> build = steps(path);
  size_t done = 0;
  for (; done < 1 + opsFiles.size() && !opsFiles.empty(); ++done)
    if (!execute(build[done].command)) {
      llvm::errs() << build[done].failure << "\n";
      return 1;
    }
  // Every operation the programs run must be registered by the --ops files:
  // `reference` has exactly the ranks' operations.
  if (!opsFiles.empty()) {
    std::set<std::string> registered;
    if (!listOperations(path("reference"), registered))
      return 1;
    for (const auto &[name, loc] : operations)
      if (!registered.count(name)) {
        InFlightDiagnostic diag =
            emitError(loc) << "the program runs @" << name
                           << ", but no --ops file registers an operation of "
                              "that name (";
        if (registered.empty())
          diag << "they register none";
        for (auto [i, known] : llvm::enumerate(registered))
          diag << (i ? ", @" : "they register @") << known;
        diag << "); define it with ";
        if (llvm::all_of(name,
                         [](char c) { return llvm::isAlnum(c) || c == '_'; }))
          diag << "FLEXPIPE_OPERATION(" << name << ")";
        else
          diag << "FLEXPIPE_NAMED_OPERATION(IDENT, \"" << name << "\")";
        diag << " from flexpipe/Runtime/UserOps.h";
        return 1;
      }
  }
  for (; done < build.size(); ++done)
    if (!execute(build[done].command)) {
      llvm::errs() << build[done].failure << "\n";
      return 1;
    }

  // Launchers: ranks are numbered replica * actors + actor.
  auto executable = [&](const std::string &file) {
    llvm::sys::fs::setPermissions(path(file), llvm::sys::fs::all_read |
                                                  llvm::sys::fs::all_exe |
                                                  llvm::sys::fs::owner_write);
  };
  if (cuda) {
    if (!write(path("run-env.sh"), [&](raw_ostream &os) {
          os << substitute(
              kEnvLauncher,
              {{"@ACTORS@", std::to_string(numActors)},
               {"@WORLD@", std::to_string(numActors * options.dp)}});
          return success();
        }))
      return 1;
    executable("run-env.sh");
  }
  // mpirun starts CUDA ranks too when their runtime has MPI.
  if ((!cuda || FLEXPIPE_ENABLE_MPI) &&
      !write(path("run-mpi.sh"), [&](raw_ostream &os) {
        os << "#!/bin/sh\n"
              "# Launches the " << numActors * options.dp
           << " ranks of this schedule with mpirun (MPMD: rank r runs actor\n"
              "# r mod " << numActors << "). Extra arguments go to every rank "
              "(--iterations N, --losses F, ...).\n"
              "# FLEXPIPE_MPIRUN_FLAGS replaces the default --oversubscribe.\n"
              "dir=$(cd \"$(dirname \"$0\")\" && pwd) || exit 1\n"
              "if [ \"$(id -u)\" = 0 ]; then\n"
              "  export OMPI_ALLOW_RUN_AS_ROOT=1 "
              "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n"
              "fi\n"
              "exec mpirun ${FLEXPIPE_MPIRUN_FLAGS:---oversubscribe}";
        for (int64_t r = 0; r < numActors * options.dp; ++r)
          os << (r ? " :" : "") << " -np 1 \"$dir/rank" << r % numActors
             << "\" \"$@\"";
        os << "\n";
        return success();
      }))
    return 1;
  if (!cuda || FLEXPIPE_ENABLE_MPI)
    executable("run-mpi.sh");
  if (!write(path("slurm.conf"), [&](raw_ostream &os) {
        os << "# srun --multi-prog slurm.conf (one task per line)\n";
        for (int64_t r = 0; r < numActors * options.dp; ++r)
          os << r << " ./rank" << r % numActors << "\n";
        return success();
      }))
    return 1;
  if (options.output == "-")
    llvm::outs() << "flexpipe-compile: wrote " << numActors
                 << " rank executables and launchers to " << directory
                 << "/ (run " << directory
                 << (cuda ? "/run-env.sh)\n" : "/run-mpi.sh)\n");
  return 0;
}

/// Marks a module imported from a compute_comms CSV: its transfers follow
/// PyTorch's rule of one FIFO channel per rank pair.
static constexpr llvm::StringLiteral kUntaggedAttr = "flexpipe.untagged";

/// Reads a PyTorch schedule CSV into a module holding one flexpipe.schedule
/// named after the file. With a model file, its one module's layers are
/// split evenly over the stages (stage_info, for the cost model). Prints an
/// error naming the file and returns null when the file cannot be read.
static OwningOpRef<ModuleOp>
importTorchSchedule(MLIRContext &context, const std::string &text,
                    const CompileOptions &options,
                    const sched::ModelConfig &model) {
  const std::string file =
      options.input == "-" ? std::string("<stdin>") : options.input;
  auto fail = [&](const std::string &message) {
    llvm::errs() << file << ": error: " << message << "\n";
    return OwningOpRef<ModuleOp>();
  };
  sched::Program program;
  bool comms = false;
  std::vector<std::vector<int32_t>> cells;
  if (std::string error = sched::parseTorchCsv(text, program, &comms, &cells);
      !error.empty())
    return fail(error);
  if (!options.model.empty()) {
    if (model.modules.size() != 1)
      return fail("a PyTorch schedule is one chain of stages, but the model "
                  "file '" +
                  options.model + "' has " +
                  std::to_string(model.modules.size()) +
                  " modules; give it one");
    const sched::ModuleModel &module = model.modules.front();
    if (module.layers < program.numStages)
      return fail("cannot split the " + std::to_string(module.layers) +
                  " layers of module '" + module.name + "' over " +
                  std::to_string(program.numStages) + " stages");
    program.moduleNames = {module.name};
    for (int32_t s = 0; s < program.numStages; ++s) {
      sched::StageMeta meta;
      meta.module = 0;
      meta.layers = module.layers / program.numStages +
                    (s < module.layers % program.numStages ? 1 : 0);
      meta.first = s == 0;
      meta.last = s == program.numStages - 1;
      program.stageMeta.push_back(meta);
    }
  }
  Location loc = FileLineColLoc::get(&context, file, 1, 1);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder b(module->getBody(), module->getBody()->end());
  ScheduleOp schedule = createSchedule(
      b, loc, b.getStringAttr(llvm::sys::path::stem(options.input)), program);
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

/// The most cells (actors x steps) --emit=text draws: about 300 MB of text.
constexpr double kMaxTextGridCells = 1 << 26;

static int compile(const CompileOptions &options) {
  MLIRContext context;
  DialectRegistry registry;
  registry.insert<FlexPipeDialect, func::FuncDialect, emitc::EmitCDialect>();
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);

  if (!options.ops.empty() && options.emit != "cpp" && options.emit != "exe") {
    llvm::errs()
        << "flexpipe-compile: --ops builds runtime operations into "
           "rank programs; it needs --emit=cpp or --emit=exe, not --emit="
        << options.emit << "\n";
    return 1;
  }
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

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(options.input, &error);
  if (!input) {
    llvm::errs() << "flexpipe-compile: " << error << "\n";
    return 1;
  }
  const bool fromTorch =
      options.from == "torch-csv" ||
      (options.from.empty() && StringRef(options.input).ends_with(".csv"));
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::optional<LongLineDiagnostics> longLines;
  OwningOpRef<ModuleOp> module;
  if (fromTorch) {
    module =
        importTorchSchedule(context, input->getBuffer().str(), options, model);
  } else {
    // Bounds MLIR's parser does not keep (InputLimits.h), before it parses.
    if (std::string problem =
            checkInputLimits(input->getBuffer(),
                             options.input == "-" ? "<stdin>" : options.input);
        !problem.empty()) {
      llvm::errs() << problem << "\n";
      return 1;
    }
    longLines.emplace(handler, &context, input->getBuffer());
    sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  }
  if (!module)
    return 1;

  size_t specs = 0, schedules = 0;
  for (Operation &op : module->getBody()->getOperations()) {
    if (auto pipeline = dyn_cast<PipelineOp>(op)) {
      ++specs;
      Builder b(&context);
      if (options.actors > 0) {
        // Without a model, a spec's layer counts only set its stages'
        // relative sizes: they scale with the actors (layers per stage kept)
        // so that every size gets the stages the spec was written with.
        const int64_t written = pipeline.getActors();
        if (options.model.empty() && written > 0)
          for (auto m : pipeline.getBody().getOps<ModalityOp>())
            if (!m.getActorGroup() && !m.getPartition())
              m.setLayersAttr(b.getI64IntegerAttr(
                  (m.getLayers() * options.actors + written - 1) / written));
        pipeline.setActorsAttr(b.getI64IntegerAttr(options.actors));
      }
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
  pipelineOptions.stepRule = options.stepRule;
  pipelineOptions.modelFile = options.model;
  pipelineOptions.balance = options.balance;
  pipelineOptions.clusterFile = options.cluster;
  pipelineOptions.dp = options.dp;
  // An imported compute_comms file runs on PyTorch's untagged messages.
  if (module->getOperation()->hasAttr(kUntaggedAttr))
    pipelineOptions.channels = "pair";
  buildSpecToSchedulePipeline(pm, pipelineOptions);
  if (failed(pm.run(*module)))
    return 1;

  if (options.emit == "cpp" || options.emit == "exe")
    return writeRanks(context, *module, options);

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
        cluster.jobDevices = read.program.numActors * options.dp;
        error = sched::modelCosts(
            read.program, model, cluster,
            options.profile.empty() ? nullptr : &profile,
            sched::replicaDevices(read.program.numActors, options.dp), costs);
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
      if (!options.model.empty() && !model.modules.empty()) {
        context.tokensPerIteration =
            static_cast<double>(read.program.numMicrobatches) *
            model.microBatchSize * model.modules.front().seq;
        // The gradient all-reduce, exchanges and optimizer step after the
        // pipeline, as flexpipe-tune prices them.
        const sched::StageLayout layout = sched::stageLayoutOf(read.program);
        context.after = sched::afterPipeline(
            layout, sched::actorHoldings(layout, model, cluster), options.dp,
            model, cluster);
      }
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
      // One cell per actor and step, most of them idle at large sizes:
      // bounded so that the grid stays a page to read, not gigabytes.
      const double cells =
          static_cast<double>(read.program.numActors) * timeline.makespan;
      if (cells > kMaxTextGridCells) {
        schedule.emitError()
            << "--emit=text would draw " << read.program.numActors
            << " actors x " << static_cast<int64_t>(timeline.makespan)
            << " steps, more than " << static_cast<int64_t>(kMaxTextGridCells)
            << " cells; use --emit=report, svg, trace or schedule";
        return 1;
      }
      os << "schedule @" << schedule.getSymName() << ": "
         << read.program.numActors << " actors, " << read.program.numStages
         << " stages, " << read.program.numMicrobatches << " micro-batches, "
         << static_cast<int64_t>(timeline.makespan)
         << " steps when every computation takes one step\n"
         << "(cells: stage, F forward / B backward / I input gradient / W "
            "weight gradient, micro-batch; . idle)\n"
         << sched::formatTextGrid(read.program, timeline);
    } else if (std::string why = sched::torchIncompatibility(read.program);
               !why.empty()) {
      schedule.emitError() << "--emit=" << options.emit << " cannot write '"
                           << schedule.getSymName() << "': " << why;
      return 1;
    } else if (options.emit == "torch-csv") {
      os << sched::formatTorchCsv(read.program, timeline);
    } else {
      std::string csv;
      if (std::string problem = sched::formatTorchCsvComms(read.program, csv);
          !problem.empty()) {
        schedule.emitError() << "--emit=torch-csv-comms: " << problem;
        return 1;
      }
      os << csv;
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
