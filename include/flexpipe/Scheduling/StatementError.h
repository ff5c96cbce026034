//===- StatementError.h - An error about one statement of a spec -*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The IR-free library reports what is wrong with a spec as llvm::Error. When
// the fault is one statement's (a module, a registered instruction, an
// optimize request), the error says which, so that a pass reports it at that
// op rather than at the pipeline. Its message reads the same either way.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_STATEMENTERROR_H
#define FLEXPIPE_SCHEDULING_STATEMENTERROR_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace flexpipe::sched {

class StatementError : public llvm::ErrorInfo<StatementError> {
public:
  /// What `index` counts, in declaration order: the spec's modules
  /// (PipelineSpec::modules), its registered instructions
  /// (PipelineSpec::instructions), the Problem's registered instructions
  /// (Problem::registered, which the spec's follow), its dependencies
  /// (PipelineSpec::dependencies), or its optimize request (index 0).
  enum class Site { Module, Instruction, Registered, Dependency, Optimize };

  StatementError(Site site, int32_t index, std::string what)
      : site(site), index(index), what(std::move(what)) {}

  void log(llvm::raw_ostream &os) const override { os << what; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

  Site site;
  int32_t index;
  std::string what;
  static char ID;
};

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_STATEMENTERROR_H
