//===- FuzzReplay.cpp - Runs fuzz targets over corpus files ---------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// flexpipe-fuzz-replay TARGET PATH...: runs the fuzz target TARGET on every
// file of the given files and directories (recursively), as libFuzzer runs a
// corpus, and prints how many it ran. Built by the ordinary build, without
// libFuzzer, so that the test suite replays the seed and regression corpora
// (test/Fuzz/corpus) on every machine. A failed property or a crash ends the
// process with the input's name on stderr.
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace {

std::map<std::string, flexpipe::fuzz::TargetFn> &targets() {
  static std::map<std::string, flexpipe::fuzz::TargetFn> table;
  return table;
}

} // namespace

bool flexpipe::fuzz::registerTarget(const char *name, TargetFn fn) {
  targets()[name] = fn;
  return true;
}

int main(int argc, char **argv) {
  auto usage = [] {
    std::string names;
    for (const auto &[name, fn] : targets())
      names += " " + name;
    std::fprintf(stderr,
                 "usage: flexpipe-fuzz-replay TARGET PATH...\ntargets:%s\n",
                 names.c_str());
    return 2;
  };
  if (argc < 3)
    return usage();
  auto target = targets().find(argv[1]);
  if (target == targets().end()) {
    std::fprintf(stderr, "flexpipe-fuzz-replay: no target '%s'\n", argv[1]);
    return usage();
  }
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto &entry : fs::recursive_directory_iterator(argv[i], ec))
        if (entry.is_regular_file())
          inputs.push_back(entry.path());
    } else if (fs::is_regular_file(argv[i], ec)) {
      inputs.push_back(argv[i]);
    } else {
      std::fprintf(stderr, "flexpipe-fuzz-replay: cannot read '%s'\n", argv[i]);
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path &path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    // Named first, so that a crash says which input caused it.
    std::fprintf(stderr, "%s\n", path.c_str());
    target->second(reinterpret_cast<const uint8_t *>(bytes.data()),
                   bytes.size());
  }
  std::printf("%s: %zu inputs, no failure\n", argv[1], inputs.size());
  return 0;
}
