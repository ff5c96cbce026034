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
// previous file (or none) rather than half of one. A symbolic link is
// followed (its target is replaced); a character device such as /dev/null is
// written in place; a FIFO, socket or block device is refused.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_LIB_OUTPUTFILE_H
#define FLEXPIPE_RUNTIME_LIB_OUTPUTFILE_H

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

namespace flexpipe::rt {

class OutputFile {
public:
  explicit OutputFile(std::string path) : path(std::move(path)) {
    if (this->path.empty()) {
      problem = "cannot write '': the path is empty";
      return;
    }
    // A symbolic link stands for its target: the temporary goes beside the
    // target and replaces it (renaming over the link replaced the link).
    std::string target = this->path;
    struct stat info;
    bool dangling = false;
    if (::lstat(target.c_str(), &info) == 0 && S_ISLNK(info.st_mode)) {
      if (char *resolved = ::realpath(target.c_str(), nullptr)) {
        target = resolved;
        std::free(resolved);
      } else {
        dangling = true; // written through the link, which creates it
      }
    }
    if (::stat(target.c_str(), &info) == 0) {
      if (S_ISDIR(info.st_mode)) {
        problem = "cannot write '" + this->path + "': it is a directory";
        return;
      }
      // A device (/dev/null, a terminal) is written in place: renaming a
      // file over it replaced the device node. A FIFO or socket would make
      // the check before the work wait for a reader.
      if (S_ISCHR(info.st_mode))
        direct = true;
      else if (!S_ISREG(info.st_mode)) {
        problem = "cannot write '" + this->path +
                  "': it is not a regular file (a FIFO, socket or block "
                  "device); write to a file";
        return;
      }
    }
    direct = direct || dangling;
    renameTo = target;
    temporary = target + ".tmp" + std::to_string(::getpid());
    if (!(file = std::fopen(direct ? target.c_str() : temporary.c_str(), "w")))
      problem = "cannot write '" + this->path + "': " + std::strerror(errno);
  }
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  ~OutputFile() {
    if (file) {
      std::fclose(file);
      if (!direct)
        std::remove(temporary.c_str());
    }
  }
  /// The stream to write, or null when the file cannot be written (error()).
  FILE *get() const { return file; }
  /// Closes and renames the temporary over the target (a device is written
  /// in place); false on failure.
  bool commit() {
    if (!file)
      return false;
    const bool written = std::ferror(file) == 0;
    const bool closed = std::fclose(file) == 0;
    file = nullptr;
    if (!written || !closed ||
        (!direct && std::rename(temporary.c_str(), renameTo.c_str()) != 0)) {
      problem = "cannot write '" + path + "': " + std::strerror(errno);
      if (!direct)
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
  std::string path, renameTo, temporary;
  FILE *file = nullptr;
  /// Written in place: a character device, or a link to a missing file.
  bool direct = false;
  std::string problem;
};

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_LIB_OUTPUTFILE_H
