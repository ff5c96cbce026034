//===- TorchFormatTest.cpp - PyTorch CSV export and import ----------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/TorchFormat.h"
#include "flexpipe/Scheduling/Simulator.h"

#include "TestSpecs.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>

using namespace flexpipe::sched;
using flexpipe::sched::test::computeProgram;
using flexpipe::sched::test::kBreadth;
using flexpipe::sched::test::kDepth;
using flexpipe::sched::test::makeProgram;
using flexpipe::sched::test::makeSpec;
using flexpipe::sched::test::oneF1BLimits;

namespace {

/// parseTorchCsv's error message, empty on success.
std::string parseError(const std::string &text, Program &program,
                       bool *comms = nullptr,
                       std::vector<std::vector<int32_t>> *cells = nullptr) {
  return llvm::toString(parseTorchCsv(text, program, comms, cells));
}

/// formatTorchCsvComms into `csv`: its error message, empty on success.
std::string writeComms(const Program &program, std::string &csv) {
  llvm::Expected<std::string> written = formatTorchCsvComms(program);
  if (!written)
    return llvm::toString(written.takeError());
  csv = std::move(*written);
  return {};
}

/// The programs of the V-shape and interleaved families and 1F1B at a size,
/// with their communication.
std::vector<std::pair<std::string, Program>> families(int32_t pp, int32_t m) {
  std::vector<std::pair<std::string, Program>> out;
  out.emplace_back(
      "1f1b",
      computeProgram(makeSpec(pp, m, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                              kBreadth, kBreadth, oneF1BLimits(pp))));
  out.emplace_back("vshape",
                   computeProgram(makeSpec(pp, m, PlacementKind::VShape, 2,
                                           Cttp::BwdFirst, kDepth, kDepth)));
  out.emplace_back("interleaved",
                   computeProgram(makeSpec(pp, m, PlacementKind::Circular, 2,
                                           Cttp::BwdFirst, kBreadth, kDepth)));
  for (auto &[name, program] : out)
    insertCommunication(program);
  return out;
}

/// Per actor, what each op is, tokens as "async" (numbering aside).
std::vector<std::string> shape(const Program &p) {
  std::vector<std::string> rows;
  for (const auto &ops : p.actors) {
    std::string row;
    for (const ProgOp &op : ops)
      row += std::string(opKindName(op.kind)) + ":" + std::to_string(op.stage) +
             ":" + std::to_string(op.mb) + ":" + std::to_string(op.peer) +
             (op.token >= 0 ? ":async " : " ");
    rows.push_back(row);
  }
  return rows;
}

/// `p` with every asynchronous send made blocking and its wait dropped
/// (what an imported WAIT_SEND adds); fails the test unless every send was
/// waited exactly once, after it.
Program withoutSendWaits(Program p) {
  for (auto &ops : p.actors) {
    std::map<int32_t, size_t> sendOf; // token -> index
    std::vector<ProgOp> kept;
    for (const ProgOp &op : ops) {
      if (isSend(op.kind)) {
        CHECK(op.token >= 0);
        sendOf[op.token] = kept.size();
      }
      if (op.kind == OpKind::Wait && sendOf.count(op.token)) {
        kept[sendOf[op.token]].token = -1;
        sendOf.erase(op.token);
        continue;
      }
      kept.push_back(op);
    }
    CHECK(sendOf.empty());
    ops = std::move(kept);
  }
  return p;
}

/// The computations of each actor, in order.
std::vector<std::string> computations(const Program &p) {
  std::vector<std::string> rows;
  for (const auto &ops : p.actors) {
    std::string row;
    for (const ProgOp &op : ops)
      if (isCompute(op.kind))
        row += actionName(op) + " ";
    rows.push_back(row);
  }
  return rows;
}

double unitMakespan(const Program &p) {
  Simulator sim;
  REQUIRE(llvm::toString(sim.prepare(p)) == "");
  return sim.run(unitCosts(p)).iterationTime;
}

} // namespace

TEST_CASE("compute_comms: waits, gradient reduction, exact rows", "[torch]") {
  Program p = families(2, 2)[0].second;
  std::string csv;
  REQUIRE(writeComms(p, csv).empty());
  // Rank 1 posts the receive of F1 when rank 0 sends it, before its own
  // SEND_B0: rank 0 posts SEND_F1 before RECV_B0, and on one NCCL stream
  // per pair the other order would leave each send waiting for the other.
  CHECK(csv == "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,"
               "0B1,0WAIT_SEND_F1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n"
               "1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,"
               "1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1WAIT_SEND_B0,1WAIT_SEND_B1\n");
  // FlexPipe's own order (receives right before their computations) has
  // rank 1 post SEND_B0 before RECV_F1.
  CHECK_THAT(llvm::toString(checkPairOrder(p)),
             Catch::Contains("transfer 2 between actors 0 and 1 is send_act "
                             "stage 0 mb 1 on actor 0 but send_grad stage 1 "
                             "mb 0 on actor 1"));
}

TEST_CASE("transfers come in one order on both sides of every pair",
          "[torch]") {
  int32_t disagreed = 0;
  for (int32_t pp : {2, 3, 4, 5, 7})
    for (int32_t m : {1, 2, pp, 2 * pp + 1, 3 * pp}) {
      for (auto [name, program] : families(pp, m)) {
        INFO(name << " pp=" << pp << " m=" << m);
        REQUIRE_FALSE(verify(program, ChannelRule::PerStage));
        disagreed += llvm::errorToBool(checkPairOrder(program));
        Program ordered = program;
        REQUIRE(llvm::toString(orderTransfersPerPair(ordered)) == "");
        // Each pair agrees; valid under both channel rules; the same
        // computations and timing; ordering again changes nothing.
        CHECK(llvm::toString(checkPairOrder(ordered)) == "");
        CHECK_FALSE(verify(ordered, ChannelRule::PerPair));
        CHECK_FALSE(verify(ordered, ChannelRule::PerStage));
        CHECK(computations(ordered) == computations(program));
        CHECK(unitMakespan(ordered) == unitMakespan(program));
        Program again = ordered;
        REQUIRE(llvm::toString(orderTransfersPerPair(again)) == "");
        CHECK(shape(again) == shape(ordered));
      }
    }
  // Receives right before their computations disagree (1F1B from m = 2).
  CHECK(disagreed > 0);
}

TEST_CASE("the pair rule finds a receive out of its peer's send order",
          "[torch]") {
  Program p = makeProgram(2, 2, 2, {{0, 1}});
  p.actors = {{{OpKind::Fwd, 0, 0},
               {OpKind::SendAct, 0, 0, 1},
               {OpKind::Fwd, 0, 1},
               {OpKind::SendAct, 0, 1, 1},
               {OpKind::RecvGrad, 0, 1, 1},
               {OpKind::Bwd, 0, 1},
               {OpKind::RecvGrad, 0, 0, 1},
               {OpKind::Bwd, 0, 0}},
              {{OpKind::RecvAct, 1, 0, 0},
               {OpKind::RecvAct, 1, 1, 0},
               {OpKind::Fwd, 1, 1},
               {OpKind::Bwd, 1, 1},
               {OpKind::SendGrad, 1, 1, 0},
               {OpKind::Fwd, 1, 0},
               {OpKind::Bwd, 1, 0},
               {OpKind::SendGrad, 1, 0, 0}}};
  CHECK_FALSE(verify(p, ChannelRule::PerStage));
  CHECK_FALSE(verify(p, ChannelRule::PerPair));
  // Swap the two activation receives: tags would still match them.
  std::swap(p.actors[1][0], p.actors[1][1]);
  auto stage = verify(p, ChannelRule::PerStage);
  REQUIRE(stage);
  auto pair = verify(p, ChannelRule::PerPair);
  REQUIRE(pair);
  CHECK_THAT(pair->message,
             Catch::Contains("recv_act stage 1 mb 1 from 0 on actor 1 would "
                             "receive the message of send_act stage 0 mb 0"));
  CHECK_THAT(pair->message, Catch::Contains("in the order of that peer's"));
}

TEST_CASE("export then import gives the same programs", "[torch]") {
  for (int32_t pp : {1, 2, 3, 4, 6}) // pp=1: no transfers, still compute_comms
    for (int32_t m : {1, 3, 2 * pp, 2 * pp + 3})
      for (auto [name, program] : families(pp, m)) {
        INFO(name << " pp=" << pp << " m=" << m);
        std::string csv;
        REQUIRE(writeComms(program, csv).empty());
        Program back;
        bool comms = false;
        REQUIRE(parseError(csv, back, &comms).empty());
        CHECK(comms);
        Program ordered = program;
        REQUIRE(llvm::toString(orderTransfersPerPair(ordered)) == "");
        CHECK(shape(withoutSendWaits(back)) == shape(ordered));
        // Each WAIT_SEND waits for a receive its peer posts without waiting
        // for this rank: the exported file cannot hang there.
        CHECK_FALSE(verify(back, ChannelRule::PerPair));
        // And again: a fixed point.
        std::string again;
        REQUIRE(writeComms(back, again).empty());
        CHECK(again == csv);

        // compute_only: the computations; PyTorch adds the transfers.
        Program only;
        REQUIRE(parseError(formatTorchCsv(program, unitTimeline(program)), only,
                           &comms)
                    .empty());
        CHECK_FALSE(comms);
        CHECK(computations(only) == computations(program));
      }
}

TEST_CASE("what PyTorch cannot express is refused", "[torch]") {
  // Bidirectional: a second pipeline of the same model.
  Program bi = computeProgram(makeSpec(4, 8, PlacementKind::OneToOne, 1,
                                       Cttp::BwdFirst, kBreadth, kBreadth, {},
                                       /*bidirectional=*/true));
  CHECK_THAT(llvm::toString(checkTorchExpressible(bi)),
             Catch::Contains("stage 3 does not feed "
                             "stage 4") ||
                 Catch::Contains("another pipeline"));
  std::string csv;
  CHECK_FALSE(writeComms(bi, csv).empty());
  CHECK(csv.empty());

  Program p = families(2, 2)[0].second;
  Program replicated = p;
  replicated.actors[1].push_back({OpKind::Fwd, 0, 0});
  CHECK_THAT(llvm::toString(checkTorchExpressible(replicated)),
             Catch::Contains("stage 0 runs on actors 0 and 1"));
  Program shared = p;
  shared.sharedStages = {1};
  CHECK_THAT(llvm::toString(checkTorchExpressible(shared)),
             Catch::Contains("vocabulary-parallel"));
  Program exec = p;
  exec.instructions = {"sync"};
  ProgOp op{OpKind::Exec, 1, 0};
  op.inst = 0;
  exec.actors[1].push_back(op);
  CHECK_THAT(llvm::toString(checkTorchExpressible(exec)),
             Catch::Contains("actor 1 runs exec 'sync' on stage 1"));
  Program dag = p;
  dag.edges = {{0, 1}, {1, 0}};
  CHECK_THAT(llvm::toString(checkTorchExpressible(dag)),
             Catch::Contains("stage 1 feeds stage 0"));
}

TEST_CASE("the reader names the line and column of what it rejects",
          "[torch]") {
  Program p;
  CHECK(parseError("0F0,0X1\n", p) ==
        std::string("line 1, column 5: '0X1' is not a PyTorch action "
                    "(expected <stage><F|B|I|W|SEND_F|RECV_F|SEND_B|RECV_B|"
                    "WAIT_SEND_F|WAIT_SEND_B|REDUCE_GRAD|WAIT_REDUCE_GRAD|"
                    "UNSHARD|RESHARD><micro-batch>, numbers of at most 7 "
                    "digits, e.g. 2F0)"));
  CHECK_THAT(
      parseError("0F0,1F0\n1F1\n", p),
      Catch::StartsWith("line 2, column 1: stage 1 also runs on rank 0"));
  CHECK_THAT(parseError("0F\n", p), Catch::Contains("names no micro-batch"));
  CHECK_THAT(parseError("0F0,0SEND_F0\n", p),
             Catch::Contains("0SEND_F0 has no neighbouring stage 1"));
  CHECK_THAT(parseError("\n \n", p), Catch::Contains("no computations"));
  // Row r is rank r (as PyTorch's _load_csv reads it): an empty row before
  // the last rank is an error, blank lines after it are not.
  CHECK(parseError(",,\n", p) ==
        "line 1: rank 0 has no action (a row of empty cells); row r is rank "
        "r, and every rank of a PyTorch schedule runs a stage");
  CHECK_THAT(parseError("\n0F0,0B0\n", p),
             Catch::StartsWith("line 1: rank 0 has no action (a blank line)"));
  CHECK_THAT(parseError("0F0,0F1,0B0,0B1\n,1F0,1B0,1F1,1B1\n,,,\n", p),
             Catch::StartsWith("line 3: rank 2 has no action"));
  CHECK(parseError("0F0,0B0\n\n\n", p).empty());
  // Lines end as Python's csv module ends them: LF, CRLF or a lone CR (a
  // lone CR ran two rows into one cell).
  for (const char *text : {"0F0,0F1,0B0,0B1\r1F0,1B0,1F1,1B1\r",
                           "0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n"}) {
    INFO(text);
    CHECK(parseError(text, p).empty());
    CHECK(p.numActors == 2);
  }
  CHECK_THAT(parseError("0F0,0F1,0B0,0B1\r1F0,1X0\r", p),
             Catch::StartsWith("line 2, column 5: '1X0'"));
  // Cells as Python's csv module writes them: quoted (commas inside), with
  // blanks around; an unterminated quote or an empty group is an error.
  CHECK(parseError("\"0F0\", 0B0 \n", p).empty());
  CHECK(parseError("\"0F0,0B0\n", p) ==
        "line 1, column 1: a quoted cell that does not end on its line");
  CHECK(parseError("\"0F0\"x,0B0\n", p) ==
        "line 1, column 6: text after a quoted cell; separate cells with "
        "commas");
  CHECK(parseError("()OVERLAP_F_B,0F0,0B0\n", p) ==
        "line 1, column 1: '()OVERLAP_F_B' groups no action");
  CHECK_THAT(parseError("0F0\n2F0\n", p),
             Catch::Contains("stage 1 has no computation in the file"));
  // Whole-stage actions and overlapped pairs read as PyTorch runs them.
  bool comms = true;
  std::vector<std::vector<int32_t>> cells;
  REQUIRE(parseError("0F0,(0F1;0B0)OVERLAP_F_B,0B1,0REDUCE_GRAD\n", p, &comms,
                     &cells)
              .empty());
  CHECK_FALSE(comms);
  CHECK(computations(p) == std::vector<std::string>{"0F0 0F1 0B0 0B1 "});
  CHECK(cells == std::vector<std::vector<int32_t>>{{1, 5, 5, 26}});
}

TEST_CASE("PyTorch's own orders import and verify", "[torch]") {
  for (const char *name : {"1F1B", "GPipe", "Interleaved1F1B_v2", "ZBV_v2",
                           "DualPipeV_v2", "Interleaved1F1B_v2_comms"}) {
    INFO(name);
    std::ifstream in(std::string(FLEXPIPE_TEST_DATA_DIR) +
                     "/peer-orders/pp4_mb8_" + name + ".csv");
    REQUIRE(in.good());
    std::stringstream text;
    text << in.rdbuf();
    Program p;
    bool comms = false;
    REQUIRE(parseError(text.str(), p, &comms).empty());
    if (!comms)
      insertCommunication(p);
    CHECK_FALSE(
        verify(p, comms ? ChannelRule::PerPair : ChannelRule::PerStage));
  }
}
