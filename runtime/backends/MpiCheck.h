//===- MpiCheck.h - Checked MPI calls for the backends ----------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Every MPI call of a backend is checked; a failure names the call, file and
// line and MPI's text for the error, and goes to the backend's handler (the
// CPU backend aborts through MPI, the CUDA backend aborts NCCL first).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_BACKENDS_MPICHECK_H
#define FLEXPIPE_RUNTIME_BACKENDS_MPICHECK_H

#include <mpi.h>

#include <string>

namespace flexpipe::rt {

/// MPI's text for error `status`.
inline std::string mpiErrorString(int status) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  return std::string(text, length);
}

} // namespace flexpipe::rt

/// Runs `call`; on failure calls onFailure(call text, file, line, MPI's text).
#define FLEXPIPE_MPI_CHECK(call, onFailure)                                    \
  do {                                                                         \
    int status_ = (call);                                                      \
    if (status_ != MPI_SUCCESS)                                                \
      onFailure(#call, __FILE__, __LINE__,                                     \
                ::flexpipe::rt::mpiErrorString(status_));                      \
  } while (0)

#endif // FLEXPIPE_RUNTIME_BACKENDS_MPICHECK_H
