//===- Export.cpp - Timelines and text grids ------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/Simulator.h"

#include <algorithm>
#include <cmath>

using namespace flexpipe::sched;

std::string flexpipe::sched::actionName(const ProgOp &op,
                                        const Program *program) {
  if (op.kind == OpKind::Exec && program && op.inst >= 0 &&
      op.inst < static_cast<int32_t>(program->instructions.size()))
    return std::to_string(op.stage) + "@" + program->instructions[op.inst] +
           std::to_string(op.mb);
  const char *letter = opLetter(op.kind);
  return std::to_string(op.stage) + (letter ? letter : opKindName(op.kind)) +
         std::to_string(op.mb);
}

Timeline flexpipe::sched::unitTimeline(const Program &program) {
  Timeline t;
  Simulator simulator;
  if (llvm::errorToBool(simulator.prepare(program)))
    return t; // t.ok stays false
  SimResult r = simulator.run(unitCosts(program));
  t.ok = true;
  t.start = std::move(r.start);
  t.end = std::move(r.end);
  t.makespan = r.iterationTime;
  return t;
}

std::string flexpipe::sched::formatTextGrid(const Program &p,
                                            const Timeline &t) {
  const int64_t steps = static_cast<int64_t>(std::ceil(t.makespan));
  // Each actor's cells as (step, op index), in step order; the grid itself
  // is never held (actors x steps cells of mostly '.').
  std::vector<std::vector<std::pair<int64_t, size_t>>> cells(p.numActors);
  size_t width = 1;
  for (int32_t a = 0; a < p.numActors; ++a) {
    for (size_t i = 0; i < p.actors[a].size(); ++i) {
      const ProgOp &op = p.actors[a][i];
      // Computations and registered instructions take steps.
      if (!isWork(op.kind))
        continue;
      const int64_t step = static_cast<int64_t>(t.start[a][i]);
      if (step >= 0 && step < steps) {
        cells[a].push_back({step, i});
        width = std::max(width, actionName(op, &p).size());
      }
    }
    llvm::stable_sort(cells[a], llvm::less_first());
  }
  std::string out;
  const std::string label = "actor " + std::to_string(p.numActors - 1);
  for (int32_t a = 0; a < p.numActors; ++a) {
    std::string name = "actor " + std::to_string(a);
    std::string row = name + std::string(label.size() - name.size(), ' ') +
                      " |";
    size_t next = 0;
    for (int64_t step = 0; step < steps; ++step) {
      // The last computation that starts at this step holds the cell.
      std::string cell = ".";
      for (; next < cells[a].size() && cells[a][next].first == step; ++next)
        cell = actionName(p.actors[a][cells[a][next].second], &p);
      row += ' ' + cell + std::string(width - cell.size(), ' ');
    }
    row.erase(row.find_last_not_of(' ') + 1);
    out += row;
    out += '\n';
  }
  return out;
}
