//===- OutputFile.h - Writing a tool's output file whole --------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The tools render what they write into memory first and write it here: a
// file named by -o is opened (and an existing one replaced) only once the
// output is ready, so an error before that leaves it as it was; a write that
// fails (a full disk, a closed pipe) is reported with the file's name and a
// non-zero exit instead of LLVM's fatal "IO failure on output stream".
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TOOLS_OUTPUTFILE_H
#define FLEXPIPE_TOOLS_OUTPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace flexpipe {

/// Writes `text` to `path` (- for standard output). On failure prints
/// "`tool`: ..." on standard error, removes a partly written file and
/// returns false.
inline bool writeOutputFile(llvm::StringRef tool, llvm::StringRef path,
                            llvm::StringRef text) {
  std::error_code openError;
  auto out = std::make_unique<llvm::ToolOutputFile>(path, openError,
                                                    llvm::sys::fs::OF_None);
  if (openError) {
    llvm::errs() << tool << ": cannot open output file '" << path
                 << "': " << openError.message() << "\n";
    return false;
  }
  out->os() << text;
  out->os().flush();
  if (std::error_code ec = out->os().error()) {
    out->os().clear_error(); // reported here, not by LLVM's fatal error
    llvm::errs() << tool << ": cannot write '"
                 << (path == "-" ? llvm::StringRef("<stdout>") : path)
                 << "': " << ec.message() << "\n";
    return false;
  }
  out->keep();
  return true;
}

} // namespace flexpipe

#endif // FLEXPIPE_TOOLS_OUTPUTFILE_H
