//===- Export.cpp - Timelines, text grids and PyTorch CSV -----------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Export.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

using namespace flexpipe::sched;

namespace {

std::string cell(const ProgOp &op) {
  return std::to_string(op.stage) + opLetter(op.kind) + std::to_string(op.mb);
}

} // namespace

Timeline flexpipe::sched::unitTimeline(const Program &program) {
  return replayTimeline(program, [](const ProgOp &op) {
    return isCompute(op.kind) || op.kind == OpKind::Exec ? 1.0 : 0.0;
  });
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

Timeline flexpipe::sched::replayTimeline(
    const Program &p, const std::function<double(const ProgOp &)> &duration) {
  Timeline t;
  const int32_t n = p.numActors;
  t.start.resize(n);
  t.end.resize(n);
  for (int32_t a = 0; a < n; ++a) {
    t.start[a].assign(p.actors[a].size(), 0);
    t.end[a].assign(p.actors[a].size(), 0);
  }
  // Messages: (sender, receiver, grad, sending stage, mb) -> send time. The
  // verifier has established matching, so a receive looks its message up by
  // the neighbouring stage on the peer.
  std::map<std::tuple<int32_t, int32_t, bool, int32_t, int32_t>, double> sentAt;
  std::vector<std::vector<int32_t>> preds(p.numStages), succs(p.numStages);
  for (auto [from, to] : p.edges) {
    succs[from].push_back(to);
    preds[to].push_back(from);
  }
  std::map<std::tuple<int, int32_t, int32_t>,
           std::vector<std::pair<int32_t, double>>>
      collective;
  std::vector<int32_t> pc(n, 0);
  std::vector<double> clock(n, 0);
  std::vector<double> tokenReady; // async receives: arrival time
  bool progress = true;
  while (progress) {
    progress = false;
    for (int32_t a = 0; a < n; ++a) {
      while (pc[a] < static_cast<int32_t>(p.actors[a].size())) {
        const int32_t i = pc[a];
        const ProgOp &op = p.actors[a][i];
        double start = clock[a], end = clock[a];
        bool blocked = false;
        switch (op.kind) {
        case OpKind::SendAct:
        case OpKind::SendGrad:
          // The message arrives `duration` after it is sent.
          sentAt[{a, op.peer, op.kind == OpKind::SendGrad, op.stage, op.mb}] =
              clock[a] + duration(op);
          break;
        case OpKind::RecvAct:
        case OpKind::RecvGrad: {
          const bool grad = op.kind == OpKind::RecvGrad;
          double arrival = -1;
          for (int32_t s : grad ? succs[op.stage] : preds[op.stage]) {
            auto it = sentAt.find({op.peer, a, grad, s, op.mb});
            if (it != sentAt.end()) {
              arrival = it->second;
              break;
            }
          }
          if (arrival < 0) {
            blocked = true;
            break;
          }
          if (op.token >= 0) {
            if (op.token >= static_cast<int32_t>(tokenReady.size()))
              tokenReady.resize(op.token + 1, 0);
            tokenReady[op.token] = arrival;
          } else {
            end = std::max(clock[a], arrival);
          }
          break;
        }
        case OpKind::Wait:
          if (op.token >= 0 && op.token < static_cast<int32_t>(tokenReady.size()))
            end = std::max(clock[a], tokenReady[op.token]);
          break;
        case OpKind::AllGather:
        case OpKind::Gather: {
          // Everyone leaves when the last member arrives.
          auto &arrived =
              collective[{static_cast<int>(op.kind), op.stage, op.mb}];
          if (std::none_of(arrived.begin(), arrived.end(),
                           [&](const auto &x) { return x.first == a; }))
            arrived.push_back({a, clock[a]});
          if (arrived.size() < p.groups[op.group].size()) {
            blocked = true;
            break;
          }
          for (const auto &[member, time] : arrived)
            end = std::max(end, time);
          break;
        }
        default: // computations and registered instructions
          end = start + duration(op);
          break;
        }
        if (blocked)
          break;
        t.start[a][i] = start;
        t.end[a][i] = end;
        clock[a] = end;
        ++pc[a];
        progress = true;
      }
    }
  }
  for (int32_t a = 0; a < n; ++a)
    if (pc[a] < static_cast<int32_t>(p.actors[a].size()))
      return t;
  for (int32_t a = 0; a < n; ++a)
    t.makespan = std::max(t.makespan, clock[a]);
  t.ok = true;
  return t;
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
