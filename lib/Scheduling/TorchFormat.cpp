//===- TorchFormat.cpp - PyTorch's pipeline schedule CSV ------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/TorchFormat.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

using namespace flexpipe::sched;

namespace {

/// Whether `op` is the computation that needs what receive `recv` brings.
bool consumes(const ProgOp &op, const ProgOp &recv) {
  if (op.stage != recv.stage || op.mb != recv.mb)
    return false;
  return recv.kind == OpKind::RecvAct ? op.kind == OpKind::Fwd
                                      : makesInputGradient(op.kind);
}

/// A blocking receive with anything but receives between it and the
/// computation that needs it becomes asynchronous: a token, and a wait right
/// before that computation. The one rule for where imported and reordered
/// receives are waited.
void attachWaits(std::vector<ProgOp> &ops, int32_t &nextToken) {
  std::multimap<size_t, int32_t> waitsBefore; // consumer index -> token
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!isReceive(ops[i].kind) || ops[i].token >= 0)
      continue;
    bool adjacent = true;
    for (size_t j = i + 1; j < ops.size(); ++j) {
      if (consumes(ops[j], ops[i])) {
        if (!adjacent) {
          ops[i].token = nextToken++;
          waitsBefore.emplace(j, ops[i].token);
        }
        break;
      }
      adjacent = adjacent && isReceive(ops[j].kind);
    }
  }
  if (waitsBefore.empty())
    return;
  std::vector<ProgOp> out;
  out.reserve(ops.size() + waitsBefore.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    auto [from, to] = waitsBefore.equal_range(i);
    for (auto it = from; it != to; ++it)
      out.push_back(waitOp(it->second));
    out.push_back(ops[i]);
  }
  ops = std::move(out);
}

/// `<stage><TYPE><mb>`, or `<stage><TYPE>` for actions of a whole stage.
std::string action(int32_t stage, const char *type, int32_t mb = -1) {
  std::string s = std::to_string(stage) + type;
  if (mb >= 0)
    s += std::to_string(mb);
  return s;
}

} // namespace

llvm::Error
flexpipe::sched::checkTorchExpressible(const Program &p,
                                       std::pair<int32_t, int32_t> *at) {
  std::ostringstream os;
  auto fail = [&] { return llvm::createStringError(os.str()); };
  for (int32_t a = 0; a < p.numActors; ++a)
    for (const auto &[i, op] : llvm::enumerate(p.actors[a]))
      if (isCollective(op.kind) || op.kind == OpKind::Exec) {
        if (at)
          *at = {a, static_cast<int32_t>(i)};
        os << "actor " << a << " runs " << opKindName(op.kind);
        if (op.kind == OpKind::Exec && op.inst >= 0 &&
            op.inst < static_cast<int32_t>(p.instructions.size()))
          os << " '" << p.instructions[op.inst] << "'";
        os << " on stage " << op.stage
           << "; PyTorch's schedule format has no registered instructions or "
              "collectives";
        return fail();
      }
  if (!p.sharedStages.empty()) {
    os << "stage " << p.sharedStages.front()
       << " is shared by several actors (a vocabulary-parallel slice); "
          "PyTorch's schedule format runs each stage on one rank";
    return fail();
  }
  std::vector<int32_t> owner(p.numStages, -1);
  for (int32_t a = 0; a < p.numActors; ++a)
    for (const ProgOp &op : p.actors[a]) {
      if (!isCompute(op.kind) || op.stage < 0 || op.stage >= p.numStages)
        continue;
      if (owner[op.stage] >= 0 && owner[op.stage] != a) {
        os << "stage " << op.stage << " runs on actors " << owner[op.stage]
           << " and " << a
           << " (a replicated stage, as in bidirectional pipelines); "
              "PyTorch's schedule format places each stage on exactly one "
              "rank";
        return fail();
      }
      owner[op.stage] = a;
    }
  for (int32_t s = 0; s < p.numStages; ++s)
    if (owner[s] < 0) {
      os << "stage " << s << " runs on no actor; PyTorch needs every stage "
         << "placed";
      return fail();
    }
  // Row r is rank r: an actor without a computation would be a blank row,
  // an idle rank, which PyTorch cannot run (parseTorchCsv refuses it too).
  for (int32_t a = 0; a < p.numActors; ++a)
    if (llvm::none_of(p.actors[a],
                      [](const ProgOp &op) { return isCompute(op.kind); })) {
      os << "actor " << a
         << " computes nothing; PyTorch's schedule format has a rank per "
            "actor, each with a stage, and cannot run an idle one";
      return fail();
    }
  std::set<std::pair<int32_t, int32_t>> edges(p.edges.begin(), p.edges.end());
  for (auto [from, to] : edges)
    if (to != from + 1) {
      os << "stage " << from << " feeds stage " << to
         << "; PyTorch's schedule format runs one chain of stages 0 -> "
         << (p.numStages > 3    ? "1 -> ... -> "
             : p.numStages == 3 ? "1 -> "
                                : "")
         << p.numStages - 1;
      return fail();
    }
  for (int32_t s = 0; s + 1 < p.numStages; ++s)
    if (!edges.count({s, s + 1})) {
      // The next stage starts the module again: another direction of a
      // bidirectional one. A first stage of another module starts a tower.
      const bool second = s + 1 < static_cast<int32_t>(p.stageMeta.size()) &&
                          p.stageMeta[s + 1].first &&
                          p.stageMeta[s + 1].module == p.stageMeta[s].module;
      if (second) {
        os << "stage " << s + 1
           << " starts another pipeline of the model (replicated weights, as "
              "in bidirectional pipelines); PyTorch's schedule format runs "
              "one chain of stages, each on one rank";
        return fail();
      }
      os << "stage " << s << " does not feed stage " << s + 1
         << " (several pipelines or towers); PyTorch's schedule format runs "
            "one chain of stages";
      return fail();
    }
  return llvm::Error::success();
}

llvm::Error flexpipe::sched::orderTransfersPerPair(Program &program) {
  const int32_t n = program.numActors;
  // Receives by (receiver, sender, activation?, mb), in program order; a
  // send takes the first one left whose stage its stage feeds (activations)
  // or is fed by (gradients): the message each receive names.
  std::set<std::pair<int32_t, int32_t>> edges(program.edges.begin(),
                                              program.edges.end());
  using Key = std::tuple<int32_t, int32_t, bool, int32_t>;
  std::map<Key, std::vector<std::optional<ProgOp>>> receives;
  for (int32_t a = 0; a < n; ++a)
    for (ProgOp op : program.actors[a])
      if (isReceive(op.kind)) {
        op.token = -1;
        receives[{a, op.peer, op.kind == OpKind::RecvAct, op.mb}].push_back(op);
      }
  auto take = [&](int32_t from, const ProgOp &send) -> std::optional<ProgOp> {
    const bool act = send.kind == OpKind::SendAct;
    auto it = receives.find({send.peer, from, act, send.mb});
    if (it == receives.end())
      return std::nullopt;
    for (std::optional<ProgOp> &recv : it->second)
      if (recv && edges.count(act ? std::make_pair(send.stage, recv->stage)
                                  : std::make_pair(recv->stage, send.stage)))
        return std::exchange(recv, std::nullopt);
    return std::nullopt;
  };
  // Each actor's ops without its receives and their waits; per kept op, how
  // many receives it consumes, and for a send its receive.
  std::vector<std::vector<ProgOp>> rest(n);
  std::vector<std::vector<int32_t>> needs(n);
  std::vector<std::vector<std::optional<ProgOp>>> receiveOf(n);
  for (int32_t a = 0; a < n; ++a) {
    const std::vector<ProgOp> &ops = program.actors[a];
    std::set<int32_t> receiveTokens;
    for (const ProgOp &op : ops)
      if (isReceive(op.kind) && op.token >= 0)
        receiveTokens.insert(op.token);
    std::vector<ProgOp> pending; // receives not yet consumed
    for (const ProgOp &op : ops) {
      if (isReceive(op.kind)) {
        pending.push_back(op);
        continue;
      }
      if (op.kind == OpKind::Wait && receiveTokens.count(op.token))
        continue;
      int32_t consumed = 0;
      llvm::erase_if(pending, [&](const ProgOp &recv) {
        return consumes(op, recv) && ++consumed;
      });
      rest[a].push_back(op);
      needs[a].push_back(consumed);
      receiveOf[a].emplace_back();
      if (isSend(op.kind) && !(receiveOf[a].back() = take(a, op)))
        return llvm::createStringError(
            llvm::formatv("{0} stage {1} mb {2} on actor {3} has no receive "
                          "on actor {4}",
                          opKindName(op.kind), op.stage, op.mb, a, op.peer));
    }
  }
  // Lock-step rounds, actors in order: an actor runs its next computation
  // when the receives it needs are posted, with the sends after it; each
  // send posts its receive on the peer at once.
  std::vector<std::vector<ProgOp>> out(n);
  std::vector<size_t> next(n, 0);
  // Per actor, receives posted per (activation?, stage, mb).
  std::vector<std::map<std::tuple<bool, int32_t, int32_t>, int32_t>> posted(n);
  auto postedFor = [&](int32_t a, const ProgOp &op) {
    auto it = posted[a].find({op.kind == OpKind::Fwd, op.stage, op.mb});
    return it == posted[a].end() ? 0 : it->second;
  };
  for (bool left = true; left;) {
    left = false;
    bool progress = false;
    for (int32_t a = 0; a < n; ++a) {
      size_t &k = next[a];
      if (k == rest[a].size())
        continue;
      if (needs[a][k] > postedFor(a, rest[a][k])) {
        left = true;
        continue;
      }
      progress = true;
      do {
        out[a].push_back(rest[a][k]);
        if (const std::optional<ProgOp> &recv = receiveOf[a][k]) {
          const int32_t peer = rest[a][k].peer;
          out[peer].push_back(*recv);
          ++posted[peer]
                  [{recv->kind == OpKind::RecvAct, recv->stage, recv->mb}];
        }
        ++k;
      } while (k < rest[a].size() && !isCompute(rest[a][k].kind));
      left = left || k < rest[a].size();
    }
    if (left && !progress)
      return llvm::createStringError(
          "the programs cannot be ordered: every actor waits for a message "
          "no send brings");
  }
  int32_t nextToken = nextFreeToken(program);
  for (int32_t a = 0; a < n; ++a) {
    attachWaits(out[a], nextToken);
    program.actors[a] = std::move(out[a]);
  }
  return llvm::Error::success();
}

/// A byte a terminal would act on rather than show (tabs and carriage
/// returns are shown).
static bool isControlByte(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return (byte < 0x20 && c != '\t' && c != '\r') || byte == 0x7f;
}

static bool isUtf8(llvm::StringRef text) {
  const auto *begin = reinterpret_cast<const llvm::UTF8 *>(text.data());
  return llvm::isLegalUTF8String(&begin, begin + text.size());
}

bool flexpipe::sched::isTerminalSafe(llvm::StringRef text) {
  return isUtf8(text) && llvm::none_of(text, isControlByte);
}

llvm::Error flexpipe::sched::checkPairOrder(
    const Program &program, const std::vector<std::vector<int32_t>> *cells) {
  // Per (actor, peer), the transfers between them in program order: what
  // the message is (activation?, sending stage, mb), and the op.
  struct Transfer {
    std::tuple<bool, int32_t, int32_t> message;
    const ProgOp *op;
  };
  std::map<std::pair<int32_t, int32_t>, std::vector<Transfer>> seen;
  for (int32_t a = 0; a < program.numActors; ++a)
    for (const ProgOp &op : program.actors[a]) {
      if (!isTransfer(op.kind))
        continue;
      const bool activation =
          op.kind == OpKind::SendAct || op.kind == OpKind::RecvAct;
      // A receive names its own stage; the sender's is the neighbour.
      const int32_t sender =
          isSend(op.kind) ? op.stage : op.stage + (activation ? -1 : 1);
      seen[{a, op.peer}].push_back({{activation, sender, op.mb}, &op});
    }
  auto name = [](const Transfer *t) {
    return t ? std::string(opKindName(t->op->kind)) + " stage " +
                   std::to_string(t->op->stage) + " mb " +
                   std::to_string(t->op->mb)
             : std::string("none");
  };
  for (const auto &[pair, mine] : seen) {
    const auto [a, b] = pair;
    auto it = seen.find({b, a});
    const std::vector<Transfer> none;
    const std::vector<Transfer> &theirs = it == seen.end() ? none : it->second;
    for (size_t k = 0; k < std::max(mine.size(), theirs.size()); ++k) {
      const Transfer *x = k < mine.size() ? &mine[k] : nullptr;
      const Transfer *y = k < theirs.size() ? &theirs[k] : nullptr;
      if (x && y && x->message == y->message)
        continue;
      std::ostringstream os;
      os << "transfer " << k + 1 << " between actors " << a << " and " << b
         << " is " << name(x) << " on actor " << a << " but " << name(y)
         << " on actor " << b
         << "; PyTorch's NCCL point-to-point runs a pair's transfers on one "
            "stream in the order posted, so both sides must post them in "
            "one order";
      // At the first side's cell (the other's when it has none).
      const int32_t actor = x ? a : b;
      const ProgOp *op = (x ? x : y)->op;
      const size_t index = op - program.actors[actor].data();
      if (cells && actor < static_cast<int32_t>(cells->size()) &&
          index < (*cells)[actor].size() && (*cells)[actor][index] > 0)
        return llvm::make_error<TorchCsvError>(
            actor + 1, (*cells)[actor][index], os.str());
      return llvm::createStringError(os.str());
    }
  }
  return llvm::Error::success();
}

std::string flexpipe::sched::torchCsvLines(llvm::StringRef text) {
  std::string lines;
  lines.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] != '\r')
      lines += text[i];
    else if (i + 1 == text.size() || text[i + 1] != '\n')
      lines += '\n';
  return lines;
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
      for (; clock + 0.5 < t.start[a][i]; clock += 1)
        os << (std::exchange(first, false) ? "" : ",");
      os << (std::exchange(first, false) ? "" : ",") << actionName(op);
      clock = t.end[a][i];
    }
    os << '\n';
  }
  return os.str();
}

llvm::Expected<std::string>
flexpipe::sched::formatTorchCsvComms(const Program &program) {
  if (llvm::Error error = checkTorchExpressible(program))
    return std::move(error);
  Program p = program;
  if (llvm::Error error = orderTransfersPerPair(p))
    return std::move(error);
  if (std::optional<VerifyFailure> failure = verify(p, ChannelRule::PerPair))
    return llvm::createStringError(
        "the program does not run with untagged messages: " + failure->message);
  if (llvm::Error error = checkPairOrder(p))
    return std::move(error);

  std::ostringstream os;
  for (int32_t a = 0; a < p.numActors; ++a) {
    std::vector<std::string> cells;
    // Sends not yet waited: (activation?, stage, mb), in send order.
    std::vector<std::tuple<bool, int32_t, int32_t>> pending;
    std::vector<int32_t> backwards(p.numStages, 0), reduce;
    auto flushReductions = [&] {
      for (int32_t s : reduce) {
        cells.push_back(action(s, "REDUCE_GRAD"));
        cells.push_back(action(s, "WAIT_REDUCE_GRAD"));
      }
      reduce.clear();
    };
    for (const ProgOp &op : p.actors[a]) {
      if (op.kind == OpKind::Wait)
        continue; // PyTorch waits for a receive at the computation itself
      if (!isSend(op.kind))
        flushReductions(); // after the sends of the computation before
      cells.push_back(actionName(op));
      if (isSend(op.kind))
        pending.emplace_back(op.kind == OpKind::SendAct, op.stage, op.mb);
      if (makesInputGradient(op.kind)) {
        // The local backward of a sent activation proves that the peer has
        // posted its receive: the send's wait cannot stall here.
        auto it = std::find(pending.begin(), pending.end(),
                            std::make_tuple(true, op.stage, op.mb));
        if (it != pending.end()) {
          cells.push_back(action(op.stage, "WAIT_SEND_F", op.mb));
          pending.erase(it);
        }
      }
      if (endsBackward(op.kind) && ++backwards[op.stage] == p.numMicrobatches)
        reduce.push_back(op.stage);
    }
    flushReductions();
    for (auto [activation, stage, mb] : pending)
      cells.push_back(
          action(stage, activation ? "WAIT_SEND_F" : "WAIT_SEND_B", mb));
    for (size_t i = 0; i < cells.size(); ++i)
      os << (i ? "," : "") << cells[i];
    os << '\n';
  }
  return os.str();
}

namespace {

/// One parsed cell action.
struct Action {
  std::string type;
  int32_t stage = 0, mb = -1;
};

/// Parses `<stage><TYPE>[<mb>]`; returns false when `text` is not one.
bool parseAction(const std::string &text, Action &out) {
  static const char *const types[] = {"WAIT_REDUCE_GRAD",
                                      "WAIT_SEND_F",
                                      "WAIT_SEND_B",
                                      "REDUCE_GRAD",
                                      "UNSHARD",
                                      "RESHARD",
                                      "SEND_F",
                                      "RECV_F",
                                      "SEND_B",
                                      "RECV_B",
                                      "F",
                                      "I",
                                      "B",
                                      "W"};
  size_t digits = text.find_first_not_of("0123456789");
  if (digits == 0 || digits == std::string::npos || digits > 7)
    return false;
  for (const char *type : types) {
    const std::string t = type;
    if (text.compare(digits, t.size(), t) != 0)
      continue;
    const std::string mb = text.substr(digits + t.size());
    if (mb.size() > 7 ||
        mb.find_first_not_of("0123456789") != std::string::npos)
      return false;
    out.type = t;
    out.stage = std::stoi(text.substr(0, digits));
    out.mb = mb.empty() ? -1 : std::stoi(mb);
    return true;
  }
  return false;
}

/// The op an action's type stands for (opLetter), if any.
std::optional<OpKind> kindOfLetter(const std::string &type) {
  for (int k = 0; k <= static_cast<int>(OpKind::Wait); ++k)
    if (const char *letter = opLetter(static_cast<OpKind>(k));
        letter && type == letter)
      return static_cast<OpKind>(k);
  return std::nullopt;
}

/// One action of a PyTorch CSV and the cell it came from (1-based).
struct Located {
  Action action;
  int32_t line, column;
};

/// A cell's text for a message: quoted, cut after 21 characters, control
/// bytes escaped (\\XX), and every byte past ASCII where the text is not
/// UTF-8, so a binary file prints as text (UTF-8 stays).
std::string quoted(llvm::StringRef text) {
  const llvm::StringRef shown = text.size() > 24 ? text.take_front(21) : text;
  const bool utf8 = isUtf8(shown);
  std::string out = "'";
  for (const char c : shown) {
    const auto byte = static_cast<unsigned char>(c);
    if (isControlByte(c) || (byte >= 0x80 && !utf8)) {
      out += '\\';
      out += llvm::hexdigit(byte >> 4);
      out += llvm::hexdigit(byte & 15);
    } else {
      out += c;
    }
  }
  return out + (text.size() > 24 ? "...'" : "'");
}

/// What is wrong at a cell (1-based; 0: the whole line or file).
llvm::Error cellError(int32_t line, int32_t column, std::string what) {
  return llvm::make_error<TorchCsvError>(line, column, std::move(what));
}

/// One cell of a CSV line: its text without surrounding blanks and quotes
/// (a quoted cell may hold commas; "" is a quote), and its 1-based column.
struct Cell {
  std::string text;
  int32_t column;
};

/// The cells of `line`, line `lineNo` of a PyTorch CSV (which Python's csv
/// module writes and reads), or what is wrong at a column.
llvm::Error splitCells(const std::string &line, int32_t lineNo,
                       std::vector<Cell> &cells) {
  size_t i = 0;
  while (true) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    Cell cell{"", static_cast<int32_t>(i + 1)};
    if (i < line.size() && line[i] == '"') {
      const size_t open = i++;
      while (true) {
        if (i >= line.size())
          return cellError(lineNo, static_cast<int32_t>(open + 1),
                           "a quoted cell that does not end on its line");
        if (line[i] == '"' && (i + 1 >= line.size() || line[i + 1] != '"'))
          break;
        cell.text += line[i];
        i += line[i] == '"' ? 2 : 1;
      }
      ++i; // the closing quote
      cell.column = static_cast<int32_t>(open + 2);
    } else {
      while (i < line.size() && line[i] != ',')
        cell.text += line[i++];
    }
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    const llvm::StringRef kept = llvm::StringRef(cell.text).rtrim(" \t");
    cell.column += static_cast<int32_t>(kept.size() - kept.ltrim(" \t").size());
    cell.text = kept.ltrim(" \t").str();
    cells.push_back(std::move(cell));
    if (i >= line.size())
      return llvm::Error::success();
    if (line[i] != ',')
      return cellError(lineNo, static_cast<int32_t>(i + 1),
                       "text after a quoted cell; separate cells with commas");
    ++i;
  }
}

/// The actions of each row (rank) of a PyTorch CSV, in order; `anyComms`
/// tells whether any is a transfer or a wait (a compute_comms file). Row r
/// is rank r, so every row must hold an action (blank lines at the end
/// excepted).
llvm::Error readRows(const std::string &text,
                     std::vector<std::vector<Located>> &rows, bool &anyComms) {
  std::istringstream in(torchCsvLines(text));
  std::string line;
  std::vector<int32_t> rowLine; // the line of each row
  std::vector<bool> blankLine;  // whether it is empty or blanks only
  for (int32_t lineNo = 1; std::getline(in, line); ++lineNo) {
    if (lineNo == 1 && llvm::StringRef(line).starts_with("\xEF\xBB\xBF"))
      return cellError(1, 1,
                       "the file starts with a byte order mark (U+FEFF), "
                       "which PyTorch's CSV reader keeps in the first cell; "
                       "save the file without it");
    std::vector<Cell> cells;
    if (llvm::Error error = splitCells(line, lineNo, cells))
      return error;
    std::vector<Located> row;
    for (const Cell &cell : cells) {
      const std::string &c = cell.text;
      if (c.empty())
        continue; // an idle slot of the lock-step grid
      auto at = [&](std::string what) {
        return cellError(lineNo, cell.column, std::move(what));
      };
      std::vector<std::string> parts{c};
      const std::string overlap = ")OVERLAP_F_B";
      if (c.front() == '(') {
        // (a;b)OVERLAP_F_B: its sub-actions, in order.
        if (c.size() < overlap.size() + 1 ||
            c.compare(c.size() - overlap.size(), overlap.size(), overlap) != 0)
          return at(quoted(c) +
                    " is not a PyTorch action (a parenthesised group must "
                    "end in OVERLAP_F_B)");
        parts.clear();
        std::istringstream subs(c.substr(1, c.size() - overlap.size() - 1));
        for (std::string sub; std::getline(subs, sub, ';');)
          parts.push_back(sub);
        if (parts.empty())
          return at(quoted(c) + " groups no action");
      }
      for (const std::string &part : parts) {
        Action act;
        if (!parseAction(part, act))
          return at(quoted(part) +
                    " is not a PyTorch action (expected <stage><F|B|I|W|"
                    "SEND_F|RECV_F|SEND_B|RECV_B|WAIT_SEND_F|WAIT_SEND_B|"
                    "REDUCE_GRAD|WAIT_REDUCE_GRAD|UNSHARD|RESHARD>"
                    "<micro-batch>, numbers of at most 7 digits, e.g. 2F0)");
        const bool whole = act.type == "REDUCE_GRAD" ||
                           act.type == "WAIT_REDUCE_GRAD" ||
                           act.type == "UNSHARD" || act.type == "RESHARD";
        if (!whole && act.mb < 0)
          return at(quoted(part) + " names no micro-batch");
        // Transfers and waits are what PyTorch's comms lowering adds; a
        // compute_only file may hold REDUCE_GRAD, UNSHARD and RESHARD too.
        // A single rank's compute_comms file has waits and no transfers.
        anyComms |= act.type.rfind("SEND_", 0) == 0 ||
                    act.type.rfind("RECV_", 0) == 0 ||
                    act.type.rfind("WAIT_", 0) == 0;
        row.push_back({act, lineNo, cell.column});
      }
    }
    rows.push_back(std::move(row));
    rowLine.push_back(lineNo);
    blankLine.push_back(line.find_first_not_of(" \t") == std::string::npos);
  }
  // Row r is rank r: blank lines may end the file, but no rank is empty.
  while (!rows.empty() && rows.back().empty() && blankLine.back()) {
    rows.pop_back();
    blankLine.pop_back();
  }
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r].empty())
      return cellError(
          rowLine[r], 0,
          "rank " + std::to_string(r) + " has no action (" +
              (blankLine[r] ? "a blank line" : "a row of empty cells") +
              "); row r is rank r, and every rank of a PyTorch schedule "
              "runs a stage");
  return llvm::Error::success();
}

/// The program's sizes and where each stage runs: the rank of its
/// computations, one per stage.
llvm::Error placeStages(const std::vector<std::vector<Located>> &rows,
                        Program &program, std::vector<int32_t> &rankOf) {
  std::vector<int32_t> seenAt;
  const Located *highest = nullptr; // where the highest stage is computed
  for (int32_t r = 0; r < static_cast<int32_t>(rows.size()); ++r)
    for (const Located &l : rows[r]) {
      if (l.action.type.size() != 1)
        continue; // (other actions name stages rankOps checks)
      if (l.action.stage + 1 > program.numStages) {
        program.numStages = l.action.stage + 1;
        highest = &l;
      }
      program.numMicrobatches =
          std::max(program.numMicrobatches, l.action.mb + 1);
      if (static_cast<int32_t>(rankOf.size()) <= l.action.stage) {
        rankOf.resize(l.action.stage + 1, -1);
        seenAt.resize(l.action.stage + 1, 0);
      }
      int32_t &owner = rankOf[l.action.stage];
      if (owner >= 0 && owner != r)
        return cellError(l.line, l.column,
                         "stage " + std::to_string(l.action.stage) +
                             " also runs on rank " + std::to_string(owner) +
                             " (line " +
                             std::to_string(seenAt[l.action.stage]) +
                             "); PyTorch places each stage on one rank");
      owner = r;
      seenAt[l.action.stage] = l.line;
    }
  if (program.numStages == 0 || rankOf.empty())
    return cellError(
        0, 0, "no computations found (expected cells like 0F1, 3I0, 2W5)");
  rankOf.resize(program.numStages, -1);
  for (int32_t s = 0; s < program.numStages; ++s)
    if (rankOf[s] < 0)
      return cellError(
          highest->line, highest->column,
          "stage " + std::to_string(s) +
              " has no computation in the file, which computes stages up "
              "to " +
              std::to_string(program.numStages - 1) + " (here: " +
              action(highest->action.stage, highest->action.type.c_str(),
                     highest->action.mb) +
              ")");
  return llvm::Error::success();
}

/// Which waits a file writes (WAIT_SEND_F / WAIT_SEND_B, WAIT_REDUCE_GRAD):
/// one that writes them must write one for every send, every reduction (an
/// older compute_comms file, PyTorch's own, writes none).
struct FileWaits {
  bool sends = false, reductions = false;
};

/// Rank `r`'s computations and transfers in `ops`, each with its cell's
/// column in `source`; a send that a WAIT_SEND waits for is asynchronous
/// (a token from `nextToken`) and completed by a wait at that cell, which
/// returns once the peer has posted the receive (NCCL's rendezvous; the
/// verifier's rule for waits on sends).
llvm::Error rankOps(const std::vector<Located> &row, int32_t r,
                    const Program &program, const std::vector<int32_t> &rankOf,
                    FileWaits waits, std::vector<ProgOp> &ops,
                    int32_t &nextToken) {
  // Per stage, the column of its last backward (B or W) in the row; the
  // sends posted and not yet waited, as (type, stage, mb), with their op.
  std::vector<int32_t> lastBackward(program.numStages, 0);
  for (const Located &l : row)
    if ((l.action.type == "B" || l.action.type == "W") &&
        l.action.stage < program.numStages)
      lastBackward[l.action.stage] = l.column;
  std::map<std::tuple<std::string, int32_t, int32_t>,
           std::pair<size_t, const Located *>>
      unwaited; // (its op, its cell)
  // Per stage, its REDUCE_GRAD's cell while not waited for, and the stages
  // reduced: PyTorch 2.15 refuses a reduction started twice, a wait for
  // none, and a reduction or a send never waited for.
  std::map<int32_t, const Located *> reducing;
  std::set<int32_t> reduced;
  for (const Located &l : row) {
    // Which cell an op comes from, in `source` until the end.
    const Action &act = l.action;
    const std::string &t = act.type;
    // What is wrong with the action, at its cell.
    auto at = [&](const std::string &what) {
      return cellError(l.line, l.column,
                       action(act.stage, t.c_str(), act.mb) + what);
    };
    // Every action is of a stage this rank computes.
    if (act.stage >= program.numStages || rankOf[act.stage] != r)
      return at(" stands on rank " + std::to_string(r) + ", but stage " +
                std::to_string(act.stage) +
                (act.stage >= program.numStages
                     ? " is computed nowhere (the file computes stages 0 to " +
                           std::to_string(program.numStages - 1) + ")"
                     : " runs on rank " + std::to_string(rankOf[act.stage])));
    const std::optional<OpKind> kind = kindOfLetter(t);
    ProgOp op{kind.value_or(OpKind::Fwd), act.stage, act.mb};
    if (kind && isCompute(*kind)) {
      op.source = l.column;
      ops.push_back(op);
      continue;
    }
    if (t == "REDUCE_GRAD" && l.column < lastBackward[act.stage])
      return at(" comes before stage " + std::to_string(act.stage) +
                "'s last backward (column " +
                std::to_string(lastBackward[act.stage]) +
                "): PyTorch would reduce and scale gradients that are not "
                "complete");
    if (t == "REDUCE_GRAD") {
      if (!reduced.insert(act.stage).second)
        return at(" reduces stage " + std::to_string(act.stage) +
                  "'s gradients a second time (PyTorch refuses it; it would "
                  "scale them twice)");
      reducing[act.stage] = &l;
      continue;
    }
    if (t == "WAIT_REDUCE_GRAD") {
      if (!reducing.erase(act.stage))
        return at(" waits for a reduction of stage " +
                  std::to_string(act.stage) +
                  " that this rank has not started (a REDUCE_GRAD comes "
                  "first)");
      continue;
    }
    if (t == "WAIT_SEND_F" || t == "WAIT_SEND_B") {
      auto sent = unwaited.find({t.substr(5), act.stage, act.mb});
      if (sent == unwaited.end())
        return at(" waits for " + action(act.stage, t.c_str() + 5, act.mb) +
                  ", which this rank has not sent (or has waited for "
                  "already)");
      ops[sent->second.first].token = nextToken;
      ops.push_back(waitOp(nextToken++, l.column));
      unwaited.erase(sent);
      continue;
    }
    if (!kind)
      continue; // reductions, FSDP: no data order
    // The stage exchanged with: the next one for activations sent and
    // gradients received, the previous one otherwise.
    const int32_t neighbour =
        act.stage +
        (op.kind == OpKind::SendAct || op.kind == OpKind::RecvGrad ? 1 : -1);
    if (isSend(op.kind))
      unwaited[{t, act.stage, act.mb}] = {ops.size(), &l};
    if (neighbour < 0 || neighbour >= program.numStages)
      return at(" has no neighbouring stage " + std::to_string(neighbour) +
                " to exchange with");
    op.peer = rankOf[neighbour];
    if (op.peer == r)
      return at(" exchanges with its own rank (stages " +
                std::to_string(act.stage) + " and " +
                std::to_string(neighbour) +
                " share it, and PyTorch passes their data locally)");
    op.source = l.column;
    ops.push_back(op);
  }
  // What is left unwaited, at its cell.
  auto never = [&](const Located &l, const char *wait) {
    return cellError(
        l.line, l.column,
        action(l.action.stage, l.action.type.c_str(), l.action.mb) +
            " is never waited for (" + wait +
            "): PyTorch's runtime refuses such a rank");
  };
  if (waits.reductions && !reducing.empty())
    return never(*reducing.begin()->second, "WAIT_REDUCE_GRAD");
  if (waits.sends && !unwaited.empty()) {
    const Located *first = nullptr;
    for (const auto &[key, sent] : unwaited)
      if (!first || sent.second->column < first->column)
        first = sent.second;
    return never(*first, first->action.type == "SEND_F" ? "WAIT_SEND_F"
                                                        : "WAIT_SEND_B");
  }
  return llvm::Error::success();
}

} // namespace

char flexpipe::sched::TorchCsvError::ID = 0;

void flexpipe::sched::TorchCsvError::log(llvm::raw_ostream &os) const {
  if (line > 0)
    os << "line " << line << (column > 0 ? ", column " : "");
  if (column > 0)
    os << column;
  os << (line > 0 ? ": " : "") << what;
}

llvm::Error
flexpipe::sched::parseTorchCsv(const std::string &text, Program &program,
                               bool *comms,
                               std::vector<std::vector<int32_t>> *cells) {
  program = Program();
  std::vector<std::vector<Located>> rows;
  bool anyComms = false;
  std::vector<int32_t> rankOf;
  if (llvm::Error error = readRows(text, rows, anyComms))
    return error;
  if (llvm::Error error = placeStages(rows, program, rankOf))
    return error;
  program.numActors = static_cast<int32_t>(rows.size());
  program.actors.resize(program.numActors);
  for (int32_t s = 0; s + 1 < program.numStages; ++s)
    program.edges.push_back({s, s + 1});
  FileWaits waits;
  for (const std::vector<Located> &row : rows)
    for (const Located &l : row) {
      waits.sends |= l.action.type.rfind("WAIT_SEND_", 0) == 0;
      waits.reductions |= l.action.type == "WAIT_REDUCE_GRAD";
    }
  int32_t nextToken = 0;
  for (int32_t r = 0; r < program.numActors; ++r) {
    std::vector<ProgOp> &ops = program.actors[r];
    if (llvm::Error error =
            rankOps(rows[r], r, program, rankOf, waits, ops, nextToken))
      return error;
    if (anyComms)
      attachWaits(ops, nextToken);
    if (cells) {
      cells->emplace_back();
      for (ProgOp &op : ops)
        cells->back().push_back(std::max(0, op.source));
    }
    for (ProgOp &op : ops)
      op.source = -1;
  }
  if (comms)
    *comms = anyComms;
  return llvm::Error::success();
}
