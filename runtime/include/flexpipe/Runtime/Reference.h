//===- Reference.h - Single-process training --------------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// flexpipe-reference's whole program, in the runtime library so that
// flexpipe-compile --ops can build it again with the user's runtime
// operations compiled in (the `reference` beside the rank executables).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_REFERENCE_H
#define FLEXPIPE_RUNTIME_REFERENCE_H

namespace flexpipe::rt {

/// Trains the schedule's model in one process: `PROGRAM SCHEDULE.txt
/// [--iterations N] [--lr X] [--losses FILE] [--weights FILE]`, or
/// `PROGRAM --list-operations`. Returns the exit code. `withOperations`:
/// the program was built with the schedule's runtime operations
/// (flexpipe-compile --ops), so one the schedule runs and none defines is
/// an error; without, flexpipe-reference skips it with a note.
int runReference(int argc, char **argv, bool withOperations = false);

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_REFERENCE_H
