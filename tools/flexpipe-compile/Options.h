//===- Options.h - flexpipe-compile command line ----------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The command line as a plain struct. Options.cpp parses it with CLI11 (which
// needs exceptions) so that the MLIR side never sees an exception.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TOOLS_FLEXPIPE_COMPILE_OPTIONS_H
#define FLEXPIPE_TOOLS_FLEXPIPE_COMPILE_OPTIONS_H

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace flexpipe {

struct CompileOptions {
  std::string input;
  /// What the input is: mlir (a spec or schedule), or torch-csv (PyTorch's
  /// compute_only or compute_comms schedule CSV); empty: from the name.
  std::string from;
  std::string output = "-";
  int64_t actors = 0;       ///< 0: as the spec says
  int64_t microbatches = 0; ///< 0: as the spec says
  std::string timeModel = "step";
  std::string stepRule = "next-type";
  std::string emit = "exe";
  std::string balance = "layers";
  std::string backend = "cpu";
  int64_t dp = 1;
  std::string model, cluster, profile; ///< YAML files; empty: none
  std::vector<std::string> plugins;    ///< --load-plugin, in order
  std::vector<std::string> ops;        ///< --ops, in order
  /// The long names of the options the command line gives ("--balance"),
  /// for the checks that refuse one that would change nothing.
  std::set<std::string> given;
  bool isGiven(const std::string &name) const { return given.count(name); }
};

/// Parses the command line. Returns -1 to go on, otherwise the exit code
/// (0 after --help, 1 after an error, which it has printed).
int parseCompileOptions(int argc, char **argv, CompileOptions &options);

} // namespace flexpipe

#endif // FLEXPIPE_TOOLS_FLEXPIPE_COMPILE_OPTIONS_H
