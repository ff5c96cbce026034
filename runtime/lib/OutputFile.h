//===- OutputFile.h - Results written whole or not at all -------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The runtime's result files (losses, weights, profiles, traces) and the
// reference trainer's: checked before the work starts, so that an unwritable
// path costs nothing, and written to a temporary beside the target that is
// renamed over it at the end, so that a run killed while writing leaves the
// previous file (or none) rather than half of one.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_LIB_OUTPUTFILE_H
#define FLEXPIPE_RUNTIME_LIB_OUTPUTFILE_H

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

namespace flexpipe::rt {

class OutputFile {
public:
  explicit OutputFile(std::string path)
      : path(std::move(path)),
        temporary(this->path + ".tmp" + std::to_string(::getpid())),
        file(nullptr) {
    // The rename at the end would fail on these, after all the work.
    struct stat info;
    if (this->path.empty())
      problem = "cannot write '': the path is empty";
    else if (::stat(this->path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
      problem = "cannot write '" + this->path + "': it is a directory";
    else if (!(file = std::fopen(temporary.c_str(), "w")))
      problem = "cannot write '" + this->path + "': " + std::strerror(errno);
  }
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  ~OutputFile() {
    if (file) {
      std::fclose(file);
      std::remove(temporary.c_str());
    }
  }
  /// The stream to write, or null when the file cannot be written (error()).
  FILE *get() const { return file; }
  /// Closes and renames the temporary over the target; false on failure.
  bool commit() {
    if (!file)
      return false;
    const bool written = std::ferror(file) == 0;
    const bool closed = std::fclose(file) == 0;
    file = nullptr;
    if (!written || !closed ||
        std::rename(temporary.c_str(), path.c_str()) != 0) {
      problem = "cannot write '" + path + "': " + std::strerror(errno);
      std::remove(temporary.c_str());
      return false;
    }
    return true;
  }
  const std::string &error() const { return problem; }

  /// "" when `path` can be written (its temporary is created and removed),
  /// else why not.
  static std::string check(const std::string &path) {
    OutputFile probe(path);
    return probe.error();
  }

private:
  std::string path, temporary;
  FILE *file;
  std::string problem;
};

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_LIB_OUTPUTFILE_H
