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
// followed, dangling or not (its target is replaced); a path under /dev
// (but /dev/shm, whose files are files) or /proc (/dev/null, /dev/stdout,
// /proc/self/fd/N) or another character device is written in place and
// appended to (one there that does not exist is refused, not created); a
// FIFO, socket or block device elsewhere is refused.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_LIB_OUTPUTFILE_H
#define FLEXPIPE_RUNTIME_LIB_OUTPUTFILE_H

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

namespace flexpipe::rt {

namespace detail {
/// A slot of OutputFile's table of the temporaries alive, which the
/// interrupt handler reads with async-signal-safe calls only (a path too
/// long for one, or a 33rd file, is not recorded: it is left behind as
/// before).
struct LiveTemporary {
  /// 0 free, 1 being filled (by another thread), 2 a temporary.
  std::atomic<int> used{0};
  char path[4096];
};
static_assert(std::atomic<int>::is_always_lock_free,
              "the interrupt handler reads the slots");
} // namespace detail

class OutputFile {
public:
  explicit OutputFile(std::string path) : path(std::move(path)) {
    if (this->path.empty()) {
      problem = "cannot write '': the path is empty";
      return;
    }
    // Symbolic links are followed here, a dangling one too, so that the
    // temporary goes beside the final target and replaces it (renaming
    // over the link replaced the link).
    std::string target = this->path;
    for (int hops = 0; !isSystemPath(target); ++hops) {
      struct stat link;
      if (::lstat(target.c_str(), &link) != 0 || !S_ISLNK(link.st_mode))
        break;
      char buffer[4096];
      const ssize_t n = ::readlink(target.c_str(), buffer, sizeof(buffer));
      if (n <= 0 || n == static_cast<ssize_t>(sizeof(buffer)) || hops == 40) {
        problem = "cannot write '" + this->path +
                  "': its symbolic links do not resolve";
        return;
      }
      std::string next(buffer, static_cast<size_t>(n));
      if (next[0] != '/') {
        const size_t slash = target.rfind('/');
        next = (slash == std::string::npos ? std::string()
                                           : target.substr(0, slash + 1)) +
               next;
      }
      target = next;
    }
    // The process's streams and the kernel's files (/dev/stdout,
    // /proc/self/fd/1, /dev/null, a terminal) are written in place and
    // appended to: renaming over a redirected stdout's file lost what was
    // in it and what the program printed.
    struct stat info;
    if (isSystemPath(target)) {
      // Only what is there: as root, appending to /dev/null.actor0 made a
      // regular file in /dev.
      if (::stat(target.c_str(), &info) != 0) {
        problem = "cannot write '" + this->path +
                  "': it does not exist, and no file is made under /dev "
                  "or /proc (only existing ones are written, in place)";
        return;
      }
      direct = true;
    } else if (::stat(target.c_str(), &info) == 0) {
      if (S_ISDIR(info.st_mode)) {
        problem = "cannot write '" + this->path + "': it is a directory";
        return;
      }
      // A device made elsewhere is written in place too; a FIFO or socket
      // would make the check before the work wait for a reader.
      if (S_ISCHR(info.st_mode))
        direct = true;
      else if (!S_ISREG(info.st_mode)) {
        problem = "cannot write '" + this->path +
                  "': it is not a regular file (a FIFO, socket or block "
                  "device); write to a file";
        return;
      }
    }
    renameTo = target;
    temporary = target + ".tmp" + std::to_string(::getpid());
    // The temporary is made and recorded for the interrupt handler with the
    // interrupts held, so that it never exists unrecorded.
    sigset_t before;
    holdInterrupts(before);
    file = std::fopen(direct ? target.c_str() : temporary.c_str(),
                      direct ? "a" : "w");
    if (file && !direct)
      slot = record(temporary);
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    if (!file)
      problem = "cannot write '" + this->path + "': " +
                (direct || target == this->path
                     ? std::string(std::strerror(errno))
                     : "cannot create a file beside its target '" + target +
                           "' (" + std::strerror(errno) + ")");
  }
  /// Under /dev (/dev/null, /dev/stdout, /dev/fd/1) or /proc: written in
  /// place. Not /dev/shm's files: they are files (a checkpoint rewritten
  /// there was appended to).
  static bool isSystemPath(const std::string &p) {
    return (p.rfind("/dev/", 0) == 0 && p.rfind("/dev/shm/", 0) != 0) ||
           p.rfind("/proc/", 0) == 0;
  }
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  ~OutputFile() {
    if (file) {
      std::fclose(file);
      if (!direct)
        std::remove(temporary.c_str());
    }
    forget();
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
      forget();
      return false;
    }
    forget();
    return true;
  }
  const std::string &error() const { return problem; }

  /// "" when `path` can be written (its temporary is created and removed),
  /// else why not.
  static std::string check(const std::string &path) {
    OutputFile probe(path);
    return probe.error();
  }

  /// "" when no two of `outputs` ((option, path): every file or directory
  /// a run writes, whichever process writes it; "" for none) name one
  /// path, else which
  /// two do: one would overwrite the other (the losses lost under the
  /// profile, exit 0). Device paths (isSystemPath) may be named twice.
  static std::string checkDistinct(
      const std::vector<std::pair<std::string, std::string>> &outputs) {
    std::map<std::string, const std::string *> seen;
    for (const auto &[option, path] : outputs) {
      if (path.empty() || isSystemPath(path))
        continue;
      const std::string key = canonical(path);
      if (isSystemPath(key))
        continue;
      auto [it, fresh] = seen.emplace(key, &option);
      if (!fresh)
        return option + " and " + *it->second + " both name '" + path +
               "': one would overwrite the other";
    }
    return "";
  }

  /// `path` absolute, links resolved as far as it exists, without "." and
  /// "..": "ckpt/" and "ckpt/." are ".../ckpt", a link to a device is the
  /// device.
  static std::string canonical(const std::string &path) {
    std::error_code ignored;
    std::string key = std::filesystem::weakly_canonical(
                          std::filesystem::absolute(path, ignored), ignored)
                          .lexically_normal();
    if (key.empty())
      key = path;
    while (key.size() > 1 && key.back() == '/')
      key.pop_back();
    return key;
  }

  /// Removes the temporaries of the OutputFiles alive; async-signal-safe,
  /// for an interrupt handler of the program's own (flexpipe-profile's).
  static void removeLiveTemporaries() {
    for (const Live &entry : live)
      if (entry.used.load() == 2)
        ::unlink(entry.path);
  }

  /// Makes SIGINT, SIGTERM and SIGHUP remove the temporaries of the
  /// OutputFiles alive when one arrives, then end the process by the signal
  /// as before (a caller sees it was interrupted). Only where the signal
  /// has its default action (a handler of the program's, or an ignored
  /// signal, is kept). An interrupted run left its half-written
  /// `FILE.tmpPID`s behind for good.
  static void removeTemporariesOnInterrupt() {
    struct sigaction action {};
    action.sa_handler = onInterrupt;
    sigemptyset(&action.sa_mask);
    for (int sig : kInterrupts)
      sigaddset(&action.sa_mask, sig);
    for (int sig : kInterrupts) {
      struct sigaction old {};
      if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_DFL &&
          !(old.sa_flags & SA_SIGINFO))
        sigaction(sig, &action, nullptr);
    }
  }

private:
  static constexpr int kInterrupts[] = {SIGINT, SIGTERM, SIGHUP};
  using Live = detail::LiveTemporary;
  static inline Live live[32];

  static void holdInterrupts(sigset_t &before) {
    sigset_t interrupts;
    sigemptyset(&interrupts);
    for (int sig : kInterrupts)
      sigaddset(&interrupts, sig);
    pthread_sigmask(SIG_BLOCK, &interrupts, &before);
  }
  /// With the interrupts held: the slot `temporary` is recorded in, or -1.
  static int record(const std::string &temporary) {
    if (temporary.size() >= sizeof(Live::path))
      return -1;
    for (int i = 0; i < static_cast<int>(std::size(live)); ++i) {
      int expected = 0;
      if (live[i].used.compare_exchange_strong(expected, 1)) {
        std::memcpy(live[i].path, temporary.c_str(), temporary.size() + 1);
        live[i].used.store(2);
        return i;
      }
    }
    return -1;
  }
  /// The temporary is gone (renamed or removed): no longer the handler's.
  void forget() {
    if (slot < 0)
      return;
    sigset_t before;
    holdInterrupts(before);
    live[slot].used.store(0);
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    slot = -1;
  }
  static void onInterrupt(int sig) {
    removeLiveTemporaries();
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }

  std::string path, renameTo, temporary;
  int slot = -1;
  FILE *file = nullptr;
  /// Written in place, appended to: isSystemPath, or a
  /// character device.
  bool direct = false;
  std::string problem;
};

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_LIB_OUTPUTFILE_H
