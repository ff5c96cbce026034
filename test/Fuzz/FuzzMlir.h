//===- FuzzMlir.h - Reading fuzz input as FlexPipe IR -----------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What flexpipe-compile and flexpipe-opt do before any pass: the input
// limits, then MLIR's parser with the FlexPipe dialect, then the verifiers.
// Diagnostics are counted, not printed (printing would cost most of the
// fuzzer's time); every failure must come with at least one error.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_FUZZ_FUZZMLIR_H
#define FLEXPIPE_TEST_FUZZ_FUZZMLIR_H

#include "FuzzTarget.h"

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Support/InputLimits.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdlib>
#include <memory>
#include <string>

namespace flexpipe::fuzz {

/// One input's MLIR context that counts its errors. Contexts are shared by
/// consecutive inputs and replaced every kReuse inputs: creating one costs
/// about a millisecond, more than most inputs, and interning (what a context
/// keeps) does not change what an input does.
class FuzzContext {
public:
  FuzzContext() : context(acquire()) {
    handler =
        context.getDiagEngine().registerHandler([this](mlir::Diagnostic &diag) {
          if (diag.getSeverity() == mlir::DiagnosticSeverity::Error)
            ++errors;
          if (verbose())
            llvm::errs() << diag.getLocation() << ": " << diag << "\n";
          return mlir::success();
        });
  }
  ~FuzzContext() {
    context.getDiagEngine().eraseHandler(handler);
    --state().users;
  }
  FuzzContext(const FuzzContext &) = delete;
  FuzzContext &operator=(const FuzzContext &) = delete;

  /// Parses `text` as flexpipe-compile does (limits first, unless
  /// `limits` is false) and verifies it. Returns null on any error, which
  /// must then have been reported.
  mlir::OwningOpRef<mlir::ModuleOp> parse(const std::string &text,
                                          bool limits = true) {
    if (limits && !checkInputLimits(text, "input").empty())
      return {};
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text),
                                 llvm::SMLoc());
    mlir::ParserConfig config(&context);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, config);
    if (module && mlir::failed(mlir::verify(*module)))
      module = {};
    FUZZ_CHECK(module || errors > 0, "parse failed without an error");
    return module;
  }

  mlir::MLIRContext &context;
  int errors = 0;

private:
  /// FLEXPIPE_FUZZ_VERBOSE=1 prints the diagnostics (to see why an input
  /// stops where it does).
  static bool verbose() {
    static const bool on = std::getenv("FLEXPIPE_FUZZ_VERBOSE") != nullptr;
    return on;
  }
  static constexpr int kReuse = 1000;
  struct State {
    std::unique_ptr<mlir::MLIRContext> context;
    int uses = 0, users = 0;
  };
  static State &state() {
    static State shared;
    return shared;
  }
  /// The shared context, replaced when it has served kReuse inputs and no
  /// FuzzContext holds it.
  static mlir::MLIRContext &acquire() {
    State &s = state();
    if (!s.context || (s.uses >= kReuse && s.users == 0)) {
      mlir::DialectRegistry registry;
      registry.insert<FlexPipeDialect, mlir::func::FuncDialect,
                      mlir::emitc::EmitCDialect>();
      s.context.reset(); // one context at a time
      s.context = std::make_unique<mlir::MLIRContext>(
          registry, mlir::MLIRContext::Threading::DISABLED);
      s.context->loadAllAvailableDialects();
      s.context->printOpOnDiagnostic(false);
      s.uses = 0;
    }
    ++s.uses;
    ++s.users;
    return *s.context;
  }
  mlir::DiagnosticEngine::HandlerID handler;
};

/// Prints `op` in the generic or the pretty form.
inline std::string print(mlir::Operation *op, bool generic) {
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::OpPrintingFlags flags;
  if (generic)
    flags.printGenericOpForm();
  op->print(os, flags);
  return text;
}

} // namespace flexpipe::fuzz

#endif // FLEXPIPE_TEST_FUZZ_FUZZMLIR_H
