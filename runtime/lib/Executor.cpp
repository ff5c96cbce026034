//===- Executor.cpp - The runtime behind Runtime.h ------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Runs one rank: its stages of the built-in model, the activations and
// gradients in flight per (stage, micro-batch), transfers through a Comm
// backend, the iteration loop with the data-parallel all-reduce and Adam.
// An activation is freed when the last instruction that needs it has run.
// Backend-neutral: tensors, stages and the optimizer belong to a Device
// (Device.h), so the CPU and the CUDA backend share this file.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "OutputFile.h"
#include "ParseNumber.h"
#include "flexpipe/Runtime/Runtime.h"

#include "flexpipe/Runtime/Comm.h"
#include "flexpipe/Runtime/Device.h"
#include "flexpipe/Runtime/Model.h"
#include "flexpipe/Runtime/Schedule.h"
#include "flexpipe/Runtime/UserOps.h"
#include "flexpipe/Support/Hash.h"
#include "flexpipe/Support/Layout.h"
#include "flexpipe/Support/StageGraph.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

using namespace flexpipe::rt;
using flexpipe::actorOfRank;
using flexpipe::deviceOf;
using flexpipe::rankOf;
using flexpipe::replicaOfRank;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int64_t iterations = 10;
  int threads = 1;
  float lr = 1e-3f;
  std::string losses, weights, profile, trace;
  /// --checkpoint DIR, --resume DIR (empty: none).
  std::string checkpoint, resume;
  /// --checkpoint-every N: also after every N-th iteration (0: at the end
  /// only).
  int64_t checkpointEvery = 0;
};

/// What is wrong when actor `program`'s executable runs as rank `rank` of a
/// schedule with `dp` replicas.
std::string startedAsWrongRank(int program, int rank, int dp) {
  auto text = [](int64_t n) { return std::to_string(n); };
  // Rank r runs actor r / dp (flexpipe::actorOfRank).
  const std::string ranks = dp == 1 ? "rank A"
                                    : "ranks A x " + text(dp) + " to A x " +
                                          text(dp) + " + " + text(dp - 1);
  return "this executable is actor " + text(program) + "'s program (rank" +
         text(program) + "), started as rank " + text(rank) + " (actor " +
         text(actorOfRank(rank, dp)) + "'s): start rankA as " + ranks +
         " (run-mpi.sh and run-slurm.sh do)";
}

/// `text` inside a JSON string: quotes, backslashes and control characters
/// escaped (a schedule's name may hold any of them).
std::string jsonString(const std::string &text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x",
                    static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

/// One instruction as it ran, for --trace.
struct Event {
  const char *kind;
  int stage, mb, peer;
  double start, end; // seconds since the run started
  /// A WAIT on an asynchronous transfer: the transfer's kind (RECV_F, ...),
  /// whose stage, micro-batch and peer the event carries.
  const char *of = nullptr;
};

/// The gradient buffers as the (data, size) parts that Comm packs into one
/// message or collective.
std::vector<Comm::Floats> floatsOf(const std::vector<GradientRef> &refs) {
  std::vector<Comm::Floats> parts;
  parts.reserve(refs.size());
  for (GradientRef g : refs)
    parts.push_back({g.data, g.size});
  return parts;
}

/// Parses the runtime's options; returns an error message or "".
std::string parseOptions(int argc, char **argv, Options &o) {
  static const char *const kValued[] = {
      "--iterations",       "--threads", "--lr",    "--losses",
      "--weights",          "--profile", "--trace", "--checkpoint",
      "--checkpoint-every", "--resume"};
  std::set<std::string> given;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    // The last of two values won without a word (--iterations 5 ...
    // --iterations 50 ran 50).
    if (std::find(std::begin(kValued), std::end(kValued), arg) !=
            std::end(kValued) &&
        !given.insert(arg).second)
      return arg + " is given twice; give it once";
    auto value = [&]() -> const char * {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    const char *v = nullptr;
    // An empty value would read as the option not given.
    if ((arg == "--checkpoint" || arg == "--resume") && i + 1 < argc &&
        !*argv[i + 1])
      return arg + " needs a directory";
    if ((arg == "--losses" || arg == "--weights" || arg == "--profile" ||
         arg == "--trace") &&
        i + 1 < argc && !*argv[i + 1])
      return arg + " needs a file name";
    int64_t number = 0;
    if (arg == "--iterations" && (v = value())) {
      if (!parseInteger(v, 1, kMaxIterations, o.iterations))
        return std::string("--iterations must be ") + kIterationsRule +
               ", got '" + v + "'";
    } else if (arg == "--threads" && (v = value())) {
      if (!parseInteger(v, 1, 1024, number))
        return "--threads must be an integer between 1 and 1024, got '" +
               std::string(v) + "'";
      o.threads = static_cast<int>(number);
    } else if (arg == "--lr" && (v = value())) {
      if (!parseLearningRate(v, o.lr))
        return std::string("--lr must be ") + kLearningRateRule + ", got '" +
               v + "'";
    } else if (arg == "--losses" && (v = value()))
      o.losses = v;
    else if (arg == "--weights" && (v = value()))
      o.weights = v;
    else if (arg == "--profile" && (v = value()))
      o.profile = v;
    else if (arg == "--trace" && (v = value()))
      o.trace = v;
    else if (arg == "--checkpoint" && (v = value()))
      o.checkpoint = v;
    else if (arg == "--checkpoint-every" && (v = value())) {
      if (!parseInteger(v, 1, kMaxIterations, o.checkpointEvery))
        return std::string("--checkpoint-every must be ") + kIterationsRule +
               ", got '" + v + "'";
    } else if (arg == "--resume" && (v = value()))
      o.resume = v;
    else if (arg == "--help")
      return "usage: RANK_PROGRAM [--iterations N] [--threads N] [--lr X] "
             "[--losses FILE] [--weights FILE] [--profile FILE] "
             "[--trace FILE] [--checkpoint DIR [--checkpoint-every N]] "
             "[--resume DIR]\n"
             "  --checkpoint DIR        save every rank's training state in "
             "DIR at the end\n"
             "  --checkpoint-every N    and after every N-th iteration\n"
             "  --resume DIR            continue from the newest checkpoint "
             "in DIR up to\n"
             "                          --iterations in all";
    else
      return "unknown or incomplete option '" + arg + "'";
  }
  if (o.iterations < 1)
    return "--iterations must be at least 1";
  if (!o.profile.empty() && o.iterations < 2)
    return "--profile needs at least 2 iterations: the first (a warm-up) is "
           "left out of the means";
  if (o.checkpointEvery > 0 && o.checkpoint.empty())
    return "--checkpoint-every needs --checkpoint DIR";
  if (o.threads < 1 || o.threads > 1024)
    return "--threads must be between 1 and 1024";
  return {};
}

} // namespace

/// One rank's state.
struct flexpipe_rt {
  ScheduleDesc desc;
  // Declared before everything that holds its buffers, so destroyed after.
  std::unique_ptr<Comm> comm;
  std::unique_ptr<Device> device;
  Options options;
  int actor = 0, replica = 0;
  int64_t iteration = 0;
  /// The first iteration this process runs (after --resume, the
  /// checkpoint's); profiles leave it out.
  int64_t firstIteration = 0;
  /// The iteration whose loss was not a number (inf or nan), where training
  /// stopped; -1 while it is.
  int64_t divergedAt = -1;
  float lossScale = 1;
  std::map<int, std::unique_ptr<DeviceStage>> stages;
  std::vector<std::vector<int>> preds, succs;

  // In flight, per (stage, micro-batch): the input activation and the
  // gradient of the output, one part per actor that sent or handed one over
  // (a stage after a vocabulary-parallel embedding, or before a
  // vocabulary-parallel head, sums several); the output and the input
  // gradient to send, with the number of sends still to come (one per other
  // actor of the neighbour stages).
  using Key = std::pair<int, int>;
  using Parts = std::vector<std::pair<int, BufferPtr>>; // (actor, part)
  struct Outgoing {
    BufferPtr buffer;
    int sends = 0;
    /// The transfers of the sends posted so far.
    std::vector<int64_t> handles;
    /// What it is, once every send is posted: (stage, micro-batch) and
    /// whether a gradient (releaseDelivered).
    Key key{-1, -1};
    bool gradient = false;
  };
  std::map<Key, Parts> input, outputGrad;
  std::map<Key, Outgoing> output, inputGrad;
  /// Buffers every send of which is posted: kept alive until those sends
  /// have completed (released as soon as the backend says so, at the
  /// latest at the iteration's waitAll). Kept to the end of the iteration,
  /// a rank held every message it sent: its peak grew by one message per
  /// micro-batch.
  std::vector<Outgoing> sending;
  void releaseSent() {
    sending.erase(std::remove_if(sending.begin(), sending.end(),
                                 [&](const Outgoing &sent) {
                                   for (int64_t handle : sent.handles)
                                     if (!comm->completed(handle))
                                       return false;
                                   return true;
                                 }),
                  sending.end());
  }
  /// token -> what completes it (the transfer's wait; an all-gather's waits
  /// and its use).
  std::map<int64_t, std::function<void()>> tokens;
  int64_t nextToken = 0;
  /// Between flexpipe_rt_group_start and _end: the blocking receives posted
  /// so far, which complete at the group's end.
  bool inGroup = false;
  std::vector<int64_t> groupReceives;
  /// Per all-gather stage on this actor (a vocabulary-parallel head, the sync
  /// stage of a two-tower model): its group (Comm::openGroups), the number of
  /// members, the stage whose statistics it exchanges and combines (the head
  /// itself; this actor's tower's last stage), and whether this member counts
  /// the loss.
  struct Gather {
    int group = -1, members = 0, stage = -1;
    bool countLoss = false;
  };
  std::map<int, Gather> gathers;
  /// (stage, micro-batch) forwarded but not yet combined with its group's
  /// all-gather: its backward cannot run yet.
  std::set<Key> awaitingGather;
  /// Runtime operations (flexpipe.exec): per (stage, micro-batch) of this
  /// actor, how many instances of an iteration read its output (the
  /// description's exec lines), how many of this iteration's are still to
  /// come, and a copy of the output kept for them from the forward on.
  std::map<Key, int> outputReaders, readersLeft;
  std::map<Key, BufferPtr> kept;

  // Profile: per stage and kind (fwd, bwd, igrad, wgrad) total seconds and
  // count, over iterations after the first.
  std::vector<double> busy, calls;
  /// Seconds and count of the optimizer steps after the first iteration.
  double stepSeconds = 0, steps = 0;
  /// The per-instruction overhead (the profile's instruction_s), over
  /// iterations after the first: the seconds the programs ran, the
  /// seconds of them spent waiting for messages and collectives, in
  /// registered operations or combining a head's gathered parts (the
  /// computations' are in `busy`), and the instructions they ran. Host
  /// time: an asynchronous device is not waited for (a wait on the device
  /// finishes in the next timed computation, as before).
  double programSeconds = 0, excludedSeconds = 0, instructions = 0;
  /// Seconds and count of the registered operations (the profile's exec_s).
  double execSeconds = 0, execs = 0;
  /// Counts one instruction of the program (an entry point the simulator
  /// times as one op).
  void instruction() {
    if (iteration > firstIteration)
      instructions += 1;
  }
  /// Runs `fn` and adds its host seconds to `seconds` after the first
  /// iteration.
  template <typename Fn> void hostTimed(double &seconds, Fn fn) {
    const Clock::time_point start = Clock::now();
    fn();
    if (iteration > firstIteration)
      seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
  /// Runs `fn`, which the per-instruction overhead leaves out (a wait, a
  /// registered operation, a head's combining).
  template <typename Fn> void excluded(Fn fn) {
    hostTimed(excludedSeconds, fn);
  }

  /// Peak bytes of activations and gradients alive on this rank: what the
  /// layers keep between forward and backward plus what is in flight.
  double peakBytes = 0;
  void measureMemory() {
    releaseSent();
    double bytes = 0;
    for (const auto &[s, stage] : stages)
      bytes += static_cast<double>(stage->cachedBytes());
    for (const auto *map : {&input, &outputGrad})
      for (const auto &[key, parts] : *map)
        for (const auto &[actor, buffer] : parts)
          bytes += buffer->bytes();
    for (const auto *map : {&output, &inputGrad})
      for (const auto &[key, outgoing] : *map)
        bytes += outgoing.buffer->bytes();
    for (const Outgoing &sent : sending)
      bytes += sent.buffer->bytes();
    for (const auto &[key, buffer] : kept)
      bytes += buffer->bytes();
    peakBytes = std::max(peakBytes, bytes);
  }

  // Trace: every instruction of every iteration, when --trace is given.
  bool tracing = false;
  /// Where each rank writes its part of the trace (tracePart): beside the
  /// trace, or, for a trace under /dev or /proc, in TMPDIR.
  std::string tracePrefix;
  /// An asynchronous device finishes each instruction before it is timed
  /// (with --profile or --trace).
  bool syncTimings = false;
  Clock::time_point epoch = Clock::now();
  std::vector<Event> events;
  /// Records `fn` as one instruction in the trace.
  template <typename Fn>
  void traced(const char *kind, int64_t s, int64_t mb, int64_t peer, Fn fn,
              const char *of = nullptr) {
    if (!tracing)
      return fn();
    const double start =
        std::chrono::duration<double>(Clock::now() - epoch).count();
    fn();
    if (syncTimings)
      device->synchronize();
    const double end =
        std::chrono::duration<double>(Clock::now() - epoch).count();
    events.push_back({kind, static_cast<int>(s), static_cast<int>(mb),
                      static_cast<int>(peer), start, end, of});
  }

  bool runs(int s) const { return desc.stage[s].part(actor) >= 0; }
  DeviceStage &stage(int64_t s) {
    auto it = stages.find(static_cast<int>(s));
    if (it == stages.end()) {
      // Most likely this executable is another actor's program: name it.
      std::string message = "stage " + std::to_string(s) +
                            " does not run on actor " + std::to_string(actor);
      if (s >= 0 && s < desc.stages && !desc.stage[s].shared())
        message += "; " + startedAsWrongRank(desc.stage[s].actor, comm->rank(),
                                             desc.dp);
      comm->abort(message, 1);
    }
    return *it->second;
  }
  /// The floats of an activation or gradient between stage `s` and its
  /// neighbours (one tower or the GPT).
  size_t messageSize(int s) const {
    const GptConfig &config = desc.config(s);
    return static_cast<size_t>(config.tokens() * config.hidden);
  }
  int senderStage(int stage, int peer, bool gradient) {
    for (int s : gradient ? succs[stage] : preds[stage])
      if (desc.stage[s].part(peer) >= 0)
        return s;
    comm->abort("stage " + std::to_string(stage) + " has no " +
                    (gradient ? "successor" : "predecessor") + " on actor " +
                    std::to_string(peer),
                1);
    std::abort(); // not reached: Comm::abort stops the process
  }
  /// The rank of actor `peer` in this rank's replica of the pipeline.
  int rankOf(int64_t peer) const {
    return static_cast<int>(flexpipe::rankOf(peer, replica, desc.dp));
  }
  /// Stage `s`'s data for micro-batch `mb`: the GPT's, or its tower's.
  Batch batch(int64_t s, int64_t mb) const {
    // Replica r trains on micro-batches [r m, (r + 1) m) of the iteration.
    const int64_t index =
        static_cast<int64_t>(replica) * desc.microbatches + mb;
    const int tower = desc.stage[s].tower;
    return tower >= 0
               ? makeTowerBatch(desc.towers[tower], tower, iteration, index)
               : makeBatch(desc.model, iteration, index);
  }
  /// Runs `fn`; after the first iteration adds its seconds to `seconds`
  /// and one to `count` (for --profile; an asynchronous device finishes it
  /// first when timings are synchronous).
  template <typename Fn> void timeInto(double &seconds, double &count, Fn fn) {
    hostTimed(seconds, [&] {
      fn();
      if (syncTimings)
        device->synchronize();
    });
    if (iteration > firstIteration)
      count += 1;
  }
  template <typename Fn> void timed(int64_t s, int kind, Fn fn) {
    timeInto(busy[s * 4 + kind], calls[s * 4 + kind], fn);
  }
  /// The optimizer step, timed apart from what the device still runs of
  /// the pipeline and the all-reduces.
  template <typename Fn> void timedStep(Fn fn) {
    if (syncTimings)
      device->synchronize();
    timeInto(stepSeconds, steps, fn);
  }
};

namespace {

/// What keeps the program's runtime operations from running: an invalid
/// registration, or an operation it runs that was not compiled in; "" when
/// nothing.
std::string missingOperation(const ScheduleDesc &d) {
  if (std::vector<std::string> errors = registrationErrors(); !errors.empty())
    return errors.front();
  for (const ScheduleDesc::Exec &exec : d.execs)
    if (!findOperation(exec.name))
      return "the program runs @" + exec.name +
             " but no operation of that name was compiled in; pass its "
             "source with flexpipe-compile --ops";
  return {};
}

/// Writes `path` through `write(FILE *)` (to a temporary renamed over it
/// once whole); a file that cannot be written stops every rank.
template <typename Write>
void writeFile(Comm &comm, const std::string &path, Write &&write) {
  OutputFile file(path);
  if (FILE *f = file.get())
    write(f);
  if (!file.commit())
    comm.abort(file.error(), 1);
}

/// The file rank `rank` writes its trace events to, for rank 0 to merge.
std::string tracePart(const flexpipe_rt &rt, int rank) {
  return rt.tracePrefix + ".rank" + std::to_string(rank);
}

/// Sets where the ranks write their parts (collective): beside the trace,
/// or, when the trace goes to /dev or /proc (/dev/null, /dev/stdout), in
/// TMPDIR under rank 0's process id, which every rank learns (the parts
/// went into /dev).
void setTracePrefix(flexpipe_rt &rt) {
  const std::string &trace = rt.options.trace;
  if (!OutputFile::isSystemPath(trace)) {
    rt.tracePrefix = trace;
    return;
  }
  double id = rt.comm->rank() == 0 ? static_cast<double>(::getpid()) : 0;
  rt.comm->allreduceSum(&id, 1);
  const char *tmp = std::getenv("TMPDIR");
  rt.tracePrefix = std::string(tmp && *tmp ? tmp : "/tmp") +
                   "/flexpipe-trace-" +
                   std::to_string(static_cast<long long>(id));
}

/// Every rank writes its events to its part (tracePart); rank 0 merges them
/// into one Chrome trace (one process per replica, one track per actor).
void writeTrace(flexpipe_rt &rt) {
  Comm &comm = *rt.comm;
  const std::string part = tracePart(rt, comm.rank());
  writeFile(comm, part, [&](FILE *f) {
    for (const Event &e : rt.events) {
      std::fprintf(f,
                   ",\n{\"name\": \"%s%s%s\", \"cat\": \"%s\", \"ph\": \"X\", "
                   "\"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                   "\"args\": {\"stage\": %d, \"mb\": %d, \"peer\": %d%s%s%s}}",
                   e.stage >= 0 ? std::to_string(e.stage).c_str() : "", e.kind,
                   e.mb >= 0 ? std::to_string(e.mb).c_str() : "", e.kind,
                   rt.replica, rt.actor, e.start * 1e6, (e.end - e.start) * 1e6,
                   e.stage, e.mb, e.peer, e.of ? ", \"of\": \"" : "",
                   e.of ? e.of : "", e.of ? "\"" : "");
    }
  });
  double done = 1;
  comm.allreduceSum(&done, 1); // every part is written
  if (comm.rank() != 0)
    return;
  writeFile(comm, rt.options.trace, [&](FILE *out) {
    std::fprintf(out,
                 "{\"displayTimeUnit\": \"ms\", \"otherData\": "
                 "{\"schedule\": \"%s\"}, \"traceEvents\": [",
                 jsonString(rt.desc.name).c_str());
    // One process per replica (each was named replica 0's).
    for (int replica = 0; replica < rt.desc.dp; ++replica)
      std::fprintf(out,
                   "%s\n{\"name\": \"process_name\", \"ph\": \"M\", "
                   "\"pid\": %d, \"args\": {\"name\": \"replica %d\"}}",
                   replica ? "," : "", replica, replica);
    for (int r = 0; r < comm.size(); ++r) {
      std::fprintf(out,
                   ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, "
                   "\"tid\": %d, \"args\": {\"name\": \"actor %d\"}}",
                   static_cast<int>(replicaOfRank(r, rt.desc.dp)),
                   static_cast<int>(actorOfRank(r, rt.desc.dp)),
                   static_cast<int>(actorOfRank(r, rt.desc.dp)));
      const std::string path = tracePart(rt, r);
      if (FILE *in = std::fopen(path.c_str(), "r")) {
        char buffer[1 << 16];
        size_t n;
        while ((n = std::fread(buffer, 1, sizeof(buffer), in)) > 0)
          std::fwrite(buffer, 1, n, out);
        std::fclose(in);
        std::remove(path.c_str());
      } else {
        // Each rank wrote its part beside the trace: on another machine
        // without a shared file system rank 0 cannot see it.
        std::fprintf(stderr,
                     "flexpipe: the trace lacks rank %d's events: cannot read "
                     "'%s' (%s; ranks on machines that share no file system "
                     "write their parts where rank 0 cannot read them)\n",
                     r, path.c_str(), std::strerror(errno));
      }
    }
    std::fprintf(out, "\n]}\n");
  });
}

/// --resume: every rank's file of the newest generation that all ranks have
/// whole, read and checked against this run (`identity`). Collective.
Checkpoint resumeFrom(flexpipe_rt &rt, const Checkpoint &identity) {
  Comm &comm = *rt.comm;
  const std::string &dir = rt.options.resume;
  const std::string rank = std::to_string(comm.rank());
  std::vector<int64_t> mine;
  std::vector<std::pair<int64_t, int>> all;
  if (std::string error = listCheckpoints(dir, comm.rank(), mine, all);
      !error.empty())
    comm.abort("--resume: " + error, 1);
  if (mine.empty()) {
    // Most likely the checkpoint is another rank count's: say so.
    std::string message = "--resume: '" + dir +
                          "' holds no checkpoint of rank " + rank +
                          " (a file iter-K.rank" + rank + ")";
    if (!all.empty()) {
      const std::string other =
          checkpointPath(dir, all.back().first, all.back().second);
      Checkpoint found, expected = identity;
      if (std::string error = readCheckpoint(other, found); !error.empty())
        message += "; " + error;
      else {
        expected.rank = found.rank;
        if (std::string differs = checkpointMismatch(other, found, expected);
            !differs.empty())
          message += "; " + differs;
      }
    }
    comm.abort(message, 1);
  }
  // The ranks agree on the newest generation they all have, written by one
  // run: each proposes its newest up to the oldest proposal until the
  // proposals agree. A rank killed while the others wrote generation K
  // still has K's predecessor; a run killed while it replaced another's
  // generation K leaves some ranks' files of each, and an older generation
  // may still be whole.
  int64_t generation = 0;
  std::string path, mixed;
  Checkpoint found;
  for (;;) {
    uint64_t proposal = mine.empty() ? 0 : static_cast<uint64_t>(mine.back());
    uint64_t lo = 0, hi = 0;
    for (;;) {
      comm.minMax(proposal, lo, hi);
      if (lo == hi)
        break;
      proposal = 0;
      for (int64_t k : mine)
        if (static_cast<uint64_t>(k) <= lo)
          proposal = static_cast<uint64_t>(k);
    }
    if (lo == 0 && !mixed.empty())
      comm.abort(mixed + "; resume from a directory of one run", 1);
    if (lo == 0) {
      std::string have;
      for (int64_t k : mine)
        have += (have.empty() ? "" : ", ") + std::to_string(k);
      comm.abort("--resume: the ranks' checkpoints in '" + dir +
                     "' have no generation in common (rank " + rank +
                     " has iter-" + have + ")",
                 1);
    }
    generation = static_cast<int64_t>(lo);
    path = checkpointPath(dir, generation, comm.rank());
    if (std::string error = readCheckpoint(path, found); !error.empty())
      comm.abort("--resume: " + error, 1);
    if (std::string error = checkpointMismatch(path, found, identity);
        !error.empty())
      comm.abort("--resume: " + error, 1);
    comm.minMax(found.run, lo, hi);
    if (lo == hi)
      break;
    mixed = "--resume: the files of iteration " + std::to_string(generation) +
            " in '" + dir + "' were written by different runs (rank " + rank +
            "'s by run " + std::to_string(found.run) +
            "): a run was stopped while it replaced another's checkpoint";
    if (comm.rank() == 0)
      std::printf("note: %s; looking for an older generation\n",
                  mixed.c_str() + std::strlen("--resume: "));
    mine.erase(std::remove_if(mine.begin(), mine.end(),
                              [&](int64_t k) { return k >= generation; }),
               mine.end());
  }
  if (found.iterations != generation)
    comm.abort("--resume: checkpoint '" + path + "' holds iteration " +
                   std::to_string(found.iterations) + ", not " +
                   std::to_string(generation) + " as its name says",
               1);
  if (generation > rt.options.iterations)
    comm.abort("--resume: checkpoint '" + path + "' has completed " +
                   std::to_string(generation) + " iterations, more than " +
                   "--iterations " + std::to_string(rt.options.iterations),
               1);
  return found;
}

/// Says where a resumed run continues (rank 0), once its state is restored.
void announceResume(const flexpipe_rt &rt, const Checkpoint &found) {
  if (rt.comm->rank() != 0)
    return;
  std::printf("resuming from '%s' after iteration %lld\n",
              rt.options.resume.c_str(),
              static_cast<long long>(found.iterations - 1));
  if (found.iterations == rt.options.iterations)
    std::printf("the checkpoint has completed all %lld iterations: nothing "
                "to train\n",
                static_cast<long long>(found.iterations));
  if (found.lr != rt.options.lr)
    std::printf("note: the checkpoint was trained with --lr %g; this run "
                "continues with --lr %g\n",
                found.lr, rt.options.lr);
  // (Every rank computes alike: checkStages.)
  if (const std::string precision = rt.device->precision().second;
      !found.precision.empty() && found.precision != precision)
    std::printf("note: the checkpoint was trained in %s; this run continues "
                "in %s (FLEXPIPE_CUDA_MATH), so it does not compute bitwise "
                "what one run in either would\n",
                found.precision.c_str(), precision.c_str());
}

/// This launch's id, the same on every rank (the smallest of the ranks'
/// draws), that its checkpoints carry. Collective.
uint64_t drawRunId(Comm &comm) {
  std::random_device device;
  const uint64_t mine =
      (static_cast<uint64_t>(device()) << 32 ^ device()) ^
      static_cast<uint64_t>(
          std::chrono::steady_clock::now().time_since_epoch().count());
  uint64_t lo = 0, hi = 0;
  comm.minMax(mine, lo, hi);
  return lo;
}

/// --checkpoint: every rank writes generation `completed`; once all have,
/// each removes its older files. Collective.
void saveCheckpoint(flexpipe_rt &rt, const Checkpoint &identity,
                    const std::vector<double> &losses, int64_t completed) {
  Comm &comm = *rt.comm;
  const std::string &dir = rt.options.checkpoint;
  Checkpoint checkpoint = identity;
  checkpoint.iterations = completed;
  checkpoint.lr = rt.options.lr;
  checkpoint.precision = rt.device->precision().second;
  checkpoint.losses = losses;
  checkpoint.state = rt.device->state();
  if (std::string error = writeCheckpoint(
          checkpointPath(dir, completed, comm.rank()), checkpoint);
      !error.empty())
    comm.abort(error, 1);
  double written = 1;
  comm.allreduceSum(&written, 1); // generation `completed` is whole
  removeCheckpointsExcept(dir, comm.rank(), completed);
  if (comm.rank() == 0)
    std::printf("checkpoint after iteration %lld in '%s'\n",
                static_cast<long long>(completed - 1), dir.c_str());
}

/// With a backend that needs its hardware to start: answers --help and
/// reports a missing operation before starting it. Returns the exit code
/// when the process should stop here.
std::optional<int> answerBeforeStart(int argc, char **argv,
                                     const char *description) {
  Options options;
  const std::string error = parseOptions(argc, argv, options);
  if (error.rfind("usage", 0) == 0) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 0;
  }
  // A missing operation is reported first, by every rank.
  ScheduleDesc desc;
  if (parseSchedule(description, desc).empty())
    if (std::string missing = missingOperation(desc); !missing.empty()) {
      std::fprintf(stderr, "flexpipe: %s\n", missing.c_str());
      return 1;
    }
  return std::nullopt;
}

/// The schedule fits this launch: tags, rank count, one schedule on every
/// rank. Collective; aborts with the reason.
void checkLaunch(flexpipe_rt &rt) {
  Comm &comm = *rt.comm;
  const ScheduleDesc &d = rt.desc;
  if (2 * d.stages + 1 >= kExchangeTag)
    comm.abort("the schedule has " + std::to_string(d.stages) +
                   " stages; the CPU backend's message tags allow 16383",
               1);
  if (comm.size() != d.actors * d.dp)
    comm.abort("the schedule needs " + std::to_string(d.actors * d.dp) +
                   " ranks (" + std::to_string(d.actors) + " actors x dp " +
                   std::to_string(d.dp) + "), but " +
                   std::to_string(comm.size()) + " were started",
               1);
  uint64_t lo, hi;
  comm.minMax(d.hash, lo, hi);
  if (lo != hi)
    comm.abort("the ranks were compiled from different schedules (hashes " +
                   std::to_string(lo) + " and " + std::to_string(hi) +
                   "); compile all ranks from one spec",
               1);
  // Every executable embeds the same schedule; its `program` line says which
  // actor's program it runs (programs that start with a receive would
  // otherwise wait on each other until FLEXPIPE_TIMEOUT).
  if (d.program >= 0 && d.program != actorOfRank(comm.rank(), d.dp))
    comm.abort(startedAsWrongRank(d.program, comm.rank(), d.dp), 1);
}

/// Collective, right after every rank parsed its options (`error`: what is
/// wrong, a usage text for --help, or ""): where any rank stops, all do at
/// once (mpirun's colon syntax gives each executable its own options; a
/// rank that left alone would hold the others up until FLEXPIPE_TIMEOUT).
/// Returns the exit code when the ranks stop. A message every rank has is
/// printed once, by rank 0; one that only some have, by each of them.
std::optional<int> agreeOnOptions(Comm &comm, const std::string &error) {
  const bool usage = error.rfind("usage", 0) == 0;
  const uint64_t status = error.empty() ? 0 : usage ? 1 : 2;
  uint64_t lo, hi;
  comm.minMax(status, lo, hi);
  if (hi == 0)
    return std::nullopt;
  if (status != 0 && (lo == hi ? comm.rank() == 0 : true)) {
    if (lo == hi)
      std::fprintf(stderr, "%s\n", error.c_str());
    else
      std::fprintf(stderr, "flexpipe: rank %d: %s\n", comm.rank(),
                   usage ? "was given --help, the other ranks were not"
                         : error.c_str());
  }
  comm.finalize();
  return hi == 2 || lo != hi ? 1 : 0;
}

/// Every rank trains the same way: options that decide how many iterations
/// run, what they compute and which collectives they call are the same on
/// all ranks (mpirun's colon syntax hands each executable its own options).
/// Collective; aborts with the first that differs.
void checkOptionsAgree(flexpipe_rt &rt) {
  const Options &o = rt.options;
  uint32_t lrBits = 0;
  static_assert(sizeof(lrBits) == sizeof(o.lr));
  std::memcpy(&lrBits, &o.lr, sizeof(lrBits));
  const auto lrText = [](uint64_t bits) {
    float lr = 0;
    const auto narrow = static_cast<uint32_t>(bits);
    std::memcpy(&lr, &narrow, sizeof(lr));
    char text[32];
    std::snprintf(text, sizeof(text), "%g", static_cast<double>(lr));
    return std::string(text);
  };
  const auto count = [](uint64_t v) { return std::to_string(v); };
  const auto given = [](uint64_t v) {
    return std::string(v ? "given" : "not given");
  };
  // A path, where each rank writes beside it (the trace's part files, the
  // checkpoint's) or reads from it: the same on every rank. (Two --trace
  // paths merged one rank's events and left the other's part behind.)
  // Compared as absolute, normal paths (`ckpt/` and `./ckpt` are `ckpt`;
  // one relative path from two working directories is two).
  const auto path = [](const std::string &p) -> uint64_t {
    if (p.empty())
      return 0;
    std::error_code error;
    std::filesystem::path normal =
        std::filesystem::absolute(p, error).lexically_normal();
    if (error) // (a working directory that is gone)
      normal = std::filesystem::path(p).lexically_normal();
    if (!normal.has_filename() && normal.has_parent_path())
      normal = normal.parent_path();
    return flexpipe::fnv1a(normal.string()) | 1;
  };
  const auto pathText = [](uint64_t v) {
    return std::string(v ? "a path" : "not given");
  };
  const struct {
    const char *option;
    uint64_t value;
    std::function<std::string(uint64_t)> show;
  } options[] = {
      {"--iterations", static_cast<uint64_t>(o.iterations), count},
      {"--lr", lrBits, lrText},
      {"--checkpoint-every", static_cast<uint64_t>(o.checkpointEvery), count},
      {"--checkpoint", path(o.checkpoint), pathText},
      {"--resume", path(o.resume), pathText},
      // Both add collectives (the trace's clock, the message timings).
      {"--profile", !o.profile.empty(), given},
      {"--trace", path(o.trace), pathText},
  };
  for (const auto &option : options) {
    uint64_t lo, hi;
    rt.comm->minMax(option.value, lo, hi);
    if (lo != hi)
      rt.comm->abort(std::string("the ranks were started with different ") +
                         option.option + " (" +
                         (lo && option.show(lo) == option.show(hi)
                              ? "two paths"
                              : option.show(lo) + " and " + option.show(hi)) +
                         "); give every rank the same options (with "
                         "mpirun's colon syntax, each executable takes its "
                         "own)",
                     1);
  }
}

/// The files this rank will write, checked before any work.
void checkOutputs(flexpipe_rt &rt) {
  Comm &comm = *rt.comm;
  const Options &o = rt.options;
  OutputFile::removeTemporariesOnInterrupt();
  std::vector<std::string> outputs;
  if (comm.rank() == 0)
    for (const std::string *path : {&o.losses, &o.profile, &o.trace})
      if (!path->empty())
        outputs.push_back(*path);
  if (!o.trace.empty()) {
    setTracePrefix(rt);
    outputs.push_back(tracePart(rt, comm.rank()));
  }
  // What every rank writes, so that each finds the same collision.
  std::vector<std::pair<std::string, std::string>> named;
  for (auto [option, path] :
       {std::pair{"--losses", &o.losses}, std::pair{"--profile", &o.profile},
        std::pair{"--trace", &o.trace}})
    if (!path->empty())
      named.push_back({option, *path});
  if (!o.trace.empty())
    for (int r = 0; r < comm.size(); ++r)
      named.push_back({"--trace (rank " + std::to_string(r) + "'s part)",
                       tracePart(rt, r)});
  if (!o.weights.empty())
    for (int a = 0; a < rt.desc.actors; ++a)
      named.push_back({"--weights (actor " + std::to_string(a) + "'s file)",
                       o.weights + ".actor" + std::to_string(a)});
  if (!o.checkpoint.empty())
    named.push_back({"--checkpoint", o.checkpoint});
  if (std::string error = OutputFile::checkDistinct(named); !error.empty())
    comm.abort(error + " (checked before training)", 1);
  // Nor one of a checkpoint directory's files: the one written to (a trace
  // part or the losses written over the only generation, exit 0) or the one
  // resumed from (the checkpoint being resumed replaced, or the trace's
  // merge deleting it, exit 0; the next resume found none).
  for (auto [dirOption, dirPath] : {std::pair{"--checkpoint", &o.checkpoint},
                                    std::pair{"--resume", &o.resume}}) {
    if (dirPath->empty())
      continue;
    const std::string dir = OutputFile::canonical(*dirPath);
    for (const auto &[option, path] : named) {
      const std::string file = OutputFile::canonical(path);
      const size_t slash = file.rfind('/');
      if (option != dirOption && slash != std::string::npos &&
          file.compare(0, slash, dir) == 0 && slash == dir.size() &&
          isCheckpointName(file.substr(slash + 1)))
        comm.abort(option + " names '" + path + "', a file of the " +
                       dirOption + " directory '" + *dirPath +
                       "' (its checkpoints are iter-K.rankR): it would "
                       "overwrite or lose one; name another path (checked "
                       "before training)",
                   1);
    }
  }
  if (rt.replica == 0 && !o.weights.empty())
    outputs.push_back(o.weights + ".actor" + std::to_string(rt.actor));
  // The checkpoint directory first: an output may lie in it (one there
  // was refused as unwritable until the directory existed).
  std::string error;
  if (!o.checkpoint.empty()) {
    error = makeDirectories(o.checkpoint);
    if (error.empty())
      error = OutputFile::check(
          checkpointPath(o.checkpoint, o.iterations, comm.rank()));
    if (!error.empty())
      comm.abort("--checkpoint: " + error + " (checked before training)", 1);
  }
  for (const std::string &path : outputs)
    if (error = OutputFile::check(path); !error.empty())
      comm.abort(error + " (checked before training)", 1);
}

/// What a checkpoint must match to resume this run.
Checkpoint identityOf(const flexpipe_rt &rt) {
  const ScheduleDesc &d = rt.desc;
  Checkpoint identity;
  identity.scheduleHash = d.hash;
  identity.scheduleName = d.name;
  identity.model = modelText(d);
  identity.actors = d.actors;
  identity.dp = d.dp;
  identity.ranks = rt.comm->size();
  identity.rank = rt.comm->rank();
  return identity;
}

/// The device runs every kind of stage the schedule has. Aborts with the
/// reason.
void checkStages(flexpipe_rt &rt) {
  Comm &comm = *rt.comm;
  const ScheduleDesc &d = rt.desc;
  if (std::string what = unsupportedStages(d, rt.device->vocabParallel(),
                                           rt.device->twoTower());
      !what.empty())
    comm.abort("this backend does not run " + what + "; use the CPU backend",
               1);
  // Every rank computes alike: messages between stages hold the devices'
  // activations (bf16 under FLEXPIPE_CUDA_MATH=bf16), and replicas that
  // share gradients must round them alike.
  const auto [precision, precisionName] = rt.device->precision();
  uint64_t lowest, highest;
  comm.minMax(precision, lowest, highest);
  if (lowest != highest)
    comm.abort("the ranks compute in different precisions (this rank: " +
                   precisionName +
                   "); start every rank with the same FLEXPIPE_CUDA_MATH",
               1);
  // All-gathers are matched by micro-batch (the tag) within their group.
  if ((d.vocabParallel() || d.twoTower()) && d.microbatches > kExchangeTag)
    comm.abort(std::string(d.vocabParallel() ? "vocabulary parallelism"
                                             : "a two-tower model") +
                   " allows at most " + std::to_string(kExchangeTag) +
                   " micro-batches",
               1);
  for (int s = 0; s < d.stages; ++s) {
    const ScheduleDesc::Stage &stage = d.stage[s];
    if (stage.shared() && !stage.vocabEmbedding() && !stage.vocabHead())
      comm.abort("stage " + std::to_string(s) +
                     " is shared but is not a vocabulary-parallel embedding "
                     "or head",
                 1);
    if (stage.shared() &&
        d.model.vocab < static_cast<int64_t>(stage.actors.size()))
      comm.abort("stage " + std::to_string(s) + " splits a vocabulary of " +
                     std::to_string(d.model.vocab) + " over " +
                     std::to_string(stage.actors.size()) + " actors",
                 1);
  }
}

/// One group per all-gather stage and replica, opened by every rank in
/// stage order: a vocabulary-parallel head's actors in vocabulary order, the
/// sync stage's in tower order (tower 0's last actor first). Collective.
void openGatherGroups(flexpipe_rt &rt) {
  const ScheduleDesc &d = rt.desc;
  for (int s = 0; s < d.stages; ++s) {
    const ScheduleDesc::Stage &stage = d.stage[s];
    if (!stage.vocabHead() && !stage.sync)
      continue;
    std::vector<int> members = stage.actors;
    if (stage.sync)
      members = {d.stage[d.towerLastStage(0)].actor,
                 d.stage[d.towerLastStage(1)].actor};
    std::vector<std::vector<int>> groups(d.dp);
    for (int r = 0; r < d.dp; ++r)
      for (int a : members)
        groups[r].push_back(static_cast<int>(rankOf(a, r, d.dp)));
    const int group = rt.comm->openGroups(groups);
    if (group < 0)
      continue;
    flexpipe_rt::Gather &gather = rt.gathers[s];
    gather.group = group;
    gather.members = static_cast<int>(members.size());
    // The first slice's actor, or tower 0's, counts the loss.
    gather.countLoss = members.front() == rt.actor;
    gather.stage = s;
    if (stage.sync)
      for (int t = 0; t < 2; ++t)
        if (d.stage[d.towerLastStage(t)].actor == rt.actor)
          gather.stage = d.towerLastStage(t);
  }
}

/// The trace's time 0 on every rank: the wall clock of the first rank to
/// get here. Each rank's steady clock times its events, offset by how much
/// later than that rank its wall clock read; ranks on one host share the
/// wall clock, so their events line up to the clock reads (each rank's own
/// start, after different start-up work, put receives before their sends by
/// milliseconds), and across hosts they line up as well as the hosts' clocks
/// agree.
void startTraceClock(flexpipe_rt &rt) {
  const Clock::time_point steady = Clock::now();
  if (!rt.tracing) {
    rt.epoch = steady;
    return;
  }
  const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  uint64_t first = 0, last = 0;
  rt.comm->minMax(static_cast<uint64_t>(wall), first, last);
  rt.epoch =
      steady - std::chrono::nanoseconds(static_cast<uint64_t>(wall) - first);
}

/// The stage graph, this actor's device stages and the readers of its
/// outputs; the per-iteration bookkeeping starts empty.
void makeStages(flexpipe_rt &rt) {
  const ScheduleDesc &d = rt.desc;
  Device &device = *rt.device;
  flexpipe::StageGraph<int> graph(d.stages, d.edges);
  rt.preds = std::move(graph.preds);
  rt.succs = std::move(graph.succs);
  for (int s = 0; s < d.stages; ++s) {
    const ScheduleDesc::Stage &stage = d.stage[s];
    if (stage.sync || !rt.runs(s))
      continue;
    if (!stage.shared()) {
      rt.stages[s] = device.makeStage(stage);
      continue;
    }
    rt.stages[s] = device.makeVocabStage(
        stage, vocabSlice(d.model.vocab, stage.part(rt.actor),
                          static_cast<int>(stage.actors.size())));
  }
  for (const ScheduleDesc::Exec &exec : d.execs)
    if (exec.actor == rt.actor)
      for (int64_t mb : exec.outputs)
        ++rt.outputReaders[{exec.stage, static_cast<int>(mb)}];
  rt.lossScale = 1.0f / static_cast<float>(d.microbatches * d.dp);
  rt.tracing = !rt.options.trace.empty();
  rt.syncTimings =
      device.asynchronous() && (rt.tracing || !rt.options.profile.empty());
  rt.busy.assign(d.stages * 4, 0);
  rt.calls.assign(d.stages * 4, 0);
}

/// Copies of this actor's stages on other actors (bidirectional), as
/// (mine, theirs), ordered by their blocks so that both actors of a pair
/// exchange in one order.
std::vector<std::pair<int, int>> stageCopies(const flexpipe_rt &rt) {
  const ScheduleDesc &d = rt.desc;
  std::vector<std::pair<int, int>> copies;
  for (auto &[s, stage] : rt.stages)
    for (int other = 0; other < d.stages; ++other)
      if (other != s && areCopies(d.stage[s], d.stage[other]))
        copies.push_back({s, other});
  std::sort(copies.begin(), copies.end(), [&](auto x, auto y) {
    return std::make_pair(d.stage[x.first].firstBlock, d.stage[x.first].last) <
           std::make_pair(d.stage[y.first].firstBlock, d.stage[y.first].last);
  });
  return copies;
}

/// For --profile: one message each way between every pair of actors that
/// talk (half a ping-pong round trip, mean of 10 after an untimed one),
/// pairs in one global order so that no two ranks wait for each other. Seconds per (from, to) pair this
/// actor belongs to. Collective.
std::map<std::pair<int, int>, double> timeMessages(flexpipe_rt &rt) {
  const ScheduleDesc &d = rt.desc;
  Comm &comm = *rt.comm;
  std::vector<std::pair<int, int>> pairs;
  for (auto [from, to] : d.edges)
    for (auto [a, b] : actorPairs(d, from, to))
      pairs.push_back({std::min(a, b), std::max(a, b)});
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  size_t largest = 0;
  for (int s = 0; s < d.stages; ++s)
    largest = std::max(largest, rt.messageSize(s));
  BufferPtr message = rt.device->allocate(largest);
  Buffer &buffer = *message;
  constexpr int kRounds = 10;
  std::map<std::pair<int, int>, double> seconds;
  for (auto [a, b] : pairs) {
    if (rt.actor != a && rt.actor != b)
      continue;
    const int peer = rt.rankOf(rt.actor == a ? b : a);
    auto send = [&] {
      comm.wait(comm.isend(buffer.data(), buffer.bytes(), peer, kExchangeTag));
    };
    auto receive = [&] {
      comm.wait(comm.irecv(buffer.data(), buffer.bytes(), peer, kExchangeTag));
    };
    auto roundTrips = [&](int rounds) {
      for (int round = 0; round < rounds; ++round) {
        if (rt.actor == a) {
          send();
          receive();
        } else {
          receive();
          send();
        }
      }
      rt.device->synchronize();
    };
    // One round trip first, untimed: the clock starts once both ends are
    // in the exchange. (The peer may still be building its stages or
    // timing an earlier pair: that wait counted as message time, 17-23 ms
    // for a 32 KiB message that takes about 5 us.)
    roundTrips(1);
    const Clock::time_point start = Clock::now();
    roundTrips(kRounds);
    const double oneWay =
        std::chrono::duration<double>(Clock::now() - start).count() /
        (2 * kRounds);
    seconds[{a, b}] = seconds[{b, a}] = oneWay;
  }
  comm.waitAll();
  return seconds;
}

/// The training loop: each iteration runs the compiled program, sums the
/// copies' gradients, all-reduces over replicas, steps the optimizer and
/// checkpoints when asked. Appends each iteration's loss to `losses`;
/// returns the seconds of the iterations after the first.
double train(flexpipe_rt &rt, const Checkpoint &identity,
             flexpipe_rt_program program, std::vector<double> &losses) {
  const ScheduleDesc &d = rt.desc;
  Comm &comm = *rt.comm;
  const Options &o = rt.options;
  const std::vector<std::pair<int, int>> copies = stageCopies(rt);
  std::vector<GradientRef> gradients;
  for (auto &[s, stage] : rt.stages)
    for (GradientRef g : stage->gradients())
      gradients.push_back(g);
  const std::vector<Comm::Floats> replicaGradients = floatsOf(gradients);
  double totalSeconds = 0;
  for (int64_t it = rt.firstIteration; it < o.iterations; ++it) {
    rt.iteration = it;
    const Clock::time_point start = Clock::now();
    rt.readersLeft = rt.outputReaders;
    rt.hostTimed(rt.programSeconds, [&] { program(&rt); });
    if (rt.inGroup)
      comm.abort("the program ended inside a transfer group (group_start "
                 "without group_end)",
                 1);
    comm.waitAll();
    rt.sending.clear();
    rt.kept.clear();
    // A bidirectional pipeline holds each stage twice, on two actors: sum the
    // copies' gradients (in block order, the same on both sides).
    // Traced as EXCHANGE, ALLREDUCE, STEP and LOSS after the instructions.
    rt.traced("EXCHANGE", -1, -1, -1, [&] {
      for (auto &[s, other] : copies)
        comm.exchangeAdd(floatsOf(rt.stages[s]->gradients()),
                         rt.rankOf(d.stage[other].actor), kExchangeTag);
    });
    rt.traced("ALLREDUCE", -1, -1, -1,
              [&] { comm.allreduceReplicas(replicaGradients); });
    rt.traced("STEP", -1, -1, -1,
              [&] { rt.timedStep([&] { rt.device->step(o.lr); }); });
    double loss = rt.device->takeLossSum();
    rt.traced("LOSS", -1, -1, -1, [&] { comm.allreduceSum(&loss, 1); });
    loss *= rt.lossScale;
    const double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    if (it > rt.firstIteration)
      totalSeconds += seconds;
    losses.push_back(loss);
    if (comm.rank() == 0)
      std::printf("iteration %lld: loss %.6f (%.3f ms)\n",
                  static_cast<long long>(it), loss, seconds * 1e3);
    // Every rank holds the same all-reduced loss, so all stop here, before
    // a checkpoint of weights that are no longer numbers.
    if (!std::isfinite(loss)) {
      rt.divergedAt = it;
      break;
    }
    const int64_t completed = it + 1;
    if (!o.checkpoint.empty() &&
        ((o.checkpointEvery > 0 && completed % o.checkpointEvery == 0) ||
         completed == o.iterations))
      saveCheckpoint(rt, identity, losses, completed);
  }
  // Resumed with nothing left to train: --checkpoint still gets the state
  // "at the end of the run" (it left the directory empty), unless it is the
  // directory resumed from, whose generation K is that state already (a
  // rewrite under this launch's run id, stopped midway, left generation K
  // of two runs and no older one to go back to).
  if (!o.checkpoint.empty() && rt.firstIteration >= o.iterations) {
    std::error_code error;
    uint64_t same = !o.resume.empty() &&
                    std::filesystem::equivalent(o.checkpoint, o.resume, error);
    uint64_t all = 0, any = 0; // every rank decides alike (a collective)
    rt.comm->minMax(same, all, any);
    if (!all)
      saveCheckpoint(rt, identity, losses, o.iterations);
    else if (rt.comm->rank() == 0)
      std::printf("checkpoint after iteration %lld in '%s' kept as it is\n",
                  static_cast<long long>(o.iterations - 1),
                  o.checkpoint.c_str());
  }
  return totalSeconds;
}

/// Rank 0 prints the mean iteration time, every rank's peak activation
/// memory (the bytes the executor and the layers hold) beside the cost
/// model's prediction when the description has one, and what the backend
/// measured of its device memory (Comm::measuredMemory). Collective.
void printSummary(flexpipe_rt &rt, double totalSeconds) {
  Comm &comm = *rt.comm;
  // (A run that diverged stopped after divergedAt.)
  const int64_t ran =
      (rt.divergedAt >= 0 ? rt.divergedAt + 1 : rt.options.iterations) -
      rt.firstIteration;
  // A resume at the last iteration ran none and measured nothing (its
  // peaks read 0.0 KiB); the start said so. Every rank resumed at the same.
  if (ran <= 0)
    return;
  if (comm.rank() == 0 && ran > 1)
    std::printf("mean iteration time %.3f ms (iterations after the first)\n",
                totalSeconds * 1e3 / (ran - 1));
  // What every rank measured, in one collective: the logical peak, then the
  // backend's device figures (the same list on every rank).
  std::vector<std::pair<std::string, double>> mine = {
      {"peak activation memory", rt.peakBytes}};
  for (auto &figure : comm.measuredMemory())
    mine.push_back(std::move(figure));
  const int ranks = comm.size();
  std::vector<double> all(mine.size() * ranks, 0.0);
  for (size_t i = 0; i < mine.size(); ++i)
    all[i * ranks + comm.rank()] = mine[i].second;
  comm.allreduceSum(all.data(), all.size());
  if (comm.rank() == 0) {
    auto row = [&](const std::string &what, auto bytesOf, bool mib) {
      std::printf("%s per rank:", what.c_str());
      for (int r = 0; r < ranks; ++r)
        std::printf(mib ? " %.1f MiB" : " %.1f KiB",
                    bytesOf(r) / (mib ? 1 << 20 : 1024));
      std::printf("\n");
    };
    for (size_t i = 0; i < mine.size(); ++i) {
      row(
          mine[i].first, [&](int r) { return all[i * ranks + r]; }, i > 0);
      if (i == 0 && !rt.desc.predictedPeak.empty())
        row(
            "predicted by the cost model",
            [&](int r) {
              return rt.desc.predictedPeak[actorOfRank(r, rt.desc.dp)];
            },
            false);
    }
  }
  std::fflush(stdout);
}

/// --losses (rank 0) and --weights (replica 0 of each actor: its stages'
/// parameters).
void writeLossesAndWeights(flexpipe_rt &rt, const std::vector<double> &losses) {
  Comm &comm = *rt.comm;
  if (comm.rank() == 0 && !rt.options.losses.empty()) {
    writeFile(comm, rt.options.losses, [&](FILE *f) {
      for (double l : losses)
        std::fprintf(f, "%.9g\n", l);
    });
  }
  if (rt.replica == 0 && !rt.options.weights.empty()) {
    writeFile(comm, rt.options.weights + ".actor" + std::to_string(rt.actor),
              [&](FILE *f) {
                for (const auto &[name, values] : rt.device->weights()) {
                  std::fprintf(f, "%s %zu", name.c_str(), values.size());
                  for (float x : values)
                    std::fprintf(f, " %.9g", x);
                  std::fprintf(f, "\n");
                }
              });
  }
}

/// --profile: mean seconds per stage and kind over all ranks, the message
/// times measured by both ends (of replica 0) as an actors x actors table,
/// averaged, each actor's mean optimizer step over its replicas, the mean
/// overhead per instruction and the mean registered operation over all
/// ranks; rank 0 writes them. Collective.
void writeProfile(flexpipe_rt &rt,
                  const std::map<std::pair<int, int>, double> &messages) {
  const ScheduleDesc &d = rt.desc;
  Comm &comm = *rt.comm;
  std::vector<double> profile = rt.busy;
  profile.insert(profile.end(), rt.calls.begin(), rt.calls.end());
  const size_t pairsAt = profile.size();
  const size_t table = static_cast<size_t>(d.actors) * d.actors;
  const size_t stepsAt = pairsAt + 2 * table;
  const size_t overheadAt = stepsAt + 2 * d.actors;
  profile.resize(overheadAt + 4, 0.0);
  profile[overheadAt + 2] = rt.execSeconds;
  profile[overheadAt + 3] = rt.execs;
  profile[stepsAt + rt.actor] = rt.stepSeconds;
  profile[stepsAt + d.actors + rt.actor] = rt.steps;
  // What the programs ran outside their computations, waits and registered
  // operations: dispatch, bookkeeping, posting messages, and the moments a
  // rank sharing its core lost it between instructions.
  double computing = 0;
  for (double seconds : rt.busy)
    computing += seconds;
  profile[overheadAt] =
      std::max(0.0, rt.programSeconds - computing - rt.excludedSeconds);
  profile[overheadAt + 1] = rt.instructions;
  if (rt.replica == 0)
    for (auto [pair, seconds] : messages) {
      profile[pairsAt + pair.first * d.actors + pair.second] += seconds;
      profile[pairsAt + table + pair.first * d.actors + pair.second] += 1;
    }
  comm.allreduceSum(profile.data(), profile.size());
  if (comm.rank() != 0 || rt.options.profile.empty())
    return;
  writeFile(comm, rt.options.profile, [&](FILE *f) {
    std::fprintf(f,
                 "# FlexPipe profile measured by the runtime: mean seconds "
                 "per stage and instruction type for one micro-batch\n"
                 "micro_batch_size: %lld\nmodules:\n",
                 static_cast<long long>(d.model.microBatch));
    // The GPT, or the towers in the model file's order.
    for (const GptConfig &m :
         d.towers.empty() ? std::vector<GptConfig>{d.model} : d.towers)
      std::fprintf(
          f, "  - {hidden: %lld, heads: %lld, seq: %lld, vocab: %lld}\n",
          static_cast<long long>(m.hidden), static_cast<long long>(m.heads),
          static_cast<long long>(m.seq), static_cast<long long>(m.vocab));
    std::fprintf(f, "stages:\n");
    const size_t half = rt.busy.size();
    for (int s = 0; s < d.stages; ++s) {
      auto mean = [&](int kind) {
        const double n = profile[half + s * 4 + kind];
        return n > 0 ? profile[s * 4 + kind] / n : 0.0;
      };
      double fwd = mean(0), bwd = mean(1), igrad = mean(2), wgrad = mean(3);
      if (bwd == 0)
        bwd = igrad + wgrad;
      if (igrad == 0 && wgrad == 0) {
        igrad = bwd / 2;
        wgrad = bwd - igrad;
      }
      // What the stage held: a profile prices only the job it measured.
      const ScheduleDesc::Stage &held = d.stage[s];
      std::string actors;
      for (int a :
           held.actors.empty() ? std::vector<int>{held.actor} : held.actors)
        actors += (actors.empty() ? "" : ", ") + std::to_string(a);
      std::fprintf(f,
                   "  - {stage: %d, layers: %d, first: %s, last: %s, "
                   "actors: [%s], fwd_s: %.9g, bwd_s: %.9g, igrad_s: %.9g, "
                   "wgrad_s: %.9g}\n",
                   s, held.blocks, held.first ? "true" : "false",
                   held.last ? "true" : "false", actors.c_str(), fwd, bwd,
                   igrad, wgrad);
    }
    bool header = false;
    for (int a = 0; a < d.actors; ++a)
      for (int b = 0; b < d.actors; ++b) {
        const double n = profile[pairsAt + table + a * d.actors + b];
        if (n == 0)
          continue;
        if (!header)
          std::fprintf(f, "messages:\n");
        header = true;
        std::fprintf(f, "  - {from: %d, to: %d, seconds: %.9g}\n", a, b,
                     profile[pairsAt + a * d.actors + b] / n);
      }
    std::fprintf(f, "default_message_s: 0\n");
    // The optimizer step after the pipeline, per actor.
    if (rt.steps > 0) {
      std::fprintf(f, "optimizer_s: [");
      for (int a = 0; a < d.actors; ++a) {
        const double n = profile[stepsAt + d.actors + a];
        std::fprintf(f, "%s%.9g", a ? ", " : "",
                     n > 0 ? profile[stepsAt + a] / n : 0.0);
      }
      std::fprintf(f, "]\n");
    }
    if (profile[overheadAt + 1] > 0)
      std::fprintf(f, "instruction_s: %.9g\n",
                   profile[overheadAt] / profile[overheadAt + 1]);
    if (profile[overheadAt + 3] > 0)
      std::fprintf(f, "exec_s: %.9g\n",
                   profile[overheadAt + 2] / profile[overheadAt + 3]);
  });
}

} // namespace

int flexpipe::rt::runRank(int argc, char **argv, const char *description,
                          flexpipe_rt_program program, Backend &backend) {
  if (backend.helpBeforeStart())
    if (std::optional<int> exit = answerBeforeStart(argc, argv, description))
      return *exit;
  // A line at a time, also into a file or pipe: a launcher that stops the
  // ranks (run-env.sh on a rank's death) loses no iteration line, and a log
  // shows progress while the run goes on.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  flexpipe_rt rt;
  rt.comm = backend.start(&argc, &argv);
  Comm &comm = *rt.comm;
  if (std::string error = parseSchedule(description, rt.desc); !error.empty())
    comm.abort(error, 1);
  if (std::optional<int> exit =
          agreeOnOptions(comm, parseOptions(argc, argv, rt.options)))
    return *exit;
  const ScheduleDesc &d = rt.desc;
  // Every runtime operation the program runs must be compiled in; the ranks
  // all have the same operations, so rank 0 alone reports.
  if (std::string missing = missingOperation(d); !missing.empty()) {
    if (comm.rank() == 0)
      std::fprintf(stderr, "flexpipe: %s\n", missing.c_str());
    comm.finalize();
    return 1;
  }
  checkLaunch(rt);
  checkOptionsAgree(rt);
  rt.actor = static_cast<int>(actorOfRank(comm.rank(), d.dp));
  rt.replica = static_cast<int>(replicaOfRank(comm.rank(), d.dp));
  // FLEXPIPE_BIND is checked with any --threads and on every backend (a bad
  // value passed unnoticed with --threads 2, and on the CUDA backend, whose
  // launcher places its ranks); a rank with threads keeps all the cores.
  if (std::string error = bindSettingError(); !error.empty())
    comm.abort(error, 1);
  if (rt.options.threads == 1)
    comm.place(deviceOf(rt.actor, rt.replica, d.dp));
  checkOutputs(rt);
  Checkpoint identity = identityOf(rt);
  Checkpoint resumed;
  if (!rt.options.resume.empty())
    resumed = resumeFrom(rt, identity);
  // Every launch draws its own: two runs resumed from one checkpoint into
  // one directory write the same generations too.
  if (!rt.options.checkpoint.empty())
    identity.run = drawRunId(comm);
  if (!rt.options.resume.empty()) {
    if (!rt.options.profile.empty() &&
        rt.options.iterations - resumed.iterations < 2)
      comm.abort(
          "--profile needs at least 2 iterations to run, and the "
          "checkpoint leaves " +
              std::to_string(rt.options.iterations - resumed.iterations) +
              " of --iterations " + std::to_string(rt.options.iterations) +
              ": the first (a warm-up) is left out of the means",
          1);
  }
  comm.setReplicaGroup(rt.actor);
  comm.openChannels(channelsOf(d));
  rt.device = backend.makeDevice(d);
  rt.device->setThreads(rt.options.threads);
  checkStages(rt);
  openGatherGroups(rt);
  makeStages(rt);
  startTraceClock(rt);
  std::map<std::pair<int, int>, double> messageSeconds;
  if (!rt.options.profile.empty())
    messageSeconds = timeMessages(rt);

  std::vector<double> losses;
  if (!rt.options.resume.empty()) {
    if (std::string error = rt.device->setState(resumed.state); !error.empty())
      comm.abort("--resume: checkpoint '" +
                     checkpointPath(rt.options.resume, resumed.iterations,
                                    comm.rank()) +
                     "' does not fit this rank's stages: " + error,
                 1);
    announceResume(rt, resumed);
    rt.firstIteration = resumed.iterations;
    losses = std::move(resumed.losses);
    resumed.state = {};
  }
  const double totalSeconds = train(rt, identity, program, losses);
  if (rt.divergedAt >= 0 && comm.rank() == 0)
    std::fprintf(stderr,
                 "flexpipe: iteration %lld: the loss is %s, so training "
                 "stopped (no checkpoint of it, and no --profile, is "
                 "written): lower --lr, or "
                 "look at the initial weights and at what registered "
                 "operations do to the activations\n",
                 static_cast<long long>(rt.divergedAt),
                 std::isnan(losses.back()) ? "nan" : "infinite");
  printSummary(rt, totalSeconds);
  // (A run that diverged measured computations on numbers that are not:
  // every rank leaves the collective out alike.)
  if (rt.divergedAt < 0)
    writeProfile(rt, messageSeconds);
  if (rt.tracing)
    writeTrace(rt);
  // After the last collective: a rank writing large weights held the ranks
  // that finished first in writeProfile's all-reduce, which FLEXPIPE_TIMEOUT
  // bounds (they aborted the run and its weights were lost); on the CPU
  // backend they now wait in MPI_Finalize, which has no limit (the CUDA
  // backend's finalize still all-reduces under it).
  writeLossesAndWeights(rt, losses);
  // The iteration lines reached the standard output (into a full disk they
  // were lost, and the run exited 0).
  const bool printed = std::fflush(stdout) == 0 && !std::ferror(stdout);
  if (!printed)
    std::fprintf(stderr,
                 "flexpipe: rank %d: cannot write the standard output (a "
                 "full disk?); lines of this run are lost\n",
                 comm.rank());
  comm.finalize();
  return printed && rt.divergedAt < 0 ? 0 : 1;
}

extern "C" {

/// Hands `result` of stage `s` for micro-batch `mb` to the stages that take
/// it: a part in `local` for each neighbour on this actor (a copy but for the
/// last), the buffer itself into `remote` when some run on other actors, to
/// be sent once to each of those actors.
static void deliver(flexpipe_rt *rt, const std::vector<int> &neighbours,
                    int64_t s, int64_t mb, BufferPtr result,
                    std::map<flexpipe_rt::Key, flexpipe_rt::Parts> &local,
                    std::map<flexpipe_rt::Key, flexpipe_rt::Outgoing> &remote) {
  std::vector<int> here;
  std::set<int> elsewhere;
  for (int q : neighbours)
    for (int a : rt->desc.stage[q].actors) {
      if (a == rt->actor)
        here.push_back(q);
      else
        elsewhere.insert(a);
    }
  if (!result && (!elsewhere.empty() || !here.empty()))
    rt->comm->abort("stage " + std::to_string(s) + " mb " + std::to_string(mb) +
                        " produced nothing to pass on",
                    1);
  for (size_t i = 0; i < here.size(); ++i)
    local[{here[i], static_cast<int>(mb)}].push_back(
        {rt->actor, i + 1 == here.size() && elsewhere.empty()
                        ? std::move(result)
                        : rt->device->copy(*result)});
  if (!elsewhere.empty())
    remote[{static_cast<int>(s), static_cast<int>(mb)}] = {
        std::move(result), static_cast<int>(elsewhere.size())};
}

/// The input activation (or output gradient) of stage `s` for micro-batch
/// `mb`: one part from each actor of `neighbours`, summed in actor order.
static BufferPtr takeParts(flexpipe_rt *rt,
                           std::map<flexpipe_rt::Key, flexpipe_rt::Parts> &from,
                           const std::vector<int> &neighbours, int64_t s,
                           int64_t mb, const char *what) {
  size_t expected = 0;
  for (int q : neighbours)
    expected += rt->desc.stage[q].actors.size();
  auto it = from.find({static_cast<int>(s), static_cast<int>(mb)});
  const size_t have = it == from.end() ? 0 : it->second.size();
  if (have != expected)
    rt->comm->abort(std::string(what) + " stage " + std::to_string(s) + " mb " +
                        std::to_string(mb) + " has " + std::to_string(have) +
                        " of its " + std::to_string(expected) + " input parts",
                    1);
  flexpipe_rt::Parts parts = std::move(it->second);
  from.erase(it);
  std::stable_sort(
      parts.begin(), parts.end(),
      [](const auto &x, const auto &y) { return x.first < y.first; });
  BufferPtr sum = std::move(parts.front().second);
  for (size_t i = 1; i < parts.size(); ++i)
    rt->device->accumulate(*sum, *parts[i].second);
  return sum;
}

static void forward(flexpipe_rt *rt, int64_t s, int64_t mb) {
  BufferPtr in, out;
  if (!rt->preds[s].empty())
    in = takeParts(rt, rt->input, rt->preds[s], s, mb, "fwd");
  // A vocabulary-parallel head and a tower count their loss after the
  // all-gather.
  const ScheduleDesc::Stage &stage = rt->desc.stage[s];
  const bool gathers = stage.vocabHead() || stage.towerLast();
  const bool countLoss = stage.last && !gathers && rt->succs[s].empty();
  rt->timed(s, 0, [&] {
    rt->stage(s).forward(mb, rt->batch(s, mb), std::move(in), out, countLoss);
  });
  if (gathers)
    rt->awaitingGather.insert({static_cast<int>(s), static_cast<int>(mb)});
  // Runtime operations that read this output later get a copy (the output
  // itself when nothing takes it on).
  const flexpipe_rt::Key key{static_cast<int>(s), static_cast<int>(mb)};
  if (auto readers = rt->readersLeft.find(key);
      out && readers != rt->readersLeft.end() && readers->second > 0)
    rt->kept[key] =
        rt->succs[s].empty() ? std::move(out) : rt->device->copy(*out);
  deliver(rt, rt->succs[s], s, mb, std::move(out), rt->input, rt->output);
}

/// Frees the activation stage `s` sent for micro-batch `mb` once its
/// gradient is back from every rank it went to: their backward needed it,
/// so it was delivered, and the waits for its sends return at once (on the
/// CUDA backend they order the free after the sends on the GPU). The CUDA
/// backend's host runs an iteration ahead of its sends and never sees them
/// complete: without this a rank held every activation it sent until the
/// iteration's end. (A sent gradient has no such answer: it stays.)
static void releaseDelivered(flexpipe_rt *rt, int64_t s, int64_t mb) {
  const flexpipe_rt::Key key{static_cast<int>(s), static_cast<int>(mb)};
  auto it = std::find_if(rt->sending.begin(), rt->sending.end(),
                         [&](const flexpipe_rt::Outgoing &sent) {
                           return !sent.gradient && sent.key == key;
                         });
  if (it == rt->sending.end())
    return;
  for (int64_t handle : it->handles)
    rt->comm->wait(handle);
  rt->sending.erase(it);
}

static void inputGradient(flexpipe_rt *rt, int64_t s, int64_t mb) {
  if (rt->awaitingGather.count({static_cast<int>(s), static_cast<int>(mb)}))
    rt->comm->abort("the backward of stage " + std::to_string(s) + " mb " +
                        std::to_string(mb) +
                        " runs before the all-gather of its loss has "
                        "completed on actor " +
                        std::to_string(rt->actor),
                    1);
  BufferPtr dout, din;
  if (!rt->succs[s].empty()) {
    dout = takeParts(rt, rt->outputGrad, rt->succs[s], s, mb, "backward of");
    releaseDelivered(rt, s, mb);
  }
  rt->timed(s, 2, [&] {
    rt->stage(s).inputGrad(mb, std::move(dout), din, rt->lossScale);
  });
  deliver(rt, rt->preds[s], s, mb, std::move(din), rt->outputGrad,
          rt->inputGrad);
}

static void weightGradient(flexpipe_rt *rt, int64_t s, int64_t mb) {
  rt->timed(s, 3, [&] { rt->stage(s).weightGrad(mb); });
}

void flexpipe_rt_fwd(flexpipe_rt *rt, int64_t s, int64_t mb) {
  rt->instruction();
  rt->traced("F", s, mb, -1, [&] { forward(rt, s, mb); });
  rt->measureMemory();
}
void flexpipe_rt_igrad(flexpipe_rt *rt, int64_t s, int64_t mb) {
  rt->instruction();
  rt->traced("I", s, mb, -1, [&] { inputGradient(rt, s, mb); });
  rt->measureMemory();
}
void flexpipe_rt_wgrad(flexpipe_rt *rt, int64_t s, int64_t mb) {
  rt->instruction();
  rt->traced("W", s, mb, -1, [&] { weightGradient(rt, s, mb); });
}

void flexpipe_rt_bwd(flexpipe_rt *rt, int64_t s, int64_t mb) {
  rt->instruction();
  // Its two halves are timed as input and weight gradient (the profile's
  // backward is their sum): only the computation, not the wait for the
  // output's gradient to arrive.
  rt->traced("B", s, mb, -1, [&] {
    inputGradient(rt, s, mb);
    // What the weight gradient needs is alive here, as after an igrad: the
    // fused backward's peak is the split one's.
    rt->measureMemory();
    weightGradient(rt, s, mb);
  });
}

static int64_t postSend(flexpipe_rt *rt,
                        std::map<flexpipe_rt::Key, flexpipe_rt::Outgoing> &from,
                        bool gradient, int64_t s, int64_t mb, int64_t peer) {
  auto it = from.find({static_cast<int>(s), static_cast<int>(mb)});
  if (it == from.end())
    rt->comm->abort(std::string(gradient ? "send_grad" : "send_act") +
                        " stage " + std::to_string(s) + " mb " +
                        std::to_string(mb) + " has nothing to send",
                    1);
  Buffer &buffer = *it->second.buffer;
  const int64_t handle =
      rt->comm->isend(buffer.data(), buffer.bytes(), rt->rankOf(peer),
                      messageTag(gradient, static_cast<int>(s)));
  it->second.handles.push_back(handle);
  // After the last send the buffer lives until its sends complete.
  if (--it->second.sends == 0) {
    rt->releaseSent();
    it->second.key = it->first;
    it->second.gradient = gradient;
    rt->sending.push_back(std::move(it->second));
    from.erase(it);
  }
  return handle;
}

static int64_t postRecv(flexpipe_rt *rt,
                        std::map<flexpipe_rt::Key, flexpipe_rt::Parts> &into,
                        bool gradient, int64_t s, int64_t mb, int64_t peer) {
  const int sender =
      rt->senderStage(static_cast<int>(s), static_cast<int>(peer), gradient);
  flexpipe_rt::Parts &parts = into[{static_cast<int>(s), static_cast<int>(mb)}];
  parts.push_back({static_cast<int>(peer),
                   rt->device->allocate(rt->messageSize(static_cast<int>(s)))});
  Buffer &buffer = *parts.back().second;
  return rt->comm->irecv(buffer.data(), buffer.bytes(), rt->rankOf(peer),
                         messageTag(gradient, sender));
}

/// Posts the all-gather of stage `s` for micro-batch `mb` in its group: a
/// vocabulary-parallel head's softmax statistics, or, for the sync stage of
/// a two-tower model, the embeddings of this actor's tower. Returns what
/// completes it: the waits, then the loss and what the backward needs, from
/// every member's part.
static std::function<void()> postAllGather(flexpipe_rt *rt, int64_t s,
                                           int64_t mb) {
  auto found = rt->gathers.find(static_cast<int>(s));
  if (found == rt->gathers.end())
    rt->comm->abort("all_gather stage " + std::to_string(s) +
                        ": the stage is neither a vocabulary-parallel head nor "
                        "the sync stage of a two-tower model on actor " +
                        std::to_string(rt->actor),
                    1);
  const flexpipe_rt::Gather gather = found->second;
  auto mine = std::make_shared<std::vector<double>>(
      rt->stage(gather.stage).statistics(mb));
  if (mine->empty())
    rt->comm->abort(
        "all_gather stage " + std::to_string(s) + " mb " + std::to_string(mb) +
            " has nothing to exchange: the fwd of stage " +
            std::to_string(gather.stage) + " mb " + std::to_string(mb) +
            " has not run on this actor, or its all-gather ran "
            "already",
        1);
  auto all =
      std::make_shared<std::vector<double>>(mine->size() * gather.members);
  std::vector<int64_t> handles =
      rt->comm->iallGather(gather.group, mine->data(), mine->size(),
                           all->data(), static_cast<int>(mb));
  return [rt, gather, mb, mine, all, handles] {
    rt->excluded([&] {
      for (int64_t handle : handles)
        rt->comm->wait(handle);
      rt->stage(gather.stage).combine(mb, *all, gather.countLoss);
    });
    rt->awaitingGather.erase({gather.stage, static_cast<int>(mb)});
  };
}

void flexpipe_rt_send_act(flexpipe_rt *rt, int64_t s, int64_t mb,
                          int64_t peer) {
  rt->instruction();
  rt->traced("SEND_F", s, mb, peer,
             [&] { postSend(rt, rt->output, false, s, mb, peer); });
}
void flexpipe_rt_send_grad(flexpipe_rt *rt, int64_t s, int64_t mb,
                           int64_t peer) {
  rt->instruction();
  rt->traced("SEND_B", s, mb, peer,
             [&] { postSend(rt, rt->inputGrad, true, s, mb, peer); });
}
/// A blocking receive: waits for `handle` now, or inside a transfer group
/// at the group's end.
static void receive(flexpipe_rt *rt, int64_t handle) {
  if (rt->inGroup)
    rt->groupReceives.push_back(handle);
  else
    rt->excluded([&] { rt->comm->wait(handle); });
}
void flexpipe_rt_recv_act(flexpipe_rt *rt, int64_t s, int64_t mb,
                          int64_t peer) {
  rt->instruction();
  rt->traced("RECV_F", s, mb, peer,
             [&] { receive(rt, postRecv(rt, rt->input, false, s, mb, peer)); });
}
void flexpipe_rt_recv_grad(flexpipe_rt *rt, int64_t s, int64_t mb,
                           int64_t peer) {
  rt->instruction();
  rt->traced("RECV_B", s, mb, peer, [&] {
    receive(rt, postRecv(rt, rt->outputGrad, true, s, mb, peer));
  });
}
void flexpipe_rt_group_start(flexpipe_rt *rt) {
  if (rt->inGroup)
    rt->comm->abort("group_start inside a transfer group; groups do not nest",
                    1);
  rt->inGroup = true;
  rt->comm->groupStart();
}
void flexpipe_rt_group_end(flexpipe_rt *rt) {
  if (!rt->inGroup)
    rt->comm->abort("group_end without a group_start", 1);
  rt->inGroup = false;
  rt->comm->groupEnd();
  std::vector<int64_t> handles = std::move(rt->groupReceives);
  rt->groupReceives.clear();
  if (!handles.empty())
    rt->traced("WAIT", -1, -1, -1, [&] {
      rt->excluded([&] {
        for (int64_t handle : handles)
          rt->comm->wait(handle);
      });
    });
}

/// Posts an asynchronous transfer (traced as `kind`, the post) and returns
/// its token, whose wait is traced as a WAIT of `kind` with the transfer's
/// stage, micro-batch and peer. (`post` is called here, once: a template,
/// not a std::function made for every transfer; C++ linkage, which a
/// template needs, inside this extern "C" block.)
extern "C++" {
template <typename Post>
static int64_t postAsync(flexpipe_rt *rt, const char *kind, int64_t s,
                         int64_t mb, int64_t peer, Post post) {
  rt->instruction();
  int64_t handle = -1;
  rt->traced(kind, s, mb, peer, [&] { handle = post(); });
  rt->tokens[rt->nextToken] = [rt, handle, kind, s, mb, peer] {
    rt->traced(
        "WAIT", s, mb, peer,
        [&] { rt->excluded([&] { rt->comm->wait(handle); }); }, kind);
  };
  return rt->nextToken++;
}
} // extern "C++"

int64_t flexpipe_rt_send_act_async(flexpipe_rt *rt, int64_t s, int64_t mb,
                                   int64_t peer) {
  return postAsync(rt, "SEND_F", s, mb, peer, [&] {
    return postSend(rt, rt->output, false, s, mb, peer);
  });
}
int64_t flexpipe_rt_send_grad_async(flexpipe_rt *rt, int64_t s, int64_t mb,
                                    int64_t peer) {
  return postAsync(rt, "SEND_B", s, mb, peer, [&] {
    return postSend(rt, rt->inputGrad, true, s, mb, peer);
  });
}
int64_t flexpipe_rt_recv_act_async(flexpipe_rt *rt, int64_t s, int64_t mb,
                                   int64_t peer) {
  return postAsync(rt, "RECV_F", s, mb, peer,
                   [&] { return postRecv(rt, rt->input, false, s, mb, peer); });
}
int64_t flexpipe_rt_recv_grad_async(flexpipe_rt *rt, int64_t s, int64_t mb,
                                    int64_t peer) {
  return postAsync(rt, "RECV_B", s, mb, peer, [&] {
    return postRecv(rt, rt->outputGrad, true, s, mb, peer);
  });
}
void flexpipe_rt_wait(flexpipe_rt *rt, int64_t token) {
  rt->instruction();
  auto it = rt->tokens.find(token);
  if (it == rt->tokens.end())
    rt->comm->abort("wait on unknown token " + std::to_string(token), 1);
  if (rt->inGroup)
    rt->comm->abort("wait on token " + std::to_string(token) +
                        " inside a transfer group; a group's transfers "
                        "start at its group_end",
                    1);
  // Each token's completion traces its own WAIT (with what it waits for).
  std::function<void()> complete = std::move(it->second);
  rt->tokens.erase(it);
  complete();
}

/// What a runtime operation sees of this rank: the outputs kept for it, in
/// host memory.
class ExecHost final : public OpContext::Host {
public:
  ExecHost(flexpipe_rt *rt, int64_t s) : rt(rt), s(static_cast<int>(s)) {}
  TensorView output(int64_t mb) override {
    auto it = rt->kept.find({s, static_cast<int>(mb)});
    if (it == rt->kept.end() || !it->second)
      return {};
    Buffer &buffer = *it->second;
    TensorView view;
    view.data = rt->device->hostData(buffer, scratch[mb]);
    view.size = buffer.size();
    view.shape = rt->desc.outputShape(s, view.size);
    return view;
  }
  [[noreturn]] void fail(const std::string &message) override {
    rt->comm->abort(message, 1);
    std::abort(); // not reached: Comm::abort stops the process
  }

private:
  flexpipe_rt *rt;
  int s;
  std::map<int64_t, std::vector<float>> scratch; // host copies, per mb
};

/// Runs the operation `name` on stage `s` for micro-batches [mb, mb + count),
/// then lets go of the outputs no later instance reads.
static void runOperation(flexpipe_rt *rt, const char *name, int64_t s,
                         int64_t mb, int64_t count, const char *attrs) {
  const std::string where = std::string("exec @") + name + " stage " +
                            std::to_string(s) + " mb " + std::to_string(mb);
  OperationFn fn = findOperation(name);
  if (!fn)
    rt->comm->abort("the program runs @" + std::string(name) +
                        " but no operation of that name was compiled in; "
                        "pass its source with flexpipe-compile --ops",
                    1);
  if (s < 0 || s >= rt->desc.stages || mb < 0 || count < 1 ||
      mb + count > rt->desc.microbatches)
    rt->comm->abort(where + " count " + std::to_string(count) +
                        " lies outside the schedule's stages or "
                        "micro-batches",
                    1);
  std::map<std::string, OpAttribute> attributes;
  if (std::string error = decodeOpAttributes(attrs ? attrs : "", attributes);
      !error.empty())
    rt->comm->abort(where + ": " + error, 1);
  OpContext::Place place;
  place.name = name;
  place.rank = rt->comm->rank();
  place.ranks = rt->comm->size();
  place.actor = rt->actor;
  place.replica = rt->replica;
  place.iteration = rt->iteration;
  place.stage = s;
  place.microbatch = mb;
  place.numMicrobatches = count;
  ExecHost host(rt, s);
  OpContext context(std::move(place), std::move(attributes), host);
  rt->traced(name, s, mb, -1, [&] {
    rt->hostTimed(rt->execSeconds, [&] { fn(context); });
    if (rt->iteration > rt->firstIteration)
      rt->execs += 1;
  });
  // An instance reads the outputs kept when it runs; these counted it.
  for (int64_t m = mb; m < mb + count; ++m) {
    const flexpipe_rt::Key key{static_cast<int>(s), static_cast<int>(m)};
    auto kept = rt->kept.find(key);
    if (kept == rt->kept.end())
      continue;
    if (--rt->readersLeft[key] <= 0)
      rt->kept.erase(kept);
  }
}

void flexpipe_rt_exec(flexpipe_rt *rt, const char *name, int64_t s, int64_t mb,
                      int64_t count, const char *attrs) {
  rt->instruction();
  rt->excluded([&] { runOperation(rt, name, s, mb, count, attrs); });
}
int64_t flexpipe_rt_exec_async(flexpipe_rt *rt, const char *name, int64_t s,
                               int64_t mb, int64_t count, const char *attrs) {
  rt->instruction();
  rt->excluded([&] { runOperation(rt, name, s, mb, count, attrs); });
  rt->tokens[rt->nextToken] = [rt, s, mb] {
    rt->traced(
        "WAIT", s, mb, -1, [] {}, "EXEC");
  };
  return rt->nextToken++;
}

void flexpipe_rt_all_gather(flexpipe_rt *rt, int64_t s, int64_t mb) {
  rt->instruction();
  rt->traced("ALL_GATHER", s, mb, -1, [&] { postAllGather(rt, s, mb)(); });
}
int64_t flexpipe_rt_all_gather_async(flexpipe_rt *rt, int64_t s, int64_t mb) {
  rt->instruction();
  rt->tokens[rt->nextToken] = [rt, s, mb, done = postAllGather(rt, s, mb)] {
    rt->traced("WAIT", s, mb, -1, done, "ALL_GATHER");
  };
  return rt->nextToken++;
}

} // extern "C"
