//===- StageGraph.h - A pipeline's stages and edges -------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The stage graph: each stage's predecessors and successors along the edges
// (from, to) that carry activations forward and gradients back. The
// schedule op's verifier, the scheduling library (message checks, gradient
// separation, layer offsets), the lowering and the runtime (its description
// reader and executor) all build it here, and hold an edge list to one rule:
// each edge joins two different stages, once, and the edges form no cycle.
// Header-only: the runtime does not link the compiler's libraries.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SUPPORT_STAGEGRAPH_H
#define FLEXPIPE_SUPPORT_STAGEGRAPH_H

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace flexpipe {

/// The first edge of a list that breaks the rule, and how.
struct EdgeProblem {
  enum Kind {
    OutOfRange, ///< an end is not one of the stages
    SelfEdge,   ///< from == to
    Repeated,   ///< the same (from, to) as an earlier edge
  };
  Kind kind;
  int64_t from, to;
};

/// The first edge of `edges` ((from, to) pairs) that is out of range of
/// `numStages` stages, joins a stage to itself or repeats an earlier one.
template <typename Edges>
std::optional<EdgeProblem> findEdgeProblem(int64_t numStages,
                                           const Edges &edges) {
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const auto &[from, to] : edges) {
    std::optional<EdgeProblem::Kind> kind;
    if (from < 0 || from >= numStages || to < 0 || to >= numStages)
      kind = EdgeProblem::OutOfRange;
    else if (from == to)
      kind = EdgeProblem::SelfEdge;
    else if (!seen.insert({from, to}).second)
      kind = EdgeProblem::Repeated;
    if (kind)
      return EdgeProblem{*kind, static_cast<int64_t>(from),
                         static_cast<int64_t>(to)};
  }
  return std::nullopt;
}

/// Compressed rows of `rows` rows: row r's entries are
/// list[begin[r]] .. list[begin[r + 1] - 1], in the order `forEach` gives
/// them. `forEach(emit)` calls emit(row, value) for every entry; it is run
/// twice (to count, then to place), and must emit the same entries both
/// times.
template <typename ForEach>
void buildCompressedRows(int32_t rows, ForEach forEach,
                         std::vector<int32_t> &begin,
                         std::vector<int32_t> &list) {
  begin.assign(static_cast<size_t>(rows) + 1, 0);
  forEach([&](int32_t row, int32_t) { ++begin[row + 1]; });
  for (int32_t r = 0; r < rows; ++r)
    begin[r + 1] += begin[r];
  list.resize(begin[rows]);
  std::vector<int32_t> fill(begin.begin(), begin.end() - 1);
  forEach([&](int32_t row, int32_t value) { list[fill[row]++] = value; });
}

/// Predecessors and successors of `Id`-numbered stages, in edge order.
template <typename Id> struct StageGraph {
  std::vector<std::vector<Id>> preds, succs;

  /// The graph of `numStages` stages over the edges `keep(from, to)`
  /// accepts; an edge with an end outside [0, numStages) is left out
  /// (findEdgeProblem reports it where that is an error).
  template <typename Edges, typename Keep>
  StageGraph(int64_t numStages, const Edges &edges, Keep keep)
      : preds(static_cast<size_t>(std::max<int64_t>(numStages, 0))),
        succs(preds.size()) {
    for (const auto &[from, to] : edges)
      if (from >= 0 && from < numStages && to >= 0 && to < numStages &&
          keep(static_cast<Id>(from), static_cast<Id>(to))) {
        succs[from].push_back(static_cast<Id>(to));
        preds[to].push_back(static_cast<Id>(from));
      }
  }
  template <typename Edges>
  StageGraph(int64_t numStages, const Edges &edges)
      : StageGraph(numStages, edges, [](Id, Id) { return true; }) {}

  Id size() const { return static_cast<Id>(succs.size()); }

  bool hasEdge(Id from, Id to) const {
    return from >= 0 && from < size() &&
           std::find(succs[from].begin(), succs[from].end(), to) !=
               succs[from].end();
  }

  /// The stages, each after all of its predecessors (Kahn's algorithm).
  /// Stages on or behind a cycle are left out: the order is shorter than
  /// size() exactly when the edges form one.
  std::vector<Id> topologicalOrder() const {
    std::vector<Id> order, waiting(succs.size());
    for (Id s = 0; s < size(); ++s) {
      waiting[s] = static_cast<Id>(preds[s].size());
      if (waiting[s] == 0)
        order.push_back(s);
    }
    for (size_t k = 0; k < order.size(); ++k)
      for (Id next : succs[order[k]])
        if (--waiting[next] == 0)
          order.push_back(next);
    return order;
  }
  bool hasCycle() const {
    return topologicalOrder().size() != static_cast<size_t>(size());
  }
};

} // namespace flexpipe

#endif // FLEXPIPE_SUPPORT_STAGEGRAPH_H
