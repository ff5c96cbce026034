//===- flexpipe-opt.cpp - FlexPipe optimizer driver -----------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// mlir-opt for FlexPipe: parses, verifies, transforms and prints flexpipe IR.
// `--load-plugin PATH` (repeatable) loads scheduler plugins before anything
// else (docs/Plugins.md).
//
//===----------------------------------------------------------------------===//

#include "../LongLines.h"
#include "../OutputFile.h"
#include "../Version.h"
#include "flexpipe/Conversion/FlexPipeToEmitC/FlexPipeToEmitC.h"
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Plugin.h"
#include "flexpipe/Support/InputLimits.h"
#include "flexpipe/Support/ReadInput.h"

#include "mlir/Bytecode/BytecodeReader.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

/// Listed for --help only: main() takes the plugins out of the command line
/// and loads them before MlirOptMain parses the rest.
static llvm::cl::list<std::string>
    loadPluginHelp("load-plugin",
                   llvm::cl::desc("Load a FlexPipe scheduler plugin (checks, "
                                  "priorities, in-flight rules; "
                                  "docs/Plugins.md); repeatable"),
                   llvm::cl::value_desc("path"));

/// Removes every `--load-plugin PATH` and `--load-plugin=PATH` (one dash
/// too) before a `--` from argv and returns the paths, or returns false
/// after printing an error for one without a path.
static bool takePluginArgs(int &argc, char **argv,
                           std::vector<std::string> &paths) {
  int kept = 1;
  bool options = true;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "--")
      options = false;
    llvm::StringRef flag = arg;
    if (!options || !(flag.consume_front("--") || flag.consume_front("-")) ||
        !flag.consume_front("load-plugin") ||
        !(flag.empty() || flag.starts_with("="))) {
      argv[kept++] = argv[i];
      continue;
    }
    if (flag.consume_front("=")) {
      paths.push_back(flag.str());
      continue;
    }
    if (i + 1 >= argc) {
      llvm::errs() << "error: --load-plugin needs the path of a plugin\n";
      return false;
    }
    paths.push_back(argv[++i]);
  }
  argc = kept;
  argv[argc] = nullptr;
  return true;
}

/// MlirOptMain's own diagnostic handler echoes whole source lines. For an
/// input with lines too long to echo (LongLines.h), parse and verify it
/// first with a handler that leaves them out: a bad input fails here with
/// short messages, a good one parses again in MlirOptMain without a
/// diagnostic. Split inputs and diagnostic tests keep MLIR's own handling.
static bool parsesWithShortDiagnostics(const llvm::MemoryBuffer &buffer,
                                       llvm::StringRef name,
                                       mlir::DialectRegistry &registry) {
  const mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (!config.inputSplitMarker().empty() || config.shouldVerifyDiagnostics())
    return true;
  mlir::MLIRContext context(registry);
  context.allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(buffer.getBuffer(), name),
      llvm::SMLoc());
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  flexpipe::LongLineDiagnostics longLines(handler, &context,
                                          buffer.getBuffer());
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  return module && mlir::succeeded(mlir::verify(*module));
}

int main(int argc, char **argv) {
  std::vector<std::string> plugins;
  if (!takePluginArgs(argc, argv, plugins))
    return 1;
  for (const std::string &path : plugins)
    if (std::string error = flexpipe::plugin::Registry::global().load(path);
        !error.empty()) {
      llvm::errs() << "error: --load-plugin " << error << "\n";
      return 1;
    }

  flexpipe::registerFlexPipePassesAndPipelines();
  flexpipe::registerFlexPipeConversionPasses();
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << flexpipe::versionText("flexpipe-opt") << "\n";
  });
  mlir::DialectRegistry registry;
  registry.insert<flexpipe::FlexPipeDialect, mlir::func::FuncDialect,
                  mlir::emitc::EmitCDialect>();
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv, "FlexPipe optimizer driver\n", registry);
  // Bounds MLIR's parser does not keep (InputLimits.h), before it parses.
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> read =
      flexpipe::readInputFile(input);
  if (!read) {
    llvm::errs() << "cannot open input file '" << input
                 << "': " << flexpipe::readInputError(read.getError()) << "\n";
    return 1;
  }
  std::unique_ptr<llvm::MemoryBuffer> buffer = std::move(*read);
  // The limits and long lines are the text's: bytecode keeps strings and
  // arrays raw (a valid file was refused for a run of digits in a string).
  const bool bytecode = mlir::isBytecode(buffer->getMemBufferRef());
  if (std::string problem =
          bytecode ? ""
                   : flexpipe::checkInputLimits(
                         buffer->getBuffer(), input == "-" ? "<stdin>" : input);
      !problem.empty()) {
    llvm::errs() << problem << "\n";
    return 1;
  }
  if (!bytecode && !flexpipe::longLineNumbers(buffer->getBuffer()).empty() &&
      !parsesWithShortDiagnostics(*buffer, input == "-" ? "<stdin>" : input,
                                  registry))
    return 1;
  // MLIR gets the buffer already read (standard input can be read once)
  // and writes into memory; the output file is written whole at the end
  // (OutputFile.h: a failed run leaves -o as it was, a full disk is an
  // error message).
  std::string text;
  llvm::raw_string_ostream os(text);
  if (mlir::failed(
          mlir::MlirOptMain(os, std::move(buffer), registry,
                            mlir::MlirOptMainConfig::createFromCLOptions())))
    return 1;
  return flexpipe::writeOutputFile("flexpipe-opt", output, text) ? 0 : 1;
}
