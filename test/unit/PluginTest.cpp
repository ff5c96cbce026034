//===- PluginTest.cpp - Plugin registry, loader and example hooks ---------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"
#include "flexpipe/Scheduling/Tuner.h"

#include "TestSpecs.h"

#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <vector>

using namespace flexpipe;
using namespace flexpipe::sched;
using flexpipe::plugin::InflightQuery;
using flexpipe::plugin::Registry;
using flexpipe::sched::test::makeSpec;
using flexpipe::sched::test::oneF1BLimits;

namespace {

const std::string kExample = FLEXPIPE_EXAMPLE_PLUGIN;
std::string testPlugin(const std::string &name) {
  return std::string(FLEXPIPE_TEST_PLUGIN_DIR) + "/FlexPipeTest" + name + ".so";
}

bool yes(const StepView &, const ReadyItem &) { return true; }
bool no(const StepView &, const ReadyItem &) { return false; }
int first(const StepView &, const std::vector<ReadyItem> &ready) {
  return ready.empty() ? -1 : 0;
}
int64_t one(const InflightQuery &) { return 1; }

/// Each actor's computations as "<stage><F|B|I|W><mb>".
std::vector<std::vector<std::string>> rowsOf(const Problem &problem,
                                             const ScheduleResult &result) {
  std::vector<std::vector<std::string>> rows;
  for (const auto &items : result.actors) {
    rows.emplace_back();
    for (const ScheduledItem &item : items)
      rows.back().push_back(std::to_string(problem.parts[item.part].stage) +
                            "FBIW"[static_cast<int>(item.kind)] +
                            std::to_string(item.mb));
  }
  return rows;
}

using Rows = std::vector<std::vector<std::string>>;

/// Schedules one one-to-one module of 4 actors and `m` micro-batches,
/// backward first, with the given per-actor limits (none when empty), after
/// `adjust` has had its way with the problem.
Rows scheduleOneToOne(int32_t m, std::vector<int64_t> limits,
                      const std::function<void(Problem &)> &adjust = nullptr,
                      TimeModel model = TimeModel::Step, bool split = false) {
  PipelineSpec spec = makeSpec(4, m, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                               {}, {}, std::move(limits));
  spec.splitBackward = split;
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  if (adjust)
    adjust(built->problem);
  ScheduleResult result = schedule(built->problem, model);
  INFO(result.error);
  REQUIRE(result.ok);
  return rowsOf(built->problem, result);
}

Rows schedule4x8(std::vector<int64_t> limits,
                 const std::function<void(Problem &)> &adjust = nullptr,
                 TimeModel model = TimeModel::Step, bool split = false) {
  return scheduleOneToOne(8, std::move(limits), adjust, model, split);
}

/// 1F1B on 4 actors with 8 micro-batches (README.md, schedules/1f1b.mlir).
const Rows kOneFOneB = {
    {"0F0", "0F1", "0F2", "0F3", "0B0", "0F4", "0B1", "0F5", "0B2", "0F6",
     "0B3", "0F7", "0B4", "0B5", "0B6", "0B7"},
    {"1F0", "1F1", "1F2", "1B0", "1F3", "1B1", "1F4", "1B2", "1F5", "1B3",
     "1F6", "1B4", "1F7", "1B5", "1B6", "1B7"},
    {"2F0", "2F1", "2B0", "2F2", "2B1", "2F3", "2B2", "2F4", "2B3", "2F5",
     "2B4", "2F6", "2B5", "2F7", "2B6", "2B7"},
    {"3F0", "3B0", "3F1", "3B1", "3F2", "3B2", "3F3", "3B3", "3F4", "3B4",
     "3F5", "3B5", "3F6", "3B6", "3F7", "3B7"},
};

} // namespace

TEST_CASE("the registry records hooks by name, one kind at a time",
          "[plugin]") {
  Registry r;
  CHECK(r.addCheck("no", no));
  CHECK(r.addPriority("no", first)); // another kind: no clash
  CHECK(r.addInflightRule("x.y-z_9", one));
  CHECK(r.error.empty());

  REQUIRE(r.check("no") != nullptr);
  CHECK_FALSE((*r.check("no"))(StepView(), ReadyItem()));
  CHECK(r.check("yes") == nullptr);
  CHECK(r.priority("no") != nullptr);
  CHECK(r.inflightRule("no") == nullptr);
  REQUIRE(r.inflightRule("x.y-z_9") != nullptr);
  CHECK((*r.inflightRule("x.y-z_9"))(InflightQuery()) == 1);

  CHECK(r.addCheck("_a", yes));
  CHECK(r.names("check") == std::vector<std::string>{"_a", "no"});
  CHECK(r.names("priority") == std::vector<std::string>{"no"});
  CHECK(r.names("inflight rule") == std::vector<std::string>{"x.y-z_9"});
  CHECK(r.names("rule").empty());
  CHECK(r.owner("check", "no").empty()); // the program registered it
}

TEST_CASE("a second hook of a name is refused and the first stays",
          "[plugin]") {
  Registry r;
  REQUIRE(r.addCheck("veto", no));
  CHECK_FALSE(r.addCheck("veto", yes));
  CHECK(r.error == "check 'veto' is already registered by the program itself");
  CHECK_FALSE((*r.check("veto"))(StepView(), ReadyItem()));

  // Only the first error is kept.
  CHECK_FALSE(r.addPriority("9lives", first));
  CHECK(r.error == "check 'veto' is already registered by the program itself");
}

TEST_CASE("invalid names and empty functions are refused", "[plugin]") {
  for (const char *name : {"", "1f1b", "has space", "a/b", "-x", ".x", "é"}) {
    Registry r;
    INFO("name '" << name << "'");
    CHECK_FALSE(r.addPriority(name, first));
    CHECK(r.error == "priority '" + std::string(name) +
                         "' has an invalid name: names match "
                         "[A-Za-z_][A-Za-z0-9_.-]*");
    CHECK(r.names("priority").empty());
  }
  for (const char *name : {"a", "_", "A.b-c_1", "x9"}) {
    Registry r;
    CHECK(r.addPriority(name, first));
  }
  Registry r;
  CHECK_FALSE(r.addInflightRule("nothing", nullptr));
  CHECK(r.error == "inflight rule 'nothing' is registered without a function");
  CHECK(r.inflightRule("nothing") == nullptr);
}

TEST_CASE("the example plugin loads and registers one hook of each kind",
          "[plugin]") {
  Registry r;
  REQUIRE(r.load(kExample) == "");
  CHECK(r.names("check") == std::vector<std::string>{"max_two_inflight"});
  CHECK(r.names("priority") == std::vector<std::string>{"one_f_one_b"});
  CHECK(r.names("inflight rule") ==
        std::vector<std::string>{"twice_the_stages_after"});
  CHECK(r.owner("priority", "one_f_one_b") == kExample);
  CHECK(r.currentPlugin.empty());
  CHECK(r.error.empty());

  // Another registry may load it too (the library is shared).
  Registry other;
  CHECK(other.load(kExample) == "");
  // The same registry may not.
  CHECK(r.load(kExample) == kExample + ": this plugin is already loaded");
}

TEST_CASE("load() names the file and says why it cannot be loaded",
          "[plugin]") {
  Registry r;
  const std::string missing = "/nonexistent/flexpipe/libNoSuchPlugin.so";
  const std::string error = r.load(missing);
  CHECK(llvm::StringRef(error).starts_with(missing + ": cannot load it: "));
  CHECK(llvm::StringRef(error).contains("No such file or directory"));

  CHECK(r.load(testPlugin("NotAPlugin")) ==
        testPlugin("NotAPlugin") +
            ": not a FlexPipe plugin: it does not export "
            "flexpipePluginApiVersion (FLEXPIPE_PLUGIN from flexpipe/Plugin.h "
            "defines both)");
  // A system library: neither entry point.
  CHECK(r.load("libm.so.6") ==
        "libm.so.6: not a FlexPipe plugin: it does not export "
        "flexpipePluginApiVersion and flexpipePluginRegister (FLEXPIPE_PLUGIN "
        "from flexpipe/Plugin.h defines both)");

  CHECK(r.load(testPlugin("WrongVersionPlugin")) ==
        testPlugin("WrongVersionPlugin") +
            ": it was built for plugin API version " +
            std::to_string(plugin::kPluginApiVersion + 1) +
            ", but this FlexPipe loads version " +
            std::to_string(plugin::kPluginApiVersion) +
            "; rebuild it against this FlexPipe's flexpipe/Plugin.h");
  // Its registration function never ran.
  CHECK(r.names("check").empty());
  CHECK(r.error.empty());
}

TEST_CASE("a plugin that fails to register leaves nothing behind", "[plugin]") {
  Registry r;
  // A bad name after a good one: both are gone.
  CHECK(r.load(testPlugin("BadNamePlugin")) ==
        testPlugin("BadNamePlugin") +
            ": priority '1f1b' has an invalid name: names match "
            "[A-Za-z_][A-Za-z0-9_.-]*");
  CHECK(r.inflightRule("good_rule") == nullptr);
  CHECK(r.names("priority").empty());

  // A clash with the example plugin, after a fresh name.
  REQUIRE(r.load(kExample) == "");
  CHECK(r.load(testPlugin("ClashPlugin")) ==
        testPlugin("ClashPlugin") +
            ": check 'max_two_inflight' is already registered by plugin " +
            kExample);
  CHECK(r.priority("clash_fresh") == nullptr);
  CHECK(r.owner("check", "max_two_inflight") == kExample);
  // The example's check, not the clashing one (which accepts everything):
  // it refuses a stage's forward on a full actor, not a vocabulary slice's.
  Problem problem;
  problem.parts.resize(2);
  problem.parts[1].countsInflight = false;
  StepView full;
  full.problem = &problem;
  full.inflight = 2;
  CHECK_FALSE(
      (*r.check("max_two_inflight"))(full, ReadyItem{CompKind::Fwd, 0, 0, 2}));
  CHECK((*r.check("max_two_inflight"))(full, ReadyItem{CompKind::Fwd, 1, 1, 2}));
  CHECK(r.currentPlugin.empty());
  CHECK(r.error.empty());

  // The clashing plugin is fine on its own, and a failed load may be retried
  // elsewhere.
  Registry alone;
  CHECK(alone.load(testPlugin("ClashPlugin")) == "");
  CHECK(alone.owner("priority", "clash_fresh") == testPlugin("ClashPlugin"));
}

TEST_CASE("one_f_one_b is 1F1B as a step function: no in-flight limit needed",
          "[plugin]") {
  Registry r;
  REQUIRE(r.load(kExample) == "");
  const PriorityFunction strict = *r.priority("one_f_one_b");
  auto useStrict = [&](Problem &p) { p.customPriorities.assign(4, strict); };

  // Without limits the built-in backward-first priority runs ahead ...
  const Rows unlimited = schedule4x8({});
  CHECK(unlimited[0] == std::vector<std::string>{"0F0", "0F1", "0F2", "0F3",
                                                 "0F4", "0F5", "0F6", "0B0",
                                                 "0F7", "0B1", "0B2", "0B3",
                                                 "0B4", "0B5", "0B6", "0B7"});
  // ... the plugin priority keeps each actor to 1F1B's order, in both time
  // models, exactly as the built-in one does with limits pp - a.
  CHECK(schedule4x8({}, useStrict) == kOneFOneB);
  CHECK(schedule4x8(oneF1BLimits(4)) == kOneFOneB);
  CHECK(schedule4x8({}, useStrict, TimeModel::Cost) == kOneFOneB);

  // Split backward: each input gradient is followed by its weight gradient.
  const Rows split = schedule4x8({}, useStrict, TimeModel::Step, true);
  CHECK(split[0] == std::vector<std::string>{"0F0", "0F1", "0F2", "0F3", "0I0",
                                             "0W0", "0F4", "0I1", "0W1", "0F5",
                                             "0I2", "0W2", "0F6", "0I3", "0W3",
                                             "0F7", "0I4", "0W4", "0I5", "0W5",
                                             "0I6", "0W6", "0I7", "0W7"});
  CHECK(split[3] == std::vector<std::string>{"3F0", "3I0", "3W0", "3F1", "3I1",
                                             "3W1", "3F2", "3I2", "3W2", "3F3",
                                             "3I3", "3W3", "3F4", "3I4", "3W4",
                                             "3F5", "3I5", "3W5", "3F6", "3I6",
                                             "3W6", "3F7", "3I7", "3W7"});
}

TEST_CASE("max_two_inflight caps every actor at two micro-batches",
          "[plugin]") {
  Registry r;
  REQUIRE(r.load(kExample) == "");
  const CheckFunction cap = *r.check("max_two_inflight");
  const Rows capped = schedule4x8(oneF1BLimits(4),
                                  [&](Problem &p) { p.checks.push_back(cap); });
  // The same as per-actor limits min(pp - a, 2) = 2, 2, 2, 1.
  CHECK(capped == schedule4x8({2, 2, 2, 1}));
  CHECK(capped != kOneFOneB);
  CHECK(capped[0] == std::vector<std::string>{"0F0", "0F1", "0B0", "0F2", "0B1",
                                              "0F3", "0B2", "0F4", "0B3", "0F5",
                                              "0B4", "0F6", "0B5", "0F7", "0B6",
                                              "0B7"});
  CHECK(capped[3] == kOneFOneB[3]); // actor 3 holds one anyway
}

TEST_CASE("twice_the_stages_after gives one-to-one actors twice 1F1B's "
          "warm-up",
          "[plugin]") {
  Registry r;
  REQUIRE(r.load(kExample) == "");
  const plugin::InflightRule rule = *r.inflightRule("twice_the_stages_after");
  std::vector<int64_t> limits;
  for (int64_t a = 0; a < 4; ++a)
    limits.push_back(rule({a, 4, 4, 12}));
  CHECK(limits == std::vector<int64_t>{8, 6, 4, 2});
  CHECK(rule({7, 4, 8, 8}) == 2); // per_stage, the last of 8 stages
  CHECK(rule({9, 4, 8, 8}) == 1); // never below 1

  // With the cost model's backward twice as long as a forward, actors 0 and
  // 1 would run 10 and 7 forwards before their first backward; the rule
  // stops them at 8 and 6.
  const Rows unlimited = scheduleOneToOne(12, {}, nullptr, TimeModel::Cost);
  CHECK(std::vector<std::string>(unlimited[0].begin(),
                                 unlimited[0].begin() + 11) ==
        std::vector<std::string>{"0F0", "0F1", "0F2", "0F3", "0F4", "0F5",
                                 "0F6", "0F7", "0F8", "0F9", "0B0"});
  const Rows doubled = scheduleOneToOne(12, limits, nullptr, TimeModel::Cost);
  CHECK(doubled[0] ==
        std::vector<std::string>{"0F0", "0F1",  "0F2", "0F3",  "0F4",  "0F5",
                                 "0F6", "0F7",  "0B0", "0F8",  "0B1",  "0F9",
                                 "0B2", "0F10", "0B3", "0F11", "0B4",  "0B5",
                                 "0B6", "0B7",  "0B8", "0B9",  "0B10", "0B11"});
  CHECK(doubled[1] ==
        std::vector<std::string>{"1F0", "1F1", "1F2", "1F3",  "1F4",  "1F5",
                                 "1B0", "1F6", "1B1", "1F7",  "1B2",  "1F8",
                                 "1B3", "1F9", "1B4", "1F10", "1B5",  "1F11",
                                 "1B6", "1B7", "1B8", "1B9",  "1B10", "1B11"});
  // Actors 2 and 3 are held by their dependencies before their limits.
  CHECK(doubled[2] == unlimited[2]);
  CHECK(doubled[3] == unlimited[3]);
}

namespace {

ModelConfig tinyModel() {
  ModelConfig model;
  model.name = "tiny-test";
  model.globalBatchSize = 8;
  ModuleModel m;
  m.name = "gpt";
  m.layers = 4;
  m.hidden = 256;
  m.heads = 4;
  m.seq = 128;
  m.vocab = 1000;
  model.modules.push_back(m);
  return model;
}


/// Each actor's ops as (kind, stage, micro-batch, peer).
std::vector<std::vector<std::tuple<int, int32_t, int32_t, int32_t>>>
opsOf(const Program &program) {
  std::vector<std::vector<std::tuple<int, int32_t, int32_t, int32_t>>> ops;
  for (const auto &actor : program.actors) {
    ops.emplace_back();
    for (const ProgOp &op : actor)
      ops.back().emplace_back(static_cast<int>(op.kind), op.stage, op.mb,
                              op.peer);
  }
  return ops;
}

} // namespace

TEST_CASE("the tuner adds candidates for plugin priorities and applies "
          "checks everywhere",
          "[plugin][tuner]") {
  Registry r;
  REQUIRE(r.load(kExample) == "");
  const ModelConfig model = tinyModel();
  const ClusterConfig c = test::testCluster(4);
  TuneOptions o;
  o.gpus = 4;
  o.pp = {4};
  o.mbs = {1};
  o.placements = {TunePlacement::OneToOne};
  o.vocabParallel = TuneOptions::Choice::Off;
  o.separation = TuneOptions::Choice::Off;
  llvm::Expected<TuneOptions> plain = resolveOptions(model, c, o);
  REQUIRE(static_cast<bool>(plain));
  llvm::Expected<std::vector<Candidate>> builtIn =
      enumerateCandidates(model, *plain);
  REQUIRE(static_cast<bool>(builtIn));
  // bwd_first and interleaved; one stage order (one stage per actor).
  CHECK(builtIn->size() == 2);

  o.priorities.push_back({"one_f_one_b", *r.priority("one_f_one_b")});
  llvm::Expected<TuneOptions> custom = resolveOptions(model, c, o);
  REQUIRE(static_cast<bool>(custom));
  llvm::Expected<std::vector<Candidate>> space =
      enumerateCandidates(model, *custom);
  REQUIRE(static_cast<bool>(space));
  REQUIRE(space->size() == 3);
  const Candidate &strict = space->back();
  CHECK(strict.priority == "one_f_one_b");
  CHECK(describe(strict) == "one_to_one, custom(one_f_one_b)");
  CHECK(std::vector<Candidate>(space->begin(), space->end() - 1) == *builtIn);

  // The plugin priority schedules the same program as the built-in 1F1B.
  EvaluationDetail viaPlugin, viaBuiltIn;
  const Evaluation e = evaluate(strict, model, c, *custom, &viaPlugin);
  INFO(e.error);
  REQUIRE(e.ok());
  const Evaluation base =
      evaluate(oneFOneB(4, 1, 1, 8, false), model, c, *custom, &viaBuiltIn);
  REQUIRE(base.ok());
  CHECK(opsOf(viaPlugin.program) == opsOf(viaBuiltIn.program));
  CHECK(e.pipelineTime == Approx(base.pipelineTime).epsilon(1e-12));

  llvm::Expected<TuneResult> tuned = tune(model, c, *custom);
  REQUIRE(static_cast<bool>(tuned));
  CHECK(tuned->candidates == 3);
  // It was scheduled, and runs the built-in 1F1B's schedule: one row for
  // both, the other set aside with its name.
  auto plugged = [](const Evaluation &x) {
    return x.candidate.priority == "one_f_one_b";
  };
  const auto ranked = llvm::find_if(tuned->ranked, plugged);
  const auto aside = llvm::find_if(tuned->rejected, plugged);
  REQUIRE((ranked != tuned->ranked.end() || aside != tuned->rejected.end()));
  if (aside != tuned->rejected.end()) {
    CHECK(aside->sameSchedule);
    CHECK(aside->error.rfind("the same schedule as rank 1 (one_to_one, "
                             "bwd_first",
                             0) == 0);
  }

  // A check that vetoes every forward leaves nothing schedulable, the
  // baseline included.
  o.checks.push_back({"never", no});
  llvm::Expected<TuneOptions> vetoed = resolveOptions(model, c, o);
  REQUIRE(static_cast<bool>(vetoed));
  const Evaluation stuck = evaluate(strict, model, c, *vetoed);
  CHECK(llvm::StringRef(stuck.error)
            .starts_with("cannot be scheduled: no actor can make progress"));
  // And says why: not memory (it said "no configuration fits in memory").
  std::string why;
  CHECK_FALSE(
      bestBaseline(model, c, *vetoed, false, nullptr, &why).has_value());
  CHECK_THAT(why, Catch::Contains("not scheduled (the first: cannot be "
                                  "scheduled: no actor can make progress"));
  CHECK_THAT(why, !Catch::Contains("memory"));
  // Only memory: said so.
  TuneOptions tight = *custom;
  tight.memoryLimit = 1;
  CHECK_FALSE(bestBaseline(model, c, tight, false, nullptr, &why).has_value());
  CHECK(why == "no configuration fits in memory");

  // Names must be unique and hooks complete.
  o.checks.push_back({"never", no});
  llvm::Expected<TuneOptions> twice = resolveOptions(model, c, o);
  REQUIRE_FALSE(static_cast<bool>(twice));
  CHECK(llvm::toString(twice.takeError()) == "check 'never' is given twice");
  o.checks.clear();
  o.priorities.push_back({"empty", nullptr});
  llvm::Expected<TuneOptions> empty = resolveOptions(model, c, o);
  REQUIRE_FALSE(static_cast<bool>(empty));
  CHECK(llvm::toString(empty.takeError()) ==
        "custom priority 2 needs a name and a function");
}

TEST_CASE("a plugin candidate's spec says custom(...) and names the checks",
          "[plugin][tuner]") {
  Candidate c;
  c.pp = 4;
  c.microbatches = 8;
  c.priority = "one_f_one_b";
  CHECK(specText(c, tinyModel(), "best", 200, {"max_two_inflight", "other"}) ==
        "flexpipe.pipeline @best actors(4) microbatches(8) {\n"
        "  flexpipe.module @gpt layers(4) placement(one_to_one)\n"
        "  flexpipe.priority custom(\"one_f_one_b\")\n"
        "  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>\n"
        "  flexpipe.check \"max_two_inflight\"\n"
        "  flexpipe.check \"other\"\n"
        "}\n");
}
