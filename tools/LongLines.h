//===- LongLines.h - Diagnostics on very long source lines ------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// MLIR's SourceMgr handler prints the whole source line under each
// diagnostic: one error in a generated line of a megabyte prints megabytes.
// LongLineDiagnostics keeps FILE:LINE:COLUMN and the message for such lines
// and leaves the echo out; diagnostics on ordinary lines go to the SourceMgr
// handler as before. Used by flexpipe-compile and flexpipe-opt.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TOOLS_LONGLINES_H
#define FLEXPIPE_TOOLS_LONGLINES_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"

#include <vector>

namespace flexpipe {

/// Source lines longer than this are not echoed under a diagnostic.
constexpr size_t kLongestEchoedLine = 1000;

/// The numbers (from 1) of the lines of `text` too long to echo.
inline std::vector<size_t> longLineNumbers(llvm::StringRef text) {
  std::vector<size_t> lines;
  size_t line = 1, length = 0;
  for (char c : text) {
    if (c != '\n') {
      ++length;
      continue;
    }
    if (length > kLongestEchoedLine)
      lines.push_back(line);
    ++line;
    length = 0;
  }
  if (length > kLongestEchoedLine)
    lines.push_back(line);
  return lines;
}

class LongLineDiagnostics {
public:
  /// `text` is the input `handler` reads; registered on `context` until
  /// destroyed. Does nothing when no line of `text` is long.
  LongLineDiagnostics(mlir::SourceMgrDiagnosticHandler &handler,
                      mlir::MLIRContext *context, llvm::StringRef text)
      : handler(handler), context(context), longLines(longLineNumbers(text)) {
    if (longLines.empty())
      return;
    id = context->getDiagEngine().registerHandler(
        [this](mlir::Diagnostic &diag) { return emit(diag); });
  }
  ~LongLineDiagnostics() {
    if (!longLines.empty())
      context->getDiagEngine().eraseHandler(id);
  }
  LongLineDiagnostics(const LongLineDiagnostics &) = delete;
  LongLineDiagnostics &operator=(const LongLineDiagnostics &) = delete;

private:
  bool isLong(mlir::Location loc) const {
    auto fileLoc = loc->findInstanceOf<mlir::FileLineColLoc>();
    if (!fileLoc)
      return false;
    for (size_t line : longLines)
      if (line == fileLoc.getLine())
        return true;
    return false;
  }

  /// Emits `diag` without source lines when it or one of its notes is on a
  /// long line; otherwise lets the SourceMgr handler have it.
  mlir::LogicalResult emit(mlir::Diagnostic &diag) {
    bool anyLong = isLong(diag.getLocation());
    for (mlir::Diagnostic &note : diag.getNotes())
      anyLong |= isLong(note.getLocation());
    if (!anyLong)
      return mlir::failure();
    handler.emitDiagnostic(diag.getLocation(), diag.str(), diag.getSeverity(),
                           !isLong(diag.getLocation()));
    for (mlir::Diagnostic &note : diag.getNotes())
      handler.emitDiagnostic(note.getLocation(), note.str(), note.getSeverity(),
                             !isLong(note.getLocation()));
    return mlir::success();
  }

  mlir::SourceMgrDiagnosticHandler &handler;
  mlir::MLIRContext *context;
  std::vector<size_t> longLines;
  mlir::DiagnosticEngine::HandlerID id = 0;
};

} // namespace flexpipe

#endif // FLEXPIPE_TOOLS_LONGLINES_H
