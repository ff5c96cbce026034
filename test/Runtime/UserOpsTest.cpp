//===- UserOpsTest.cpp - Runtime operations without a run -----------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The pieces of runtime operations that need no ranks: the table that
// FLEXPIPE_OPERATION fills, the decoding of the attributes the lowering
// encodes, the description's exec lines, and OpContext's accessors and
// failures (test/Runtime/userops.test).
//
//===----------------------------------------------------------------------===//

#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "flexpipe/Runtime/Schedule.h"
#include "flexpipe/Runtime/UserOps.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

using namespace flexpipe::rt;

namespace {

int calls = 0;

/// A host whose failures throw, so that tests can see them.
class ThrowingHost final : public OpContext::Host {
public:
  TensorView output(int64_t mb) override {
    if (mb != 1)
      return {};
    TensorView view;
    view.data = values;
    view.size = 3;
    view.shape = {1, 3};
    return view;
  }
  [[noreturn]] void fail(const std::string &message) override {
    throw std::runtime_error(message);
  }
  float values[3] = {1, 2, 3};
};

OpContext makeContext(ThrowingHost &host, const std::string &encoded) {
  std::map<std::string, OpAttribute> attributes;
  REQUIRE(decodeOpAttributes(encoded, attributes).empty());
  OpContext::Place place;
  place.name = "probe";
  place.rank = 3;
  place.ranks = 4;
  place.actor = 1;
  place.replica = 1;
  place.iteration = 2;
  place.stage = 5;
  place.microbatch = 0;
  place.numMicrobatches = 2;
  return OpContext(place, std::move(attributes), host);
}

std::string failure(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "(no failure)";
}

} // namespace

FLEXPIPE_OPERATION(counted)(OpContext &) { ++calls; }
FLEXPIPE_NAMED_OPERATION(throws, "test.throws")(OpContext &) {
  throw std::logic_error("boom");
}

TEST_CASE("FLEXPIPE_OPERATION registers by name before main") {
  const std::vector<std::string> names = registeredOperations();
  CHECK(std::find(names.begin(), names.end(), "counted") != names.end());
  CHECK(std::find(names.begin(), names.end(), "test.throws") != names.end());
  CHECK(findOperation("missing") == nullptr);
  OperationFn fn = findOperation("counted");
  REQUIRE(fn != nullptr);
  ThrowingHost host;
  OpContext context = makeContext(host, "");
  fn(context);
  CHECK(calls == 1);
  CHECK(registrationErrors().empty());
}

TEST_CASE("an exception that leaves an operation becomes a failure") {
  ThrowingHost host;
  OpContext context = makeContext(host, "");
  CHECK(failure([&] { findOperation("test.throws")(context); }) ==
        "operation @probe on stage 5 mb 0 (rank 3, iteration 2): threw an "
        "exception: boom");
}

TEST_CASE("attributes decode to their kinds and values") {
  std::map<std::string, OpAttribute> a;
  REQUIRE(decodeOpAttributes("count=i:-3 file=s:probe flag=u: off=b:false "
                             "on=b:true scale=f:0.25 "
                             "text=s:a%20b%22%25c%5Cd k%3Dy=s:v=w:x",
                             a) == "");
  REQUIRE(a.size() == 8);
  CHECK(a["count"].kind == OpAttribute::Kind::Integer);
  CHECK(a["count"].text == "-3");
  CHECK(a["file"].kind == OpAttribute::Kind::String);
  CHECK(a["flag"].kind == OpAttribute::Kind::Unit);
  CHECK(a["flag"].text.empty());
  CHECK(a["off"].kind == OpAttribute::Kind::Bool);
  CHECK(a["scale"].kind == OpAttribute::Kind::Float);
  CHECK(a["text"].text == "a b\"%c\\d");
  CHECK(a["k=y"].text == "v=w:x");
  CHECK(decodeOpAttributes("", a) == "");
  CHECK(a.empty());
}

TEST_CASE("malformed attributes are errors") {
  std::map<std::string, OpAttribute> a;
  CHECK(decodeOpAttributes("x", a) ==
        "malformed attribute 'x' (expected KEY=K:VALUE)");
  CHECK(decodeOpAttributes("x=s", a) ==
        "malformed attribute 'x=s' (expected KEY=K:VALUE)");
  CHECK(decodeOpAttributes("x=q:1", a) ==
        "attribute 'x' has the unknown kind 'q' (s, i, f, b or u)");
  CHECK(decodeOpAttributes("x=i:1.5", a) ==
        "attribute 'x' is not a 64-bit integer: '1.5'");
  CHECK(decodeOpAttributes("x=i:99999999999999999999", a) ==
        "attribute 'x' is not a 64-bit integer: '99999999999999999999'");
  CHECK(decodeOpAttributes("x=f:one", a) ==
        "attribute 'x' is not a float: 'one'");
  CHECK(decodeOpAttributes("x=b:yes", a) ==
        "attribute 'x' is not true or false: 'yes'");
  CHECK(decodeOpAttributes("x=u:1", a) == "unit attribute 'x' has a value");
  CHECK(decodeOpAttributes("x=s:%zz", a) ==
        "malformed escape in attribute 'x=s:%zz'");
  CHECK(decodeOpAttributes("x=s:%4", a) ==
        "malformed escape in attribute 'x=s:%4'");
  CHECK(decodeOpAttributes("=s:a", a) ==
        "malformed attribute '=s:a' (expected KEY=K:VALUE)");
  CHECK(decodeOpAttributes("x=s:a x=s:b", a) == "attribute 'x' is given twice");
}

TEST_CASE("typed accessors, fallbacks and their failures") {
  ThrowingHost host;
  OpContext ctx = makeContext(
      host, "count=i:-3 file=s:probe flag=u: on=b:true scale=f:0.25");
  CHECK(ctx.getName() == "probe");
  CHECK(ctx.getRank() == 3);
  CHECK(ctx.getNumRanks() == 4);
  CHECK(ctx.getActor() == 1);
  CHECK(ctx.getReplica() == 1);
  CHECK(ctx.getIteration() == 2);
  CHECK(ctx.getStage() == 5);
  CHECK(ctx.getNumMicrobatches() == 2);
  CHECK(ctx.getInt("count") == -3);
  CHECK(ctx.getFloat("count") == -3.0);
  CHECK(ctx.getFloat("scale") == 0.25);
  CHECK(ctx.getString("file") == "probe");
  CHECK(ctx.getBool("on"));
  CHECK(ctx.getBool("flag"));
  CHECK(ctx.getString("missing", "fallback") == "fallback");
  CHECK(ctx.getInt("missing", 7) == 7);
  CHECK(ctx.getFloat("missing", 1.5) == 1.5);
  CHECK_FALSE(ctx.getBool("missing", false));
  CHECK(ctx.hasAttribute("file"));
  CHECK_FALSE(ctx.hasAttribute("missing"));
  const std::string where =
      "operation @probe on stage 5 mb 0 (rank 3, iteration 2): ";
  CHECK(failure([&] { ctx.getString("missing"); }) ==
        where + "needs the string attribute 'missing' (attrs {missing = ...} "
                "on its flexpipe.instruction)");
  CHECK(failure([&] { ctx.getInt("file"); }) ==
        where + "attribute 'file' is a string, not an integer");
  CHECK(failure([&] { ctx.getString("count", "x"); }) ==
        where + "attribute 'count' is an integer, not a string");
  CHECK(failure([&] { ctx.getBool("scale"); }) ==
        where + "attribute 'scale' is a float, not a boolean");
  CHECK(failure([&] { ctx.getFloat("on"); }) ==
        where + "attribute 'on' is a boolean, not a float or an integer");
  CHECK(failure([&] { ctx.fail("custom"); }) == where + "custom");
}

TEST_CASE("outputs of the covered micro-batches only") {
  ThrowingHost host;
  OpContext ctx = makeContext(host, "");
  CHECK(ctx.getOutput().empty()); // micro-batch 0: not forwarded
  TensorView one = ctx.getOutput(1);
  REQUIRE(one.size == 3);
  CHECK(one.shape == std::vector<int64_t>{1, 3});
  float sum = 0;
  for (float x : one)
    sum += x;
  CHECK(sum == 6);
  CHECK(failure([&] { ctx.getOutput(2); }) ==
        "operation @probe on stage 5 mb 0 (rank 3, iteration 2): asks for the "
        "output of micro-batch 2, which the instance does not cover (it "
        "covers 0 to 1)");
}

TEST_CASE("the description's exec lines") {
  const std::string head = "flexpipe-schedule 1\nactors 2\nstages 2\n"
                           "microbatches 4\nstage 0 actor 0 blocks 0 4 "
                           "first_last 1 0\nstage 1 actor 1 blocks 4 4 "
                           "first_last 0 1\nedge 0 1\n";
  ScheduleDesc desc;
  REQUIRE(parseSchedule(head +
                            "exec probe stage 1 actor 1 mb 0 count 2 outputs "
                            "0,1 file=s:a%20b\n"
                            "exec probe stage 0 actor 0 mb 3 count 1 outputs "
                            "-\n",
                        desc) == "");
  REQUIRE(desc.execs.size() == 2);
  CHECK(desc.execs[0].name == "probe");
  CHECK(desc.execs[0].stage == 1);
  CHECK(desc.execs[0].actor == 1);
  CHECK(desc.execs[0].mb == 0);
  CHECK(desc.execs[0].count == 2);
  CHECK(desc.execs[0].outputs == std::vector<int64_t>{0, 1});
  CHECK(desc.execs[0].attrs == "file=s:a%20b");
  CHECK(desc.execs[1].outputs.empty());
  CHECK(desc.execs[1].attrs.empty());

  auto error = [&](const std::string &line) {
    ScheduleDesc d;
    return parseSchedule(head + line + "\n", d);
  };
  CHECK(error("exec probe stage 1 actor 1 mb 0 count 2") ==
        "schedule description line 8: expected 'exec NAME stage S actor A mb "
        "M count C outputs M0,M1,...|- [KEY=K:VALUE ...]'");
  CHECK(error("exec probe stage 1 actor 1 mb 0 count 0 outputs -") ==
        "schedule description line 8: exec probe: stage, actor and mb must "
        "not be negative, count at least 1");
  CHECK(error("exec probe stage 1 actor 1 mb 0 count 2 outputs 1,0") ==
        "schedule description line 8: exec probe: outputs '1,0' must be "
        "ascending micro-batches of the instance");
  CHECK(error("exec probe stage 1 actor 1 mb 0 count 2 outputs 2") ==
        "schedule description line 8: exec probe: outputs '2' must be "
        "ascending micro-batches of the instance");
  CHECK(error("exec probe stage 1 actor 1 mb 0 count 1 outputs - x=z:1") ==
        "schedule description line 8: exec probe: attribute 'x' has the "
        "unknown kind 'z' (s, i, f, b or u)");
  CHECK(error("exec probe stage 2 actor 1 mb 0 count 1 outputs -") ==
        "schedule description: exec probe stage 2 actor 1 mb 0 count 1 lies "
        "outside the schedule's stages, actors or micro-batches");
  CHECK(error("exec probe stage 1 actor 1 mb 3 count 2 outputs -") ==
        "schedule description: exec probe stage 1 actor 1 mb 3 count 2 lies "
        "outside the schedule's stages, actors or micro-batches");
}

// Last: registrations that are wrong are recorded, not fatal, and reported
// in the order they happened.
TEST_CASE("invalid and repeated registrations are reported") {
  registerOperation("counted", findOperation("counted"), "b.cpp", 5);
  registerOperation("9lives", findOperation("counted"), "c.cpp", 7);
  registerOperation("nofn", nullptr, "d.cpp", 9);
  const std::vector<std::string> errors = registrationErrors();
  REQUIRE(errors.size() == 3);
  CHECK(errors[0].rfind("operation @counted is registered twice, at ", 0) == 0);
  CHECK(errors[0].find("UserOpsTest.cpp:") != std::string::npos);
  CHECK(errors[0].find(" and at b.cpp:5") != std::string::npos);
  CHECK(errors[1] == "the operation registered at c.cpp:7 has the invalid "
                     "name '9lives'; names match [A-Za-z_][A-Za-z0-9_.-]*");
  CHECK(errors[2] == "operation @nofn is registered without a function at "
                     "d.cpp:9");
}
