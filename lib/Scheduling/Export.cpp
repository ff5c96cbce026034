//===- Export.cpp - Timelines, text grids and PyTorch CSV -----------------===//
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
#include <sstream>

using namespace flexpipe::sched;

namespace {

std::string cell(const ProgOp &op) {
  return std::to_string(op.stage) + opLetter(op.kind) + std::to_string(op.mb);
}

} // namespace

Timeline flexpipe::sched::unitTimeline(const Program &program) {
  Timeline t;
  Simulator simulator;
  std::string error;
  if (!simulator.prepare(program, error))
    return t;
  SimResult r = simulator.run(unitCosts(program));
  t.ok = true;
  t.start = std::move(r.start);
  t.end = std::move(r.end);
  t.makespan = r.iterationTime;
  return t;
}

int64_t flexpipe::sched::peakInflight(const Program &program) {
  int64_t peak = 0;
  for (const auto &ops : program.actors) {
    bool split = std::any_of(ops.begin(), ops.end(), [](const ProgOp &op) {
      return op.kind == OpKind::Wgrad;
    });
    int64_t held = 0;
    for (const ProgOp &op : ops) {
      if (op.kind == OpKind::Fwd)
        peak = std::max(peak, ++held);
      else if (op.kind == (split ? OpKind::Wgrad : OpKind::Bwd))
        --held;
    }
  }
  return peak;
}

std::string flexpipe::sched::formatTextGrid(const Program &p,
                                            const Timeline &t) {
  const int64_t steps = static_cast<int64_t>(std::ceil(t.makespan));
  std::vector<std::vector<std::string>> grid(
      p.numActors, std::vector<std::string>(steps, "."));
  size_t width = 1;
  for (int32_t a = 0; a < p.numActors; ++a)
    for (size_t i = 0; i < p.actors[a].size(); ++i) {
      const ProgOp &op = p.actors[a][i];
      if (!isCompute(op.kind))
        continue;
      const int64_t step = static_cast<int64_t>(t.start[a][i]);
      if (step >= 0 && step < steps) {
        grid[a][step] = cell(op);
        width = std::max(width, grid[a][step].size());
      }
    }
  std::ostringstream os;
  const std::string label = "actor " + std::to_string(p.numActors - 1);
  for (int32_t a = 0; a < p.numActors; ++a) {
    std::string name = "actor " + std::to_string(a);
    std::string row = name + std::string(label.size() - name.size(), ' ') +
                      " |";
    for (const std::string &c : grid[a])
      row += ' ' + c + std::string(width - c.size(), ' ');
    row.erase(row.find_last_not_of(' ') + 1);
    os << row << '\n';
  }
  return os.str();
}

std::string flexpipe::sched::formatTorchCsv(const Program &p,
                                            const Timeline &t) {
  std::ostringstream os;
  for (int32_t a = 0; a < p.numActors; ++a) {
    double clock = 0;
    bool first = true;
    for (size_t i = 0; i < p.actors[a].size(); ++i) {
      const ProgOp &op = p.actors[a][i];
      if (!isCompute(op.kind))
        continue;
      // One empty cell per idle step before this computation.
      for (; clock + 0.5 < t.start[a][i]; clock += 1) {
        os << (first ? "" : ",");
        first = false;
      }
      os << (first ? "" : ",") << cell(op);
      first = false;
      clock = t.end[a][i];
    }
    os << '\n';
  }
  return os.str();
}

std::string flexpipe::sched::formatTorchCsvComms(const Program &p) {
  std::ostringstream os;
  for (int32_t a = 0; a < p.numActors; ++a) {
    bool first = true;
    for (const ProgOp &op : p.actors[a]) {
      if (!opLetter(op.kind))
        continue;
      os << (first ? "" : ",") << cell(op);
      first = false;
    }
    os << '\n';
  }
  return os.str();
}

std::string flexpipe::sched::parseTorchCsv(const std::string &text,
                                           Program &program) {
  program = Program();
  std::istringstream in(text);
  std::string line;
  int32_t row = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.find_first_not_of(", \t") == std::string::npos)
      continue;
    ++row;
    std::vector<ProgOp> ops;
    std::istringstream cells(line);
    std::string c;
    while (std::getline(cells, c, ',')) {
      if (c.empty())
        continue; // an idle slot of the lock-step grid
      size_t letter = c.find_first_not_of("0123456789");
      if (letter == 0 || letter == std::string::npos ||
          letter + 1 >= c.size() || std::string("FBIW").find(c[letter]) ==
                                        std::string::npos ||
          c.find_first_not_of("0123456789", letter + 1) != std::string::npos ||
          letter > 7 || c.size() - letter - 1 > 7)
        continue; // not a computation (REDUCE_GRAD, SEND_F, ...)
      ProgOp op;
      op.kind = c[letter] == 'F'   ? OpKind::Fwd
                : c[letter] == 'B' ? OpKind::Bwd
                : c[letter] == 'I' ? OpKind::Igrad
                                   : OpKind::Wgrad;
      op.stage = std::stoi(c.substr(0, letter));
      op.mb = std::stoi(c.substr(letter + 1));
      program.numStages = std::max(program.numStages, op.stage + 1);
      program.numMicrobatches = std::max(program.numMicrobatches, op.mb + 1);
      ops.push_back(op);
    }
    program.actors.push_back(std::move(ops));
  }
  program.numActors = static_cast<int32_t>(program.actors.size());
  if (program.numActors == 0 || program.numStages == 0)
    return "no computations found (expected cells like 0F1, 3I0, 2W5)";
  for (int32_t s = 0; s + 1 < program.numStages; ++s)
    program.edges.push_back({s, s + 1});
  return {};
}
