//===- ShellQuote.h - Words for sh, quoted where they need it ---*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The tools write commands for sh: into launchers (flexpipe-compile), the
// commands they run (flexpipe-profile) and the reproduce lines of their
// outputs (flexpipe-tune).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TOOLS_SHELLQUOTE_H
#define FLEXPIPE_TOOLS_SHELLQUOTE_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace flexpipe {

/// `arg` as one sh word: as it is when it holds only characters sh leaves
/// alone, else in single quotes (a quote inside as '\'').
inline std::string shellQuote(llvm::StringRef arg) {
  if (!arg.empty() && llvm::all_of(arg, [](char c) {
        return llvm::isAlnum(c) || llvm::StringRef("_-./=:+,@%").contains(c);
      }))
    return arg.str();
  std::string quoted = "'";
  for (char c : arg)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

} // namespace flexpipe

#endif // FLEXPIPE_TOOLS_SHELLQUOTE_H
