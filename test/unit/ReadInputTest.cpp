//===- ReadInputTest.cpp - Support: bounded input files, stage graphs -----===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Support/ReadInput.h"
#include "flexpipe/Support/StageGraph.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <catch2/catch.hpp>

#include <tuple>

using flexpipe::readInputFile;

TEST_CASE("an input file is read whole, up to its bound", "[support]") {
  llvm::SmallString<128> path;
  int fd = -1;
  REQUIRE(!llvm::sys::fs::createTemporaryFile("read-input", "txt", fd, path));
  const std::string text(3 << 20, 'x'); // several of the reader's chunks
  {
    llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << text;
  }
  auto read = readInputFile(path);
  REQUIRE(read);
  CHECK((*read)->getBuffer() == text);
  CHECK((*read)->getBufferIdentifier() == path.str());
  // One byte over the bound is refused.
  auto over = readInputFile(path, text.size() - 1);
  REQUIRE(!over);
  CHECK(over.getError() == std::errc::file_too_large);
  CHECK(readInputFile(path, text.size()));
  llvm::sys::fs::remove(path);
  // An endless device stops at the bound (it read until memory ran out).
  auto endless = readInputFile("/dev/zero", 1 << 20);
  REQUIRE(!endless);
  CHECK(endless.getError() == std::errc::file_too_large);
  CHECK(flexpipe::readInputError(endless.getError())
            .find("or endless") != std::string::npos);
  CHECK(!readInputFile("/no/such/file"));
}

TEST_CASE("a stage graph orders stages and finds bad edges", "[support]") {
  using flexpipe::EdgeProblem;
  using Edges = std::vector<std::pair<int, int>>;
  // A V-shape's two chains joined at the bottom, listed out of order.
  const Edges v = {{2, 3}, {0, 1}, {1, 2}};
  flexpipe::StageGraph<int> graph(4, v);
  CHECK(graph.succs[1] == std::vector<int>{2});
  CHECK(graph.preds[3] == std::vector<int>{2});
  CHECK(graph.hasEdge(0, 1));
  CHECK(!graph.hasEdge(1, 0));
  CHECK(!graph.hasEdge(7, 0));
  CHECK(graph.topologicalOrder() == std::vector<int>{0, 1, 2, 3});
  CHECK(!graph.hasCycle());
  CHECK(!flexpipe::findEdgeProblem(4, v));

  // A cycle behind a first stage: only the stage before it is ordered.
  const Edges cycle = {{0, 1}, {1, 2}, {2, 1}};
  CHECK(flexpipe::StageGraph<int>(3, cycle).topologicalOrder() ==
        std::vector<int>{0});
  CHECK(flexpipe::StageGraph<int>(3, cycle).hasCycle());

  // A filter keeps some edges; ends outside the stages are left out.
  flexpipe::StageGraph<int64_t> kept(
      3, Edges{{0, 1}, {1, 2}, {2, 5}},
      [](int64_t from, int64_t) { return from != 0; });
  CHECK(kept.succs[0].empty());
  CHECK(kept.preds[2] == std::vector<int64_t>{1});
  CHECK(kept.succs[2].empty());

  auto problem = [](int64_t stages, const Edges &edges) {
    std::optional<EdgeProblem> bad = flexpipe::findEdgeProblem(stages, edges);
    REQUIRE(bad);
    return std::tuple(bad->kind, bad->from, bad->to);
  };
  CHECK(problem(3, {{0, 1}, {1, 3}}) ==
        std::tuple(EdgeProblem::OutOfRange, int64_t(1), int64_t(3)));
  CHECK(problem(3, {{-1, 0}}) ==
        std::tuple(EdgeProblem::OutOfRange, int64_t(-1), int64_t(0)));
  CHECK(problem(3, {{0, 1}, {2, 2}}) ==
        std::tuple(EdgeProblem::SelfEdge, int64_t(2), int64_t(2)));
  CHECK(problem(3, {{0, 1}, {1, 2}, {0, 1}}) ==
        std::tuple(EdgeProblem::Repeated, int64_t(0), int64_t(1)));
}
