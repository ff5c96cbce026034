//===- SupportTest.cpp - Shared rules: stage graphs, shapes, names --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Support/InputLimits.h"
#include "flexpipe/Support/StageGraph.h"

#include <catch2/catch.hpp>

#include <tuple>

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

TEST_CASE("a repeated edge counts twice in the order", "[support]") {
  // A repeated edge (the verifiers refuse it) neither hides a stage nor
  // makes a cycle: its target waits for both copies.
  const std::vector<std::pair<int64_t, int64_t>> twice = {{0, 1}, {0, 1}};
  flexpipe::StageGraph<int32_t> graph(2, twice);
  CHECK(graph.preds[1].size() == 2);
  CHECK(graph.topologicalOrder() == std::vector<int32_t>{0, 1});
  // No stages, or a negative count: an empty graph, every edge left out.
  CHECK(flexpipe::StageGraph<int32_t>(0, twice).topologicalOrder().empty());
  CHECK(flexpipe::StageGraph<int32_t>(-3, twice).size() == 0);
  // Ends beyond 32 bits are out of range, not cut to a stage.
  const std::vector<std::pair<int64_t, int64_t>> wide = {
      {0, (int64_t(1) << 32) + 1}};
  CHECK(flexpipe::StageGraph<int32_t>(2, wide).succs[0].empty());
  CHECK(flexpipe::findEdgeProblem(2, wide)->kind ==
        flexpipe::EdgeProblem::OutOfRange);
}

TEST_CASE("compressed rows keep each row's entries in emitted order",
          "[support]") {
  const std::vector<std::pair<int32_t, int32_t>> entries = {
      {2, 7}, {0, 5}, {2, 3}, {0, 9}};
  std::vector<int32_t> begin, list;
  flexpipe::buildCompressedRows(
      4,
      [&](auto &&emit) {
        for (auto [row, value] : entries)
          emit(row, value);
      },
      begin, list);
  // Row 1 and row 3 are empty; the last row's end is the list's size.
  CHECK(begin == std::vector<int32_t>{0, 2, 2, 4, 4});
  CHECK(list == std::vector<int32_t>{5, 9, 7, 3});
  // No rows: one begin, no entries.
  flexpipe::buildCompressedRows(0, [](auto &&) {}, begin, list);
  CHECK(begin == std::vector<int32_t>{0});
  CHECK(list.empty());
}

TEST_CASE("a model shape is in range with hidden a multiple of heads",
          "[support]") {
  using flexpipe::checkModelShape;
  CHECK(checkModelShape(64, 4, 32, 256) == "");
  CHECK(checkModelShape(64, 4, 32, 0) ==
        "vocab must be between 1 and 16777216, got 0");
  CHECK(checkModelShape(64, 4, 32, 0, /*minVocab=*/0) == "");
  CHECK(checkModelShape(65, 4, 32, 256) == "hidden 65 is not a multiple of "
                                           "heads 4");
  CHECK(checkModelShape(64, 0, 32, 256) ==
        "heads must be between 1 and 16777216, got 0");
  CHECK(checkModelShape(64, 4, int64_t(1) << 24, 256) == "");
  CHECK(checkModelShape(64, 4, (int64_t(1) << 24) + 1, 256) ==
        "seq must be between 1 and 16777216, got 16777217");
}

TEST_CASE("a symbol is written as MLIR writes it", "[support]") {
  using flexpipe::sched::formatSymbol;
  CHECK(formatSymbol("one_f_one_b") == "@one_f_one_b");
  CHECK(formatSymbol("v2.zb$x") == "@v2.zb$x");
  CHECK(formatSymbol("1F1B") == "@\"1F1B\"");
  CHECK(formatSymbol("torch-compute-only") == "@\"torch-compute-only\"");
  CHECK(formatSymbol("") == "@\"\"");
  CHECK(formatSymbol("two\nlines \"q\" \\ \xff") ==
        "@\"two\\0Alines \\22q\\22 \\\\ \\FF\"");
}
