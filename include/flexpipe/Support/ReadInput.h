//===- ReadInput.h - An input file read with a bound on its size -*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// llvm::MemoryBuffer reads a file that is not a regular one (a device, a
// pipe) until its end: `--cluster /dev/zero` grew until memory ran out, or
// died with "LLVM ERROR: out of memory". The tools read their inputs
// (specs, schedules, CSVs, model, cluster and profile files) through this
// instead, which stops past a bound far above any real input.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SUPPORT_READINPUT_H
#define FLEXPIPE_SUPPORT_READINPUT_H

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <string>

namespace flexpipe {

/// The largest input file the tools read (1 GiB), and the largest model,
/// cluster or profile file (64 MiB: a profile of 65,536 actors' messages
/// takes a few).
constexpr uint64_t kMaxInputBytes = uint64_t(1) << 30;
constexpr uint64_t kMaxConfigBytes = uint64_t(1) << 26;

/// The contents of `path` ("-": standard input), named `path` ("<stdin>"),
/// as mlir::openInputFile names them, or an error
/// that says why not: it cannot be opened or read, or it holds more than
/// `limit` bytes (an endless device such as /dev/zero).
inline llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(llvm::StringRef path, uint64_t limit = kMaxInputBytes) {
  llvm::sys::fs::file_t file = llvm::sys::fs::getStdinHandle();
  if (path != "-") {
    llvm::Expected<llvm::sys::fs::file_t> opened =
        llvm::sys::fs::openNativeFileForRead(path);
    if (!opened)
      return llvm::errorToErrorCode(opened.takeError());
    file = *opened;
  }
  llvm::SmallString<0> contents;
  std::error_code error;
  constexpr size_t kChunk = size_t(1) << 20;
  for (;;) {
    const size_t used = contents.size();
    contents.resize_for_overwrite(used + kChunk);
    llvm::Expected<size_t> got = llvm::sys::fs::readNativeFile(
        file, llvm::MutableArrayRef<char>(contents.data() + used, kChunk));
    if (!got) {
      error = llvm::errorToErrorCode(got.takeError());
      break;
    }
    contents.truncate(used + *got);
    if (*got == 0)
      break;
    if (contents.size() > limit) {
      error = std::make_error_code(std::errc::file_too_large);
      break;
    }
  }
  if (path != "-")
    llvm::sys::fs::closeFile(file);
  if (error)
    return error;
  return llvm::MemoryBuffer::getMemBufferCopy(
      contents, path == "-" ? llvm::StringRef("<stdin>") : path);
}

/// Why readInputFile failed, in words.
inline std::string readInputError(std::error_code error) {
  return error.message() + (error == std::errc::file_too_large
                                ? " (larger than any input the tools read, "
                                  "or endless)"
                                : "");
}

} // namespace flexpipe

#endif // FLEXPIPE_SUPPORT_READINPUT_H
