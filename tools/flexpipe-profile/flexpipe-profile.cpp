//===- flexpipe-profile.cpp - Measure this machine for the cost model -----===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Calibrates the cost model on the machine at hand with the CPU runtime's own
// layers and kernels (runtime/lib/Model.cpp): the forward, input-gradient and
// weight-gradient durations of a transformer block, the embedding and the
// head (final norm, LM head, loss) of every model given, at every micro-batch
// size that divides its global batch; the optimizer (Adam) step per
// parameter; the sgemm rate; how much each model's blocks slow down while
// several processes compute at once (beyond taking turns on the cores) and,
// where ranks outnumber the cores, the OS scheduler's time slice; with
// mpirun, the latency and bandwidth between two ranks and their gradient
// all-reduce; then calibration jobs: 1F1B specs compiled with
// flexpipe-compile and trained on one rank, which scale the layers to what
// they take inside a run, and over 2, 3, ... ranks, printed beside the
// tuner's simulation of the same job (a check, nothing fitted). Writes a
// cluster file (the paper's profiling database)
// that flexpipe-tune, flexpipe-compile and the passes read like any other
// (docs/CostModel.md, "Measured cluster"). With --check, compares such a
// file with the machine now instead (checkCluster).
//
// Plain C++ apart from the YAML readers, built with exceptions for CLI11.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Host.h"
#include "flexpipe/Runtime/Model.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Scheduling/Tuner.h"
#include "flexpipe/Support/Layout.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"

#include "../CliChecks.h"
#include "../ShellQuote.h"
#include "OutputFile.h"

#include <CLI/CLI.hpp>
#include <cblas.h>
#ifdef FLEXPIPE_PROFILE_MPI
#include "flexpipe/Runtime/Comm.h"
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <pthread.h>
#include <random>
#include <sstream>
#include <string>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace rt = flexpipe::rt;
namespace sched = flexpipe::sched;
using flexpipe::shellQuote;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

rt::Tensor randomTensor(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  rt::Tensor t(n);
  for (float &x : t)
    x = normal(gen);
  return t;
}

/// One layer kind at one shape.
struct Shape {
  sched::MeasuredLayer::Kind kind;
  rt::GptConfig config;
};

/// The runtime's configuration of `m`'s layers for `microBatch` sequences.
rt::GptConfig configOf(const sched::ModuleModel &m, int64_t microBatch) {
  rt::GptConfig c;
  c.hidden = m.hidden;
  c.heads = m.heads;
  c.seq = m.seq;
  c.vocab = std::max<int64_t>(m.vocab, 1);
  c.microBatch = microBatch;
  return c;
}

/// The first of `models` whose blocks have model `i`'s shape (hidden,
/// heads, seq; `i` itself where no earlier one has): the model whose
/// contention points serve that shape. Each shape's points are measured
/// and fitted once (measureContention, compileRoundJobs), the first
/// model's without a shape; a later model of one shape (only its layers
/// differ, or the same file twice) shares them: a second set, or a fitted
/// point with no point at 1 rank, is refused by every reader.
size_t shapeOwner(const std::vector<sched::ModelConfig> &models, size_t i) {
  const sched::ModuleModel &m = models[i].modules.front();
  for (size_t j = 0; j < i; ++j) {
    const sched::ModuleModel &other = models[j].modules.front();
    if (other.hidden == m.hidden && other.heads == m.heads &&
        other.seq == m.seq)
      return j;
  }
  return i;
}

const char *kindName(sched::MeasuredLayer::Kind kind) {
  switch (kind) {
  case sched::MeasuredLayer::Block:
    return "block";
  case sched::MeasuredLayer::Embedding:
    return "embedding";
  case sched::MeasuredLayer::Head:
    return "head";
  }
  return "?";
}

std::unique_ptr<rt::Layer> makeLayer(const Shape &s) {
  switch (s.kind) {
  case sched::MeasuredLayer::Block:
    return rt::makeBlock(s.config, 0);
  case sched::MeasuredLayer::Embedding:
    return rt::makeEmbedding(s.config);
  case sched::MeasuredLayer::Head:
    return rt::makeHead(s.config);
  }
  return nullptr;
}

/// Runs layers as a pipeline stage does: `copies` distinct layers of one
/// shape in a row, forwards of `inflight` micro-batches, then their input
/// and weight gradients, so that weights and kept activations are as
/// many as in a real run (a single layer on one micro-batch stays in cache
/// and runs faster than it does in a run). `times` gets the mean seconds of
/// one layer's forward, input gradient and weight gradient.
class LayerRunner {
public:
  LayerRunner(const Shape &s, int copies, int inflight)
      : batch(rt::makeBatch(s.config, 0, 0)), inflight(inflight) {
    for (int i = 0; i < copies; ++i)
      layers.push_back(makeLayer(s));
    const size_t n = s.config.tokens() * s.config.hidden;
    in = randomTensor(n, 1);
    dout = randomTensor(n, 2);
  }
  void round(std::array<double, 3> &times) {
    const size_t copies = layers.size();
    Clock::time_point t0 = Clock::now();
    for (int mb = 0; mb < inflight; ++mb) {
      rt::Tensor x = in;
      for (size_t l = 0; l < copies; ++l) {
        layers[l]->forward(mb, batch, x, out);
        std::swap(x, out);
      }
    }
    times[0] = since(t0);
    double igrad = 0, wgrad = 0;
    for (int mb = 0; mb < inflight; ++mb) {
      rt::Tensor d = dout;
      for (size_t l = copies; l-- > 0;) {
        t0 = Clock::now();
        layers[l]->inputGrad(mb, d, din, 1.0f);
        igrad += since(t0);
        t0 = Clock::now();
        layers[l]->weightGrad(mb);
        wgrad += since(t0);
        if (!din.empty())
          std::swap(d, din);
      }
    }
    const double ops = static_cast<double>(copies * inflight);
    times[0] /= ops;
    times[1] = igrad / ops;
    times[2] = wgrad / ops;
  }

private:
  std::vector<std::unique_ptr<rt::Layer>> layers;
  rt::Batch batch;
  int inflight;
  rt::Tensor in, dout, out, din;
};

/// Layer durations of `s` from rounds that take at least `seconds` in all
/// (and at least 2 rounds), after one warm-up round, appended to `samples`
/// (forward, input gradient, weight gradient).
void timeLayer(const Shape &s, double seconds,
               std::array<std::vector<double>, 3> &samples) {
  LayerRunner runner(s, s.kind == sched::MeasuredLayer::Block ? 4 : 1, 4);
  std::array<double, 3> times;
  runner.round(times);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < 2 || (since(start) < seconds && i < 100000); ++i) {
    runner.round(times);
    for (int k = 0; k < 3; ++k)
      samples[k].push_back(times[k]);
  }
}

/// Seconds per parameter of one Adam step over about a million parameters.
double timeOptimizer(double seconds) {
  std::vector<rt::Parameter> params(4);
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].name = "p" + std::to_string(i);
    params[i].value = randomTensor(1 << 18, 10 + i);
    params[i].grad = randomTensor(1 << 18, 20 + i);
  }
  std::vector<rt::Parameter *> list;
  size_t count = 0;
  for (rt::Parameter &p : params) {
    list.push_back(&p);
    count += p.value.size();
  }
  rt::Adam adam;
  std::vector<double> samples;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < 6 || (since(start) < seconds && i < 1000); ++i) {
    for (rt::Parameter &p : params) // apply clears the gradients
      std::fill(p.grad.begin(), p.grad.end(), 1e-3f);
    const Clock::time_point t0 = Clock::now();
    adam.apply(list);
    if (i > 0) // the first step allocates the moments
      samples.push_back(since(t0));
  }
  return median(samples) / static_cast<double>(count);
}

/// FLOP/s of one-threaded sgemm on 256 x 256 matrices.
double timeSgemm(double seconds) {
  const int n = 256;
  rt::Tensor a = randomTensor(n * n, 3), b = randomTensor(n * n, 4), c(n * n);
  std::vector<double> samples;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < 5 || (since(start) < seconds && i < 100000); ++i) {
    const Clock::time_point t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
    samples.push_back(since(t0));
  }
  return 2.0 * n * n * n / median(samples);
}

#ifdef FLEXPIPE_PROFILE_MPI
/// Half the round trip of `count` floats between ranks 0 and 1 through the
/// runtime's own Comm (the way rank executables wait), the median of
/// `rounds`.
double pingPong(rt::Comm &comm, size_t count, int rounds) {
  std::vector<float> buffer(std::max<size_t>(count, 1));
  const int me = comm.rank(), peer = me ^ 1;
  // Ranks in pairs (0, 1), (2, 3), ...; a last rank without a partner
  // waits for the others (as a pipeline's ranks wait, polling).
  if (peer >= comm.size())
    return 0;
  auto once = [&] {
    const size_t bytes = count * sizeof(float);
    if (me % 2 == 0) {
      comm.wait(comm.isend(buffer.data(), bytes, peer, 0));
      comm.wait(comm.irecv(buffer.data(), bytes, peer, 0));
    } else {
      comm.wait(comm.irecv(buffer.data(), bytes, peer, 0));
      comm.wait(comm.isend(buffer.data(), bytes, peer, 0));
    }
  };
  std::vector<double> samples;
  for (int i = 0; i < rounds + 2; ++i) {
    const Clock::time_point t0 = Clock::now();
    once();
    if (i >= 2)
      samples.push_back(since(t0) / 2);
  }
  return median(samples);
}

/// The runtime's gradient all-reduce (Comm::allreduceReplicas, as the rank
/// programs call it after each iteration) of `count` floats over all ranks,
/// seconds on this rank, the median of `rounds`; the ranks line up before
/// each.
double allReduce(rt::Comm &comm, size_t count, int rounds) {
  std::vector<float> values(std::max<size_t>(count, 1), 1.0f);
  const std::vector<rt::Comm::Floats> parts{{values.data(), values.size()}};
  std::vector<double> samples;
  for (int i = 0; i < rounds + 1; ++i) {
    double together = 0;
    comm.allreduceSum(&together, 1);
    const Clock::time_point t0 = Clock::now();
    comm.allreduceReplicas(parts);
    if (i >= 1)
      samples.push_back(since(t0));
  }
  return median(samples);
}

/// Under mpirun: the latency and bandwidth (4 MiB) of a message between
/// ranks 0 and 1 while every pair of ranks ping-pongs, ranks bound to cores
/// as rank executables bind them. The latency is that of a message of 64
/// KiB less its bytes over the bandwidth: a pipeline's messages (a tiny
/// GPT's micro-batch: 8 KiB) go by MPI's rendezvous protocol, whose fixed
/// cost (about 2 us here) an 8-byte message does not pay (0.2-0.4 us).
/// With two ranks, also the gradient all-reduce as a ring's step: the ring
/// takes 2 steps of latency and moves the bytes once (CostModel.h's
/// allReduceTime), so 1 KiB and 16 MiB give both.
int pingPongWorker(rt::Comm &comm) {
  comm.place(comm.rank());
  const size_t large = 1 << 20, medium = 1 << 14; // floats
  const double small = pingPong(comm, 2, 200);
  const double mid = pingPong(comm, medium, 100);
  const double big = pingPong(comm, large, 20);
  const double bandwidth = 4.0 * large / std::max(big - small, 1e-12);
  const double latency = std::max(small, mid - 4.0 * medium / bandwidth);
  if (comm.size() > 2) {
    double together = 0; // the partnerless rank waits for the pairs
    comm.allreduceSum(&together, 1);
    if (comm.rank() == 0)
      std::printf("latency_s %.9g\n", latency);
    return 0;
  }
  comm.setReplicaGroup(0);
  const size_t tiny = 256, gradients = 4 << 20; // floats
  const double reduceSmall = allReduce(comm, tiny, 50);
  const double reduceLarge = allReduce(comm, gradients, 8);
  if (comm.rank() == 0)
    std::printf("latency_s %.9g\nbandwidth_bytes_per_s %.9g\n"
                "allreduce_latency_s %.9g\n"
                "allreduce_bandwidth_bytes_per_s %.9g\n",
                latency, bandwidth, reduceSmall / 2,
                4.0 * static_cast<double>(gradients - tiny) /
                    std::max(reduceLarge - reduceSmall, 1e-12));
  return 0;
}
#endif

/// The scratch directory (ScratchDir) and the child process (runShell) an
/// interrupt removes and stops.
char interruptedScratch[64];
volatile sig_atomic_t runningChild = 0;

/// Removes what directory `dir` holds, recursively, with the calls a signal
/// handler may make: no allocation (opendir and LLVM's remove_directories
/// allocate, and an interrupt that came while the tool held malloc's lock,
/// in fork for one, hung it for good). Entries removed while the directory
/// is read may be skipped: it is read again until a pass removes nothing.
void removeContentsInHandler(int dir, int depth) {
  struct Entry { // the kernel's linux_dirent64
    uint64_t inode;
    int64_t offset;
    unsigned short length;
    unsigned char type;
    char name[1];
  };
  if (depth > 32)
    return;
  alignas(8) char buffer[2048];
  for (int pass = 0; pass < 64; ++pass) {
    bool removed = false;
    lseek(dir, 0, SEEK_SET);
    long n;
    while ((n = syscall(SYS_getdents64, dir, buffer, sizeof(buffer))) > 0)
      for (long at = 0; at < n;) {
        const auto *entry = reinterpret_cast<const Entry *>(buffer + at);
        at += entry->length;
        const char *name = entry->name;
        if (name[0] == '.' &&
            (name[1] == 0 || (name[1] == '.' && name[2] == 0)))
          continue;
        struct stat st;
        const bool directory =
            entry->type == DT_DIR ||
            (entry->type == DT_UNKNOWN &&
             fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
             S_ISDIR(st.st_mode));
        if (directory) {
          const int sub =
              openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
          if (sub >= 0) {
            removeContentsInHandler(sub, depth + 1);
            close(sub);
          }
          removed |= unlinkat(dir, name, AT_REMOVEDIR) == 0;
        } else {
          removed |= unlinkat(dir, name, 0) == 0;
        }
      }
    if (!removed)
      return;
  }
}

/// SIGINT, SIGTERM, SIGHUP: stops the child the tool waits for (with what
/// it started: a shell's launcher, mpirun and its ranks), removes
/// the scratch directory and ends the tool by the signal, so that its
/// caller sees it was interrupted (a shell: status 128 + the signal) and no
/// profile is written. Only async-signal-safe calls.
extern "C" void stopOnInterrupt(int sig) {
  if (runningChild > 0)
    kill(-runningChild, sig); // its process group (runShell)
  // The profile being written (writeCluster's temporary): it left a
  // complete one beside the old profile.
  rt::OutputFile::removeLiveTemporaries();
  if (interruptedScratch[0]) {
    const int dir =
        open(interruptedScratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (dir >= 0) {
      removeContentsInHandler(dir, 0);
      close(dir);
    }
    rmdir(interruptedScratch);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

constexpr int kInterrupts[] = {SIGINT, SIGTERM, SIGHUP};

void stopOnInterrupts() {
  struct sigaction action {};
  action.sa_handler = stopOnInterrupt;
  // One interrupt at a time: a second one waits (it would nest).
  sigemptyset(&action.sa_mask);
  for (int sig : kInterrupts)
    sigaddset(&action.sa_mask, sig);
  for (int sig : kInterrupts)
    sigaction(sig, &action, nullptr);
}

/// In a child process: the default interrupt handling, and an end when
/// the tool ends (however it ends).
void asChild(int deathSignal) {
  for (int sig : kInterrupts)
    std::signal(sig, SIG_DFL);
  prctl(PR_SET_PDEATHSIG, deathSignal);
}

/// Runs `command` under /bin/sh (unlike std::system, an interrupt stops it
/// and the tool), with its standard output in `out` when given; its exit
/// status, -1 when it did not start or was killed. The shell leads a process
/// group of its own, so that an interrupt reaches what it started (the shell
/// does not pass one on: run-mpi.sh, mpirun and the ranks ran on), and
/// reads no terminal (it is not the terminal's foreground group).
int runShell(const std::string &command, std::string *out = nullptr) {
  int fds[2];
  if (out && pipe(fds) != 0)
    return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    asChild(SIGTERM);
    setpgid(0, 0);
    const int none = open("/dev/null", O_RDONLY);
    if (none >= 0)
      dup2(none, STDIN_FILENO);
    if (out) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
    }
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char *>(nullptr));
    _exit(127);
  }
  if (pid > 0)
    setpgid(pid, pid); // (either side may run first)
  runningChild = pid > 0 ? pid : 0;
  if (out) {
    close(fds[1]);
    char chunk[4096];
    for (ssize_t n; (n = read(fds[0], chunk, sizeof chunk)) != 0;)
      if (n > 0)
        out->append(chunk, static_cast<size_t>(n));
      else if (errno != EINTR)
        break;
    close(fds[0]);
  }
  int status = -1;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  runningChild = 0;
  return pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Runs `command`, returning its standard output; empty on failure.
std::string capture(const std::string &command) {
  std::string out;
  if (runShell(command + " 2>/dev/null", &out) != 0)
    return {};
  return out;
}

/// The value after `key ` in a worker's output, or NaN.
double field(const std::string &text, const std::string &key) {
  std::istringstream in(text);
  std::string name;
  double value;
  while (in >> name >> value)
    if (name == key)
      return value;
  return std::nan("");
}

/// The mean iteration time a compiled job's run-mpi.sh prints, in seconds;
/// NaN when the run fails.
double runJob(const std::string &dir, int iterations,
              const std::string &profile) {
  // Its errors beside it (dir.run.log), for the message when it fails.
  std::string out;
  if (runShell(shellQuote(dir + "/run-mpi.sh") + " --iterations " +
                   std::to_string(iterations) + " --profile " +
                   shellQuote(profile) + " 2> " + shellQuote(dir + ".run.log"),
               &out) != 0)
    return std::nan("");
  const size_t at = out.find("mean iteration time ");
  if (at == std::string::npos)
    return std::nan("");
  return std::atof(out.c_str() + at + 20) * 1e-3;
}

/// The micro-batch sizes measured for `model`: those that divide its
/// global batch.
std::vector<int64_t> microBatchSizes(const sched::ModelConfig &model) {
  std::vector<int64_t> sizes;
  for (int64_t b = 1; b <= model.globalBatchSize; ++b)
    if (model.globalBatchSize % b == 0)
      sizes.push_back(b);
  return sizes;
}

/// The first of `models` before model `i` whose 1-rank calibration job at
/// micro-batch size `b` scales all of `i`'s layers (the same blocks'
/// shape, vocabulary and LM head, and `b` among its sizes): `i` runs none
/// there, as each layer is scaled once (foldRoundJobs; the same file
/// twice ran every job twice, and the last model's runs decided).
std::optional<size_t>
layersScaledBy(const std::vector<sched::ModelConfig> &models, size_t i,
               int64_t b) {
  const sched::ModuleModel &m = models[i].modules.front();
  for (size_t j = 0; j < i; ++j) {
    const sched::ModuleModel &o = models[j].modules.front();
    if (o.hidden == m.hidden && o.heads == m.heads && o.seq == m.seq &&
        o.vocab == m.vocab && o.lmHead == m.lmHead &&
        llvm::is_contained(microBatchSizes(models[j]), b))
      return j;
  }
  return std::nullopt;
}

/// What a calibration job measured: the iteration time and, per micro-batch
/// through every stage, the forward, input-gradient and weight-gradient
/// time the runtime timed (medians over the repeats).
struct JobResult {
  double iteration = 0;
  std::array<double, 3> stages{};
  /// The runtime's seconds per instruction beyond computations and waits
  /// (the run profile's instruction_s; 0 without one).
  double instruction = 0;
};

llvm::Error jobError(const std::string &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

/// Writes calibration job `job` of `model` (1F1B, one stage per rank) into
/// `dir` and compiles it with flexpipe-compile into rank executables.
llvm::Error compileJob(const sched::ClusterConfig &cluster,
                       const sched::Candidate &job,
                       const sched::ModelConfig &model,
                       const std::string &compiler, const std::string &dir) {
  const std::string spec = dir + ".mlir", clusterFile = dir + ".cluster.yaml",
                    modelPath = dir + ".model.yaml";
  {
    std::ofstream(spec) << sched::specText(job, model, "calibrate");
    std::ofstream(clusterFile) << sched::formatCluster(cluster);
    std::ofstream(modelPath) << sched::formatModel(model, model.microBatchSize,
                                                   model.globalBatchSize);
  }
  const std::string compile =
      shellQuote(compiler) + " " + shellQuote(spec) + " --model " +
      shellQuote(modelPath) + " --cluster " + shellQuote(clusterFile) +
      " --time-model=cost --emit=exe -o " + shellQuote(dir);
  if (runShell(compile + " > " + shellQuote(dir + ".log") + " 2>&1") == 0)
    return llvm::Error::success();
  std::ifstream log(dir + ".log");
  std::string first;
  std::getline(log, first);
  return jobError("cannot compile the calibration job (" + compile +
                  "): " + first);
}

/// One run of the job compiled into `dir`: its mean iteration time and the
/// stages' time for one micro-batch, summed over the stages.
llvm::Expected<JobResult> runJobOnce(const std::string &dir, int iterations) {
  const std::string profile = dir + ".profile.yaml";
  const double t = runJob(dir, iterations, profile);
  sched::Profile measured;
  // What failed, said here: the scratch directory is gone when the message
  // is read (it named a run-mpi.sh there, and the job's errors went to
  // /dev/null).
  auto failed = [&](std::string why) {
    std::ifstream log(dir + ".run.log");
    for (std::string line; std::getline(log, line);)
      if (line.find("flexpipe") != std::string::npos || why.empty())
        why = line;
    return jobError("the calibration job " +
                    llvm::sys::path::filename(dir).str() + " failed" +
                    (why.empty() ? std::string() : ": " + why));
  };
  if (!(t > 0))
    return failed("");
  if (llvm::Error error = sched::loadProfile(profile, measured))
    return failed(llvm::toString(std::move(error)));
  JobResult r;
  r.iteration = t;
  r.instruction = measured.instructionOverhead.value_or(0);
  for (const sched::Profile::Stage &st : measured.stages) {
    r.stages[0] += st.fwd;
    r.stages[1] += st.igrad;
    r.stages[2] += st.wgrad;
  }
  return r;
}

/// Iterations of a job whose iterations take `t` seconds for a run of about
/// `seconds` (2 to 40: the runtime times the iterations after the first).
int iterationsFor(double seconds, double t) {
  return std::clamp(static_cast<int>(seconds / t), 2, 40);
}

/// The calibration job of `model` over `pp` ranks: 1F1B, one stage per
/// rank, at its micro-batch size and global batch.
sched::Candidate calibrationJob(const sched::ModelConfig &model, int64_t pp) {
  const int64_t mbs = model.microBatchSize;
  return sched::oneFOneB(pp, 1, mbs, model.globalBatchSize / mbs, false);
}

/// Where model `i`'s 1-rank calibration job at micro-batch size `b` is.
std::string calibrationDir(const std::string &work, size_t i, int64_t b) {
  return work + "/model-" + std::to_string(i) + "-mbs" + std::to_string(b);
}

/// A calibration job run in rounds: 1F1B of model `model` over `ranks`
/// ranks at micro-batch size `microBatch`, compiled into `dir`, and its
/// runs so far.
struct RoundJob {
  size_t model = 0;
  int64_t microBatch = 1;
  int64_t ranks = 1;
  std::string dir;
  /// About how long a run takes once the first run has sized it (seconds).
  double seconds = 0.5;
  int iterations = 2;
  std::vector<JobResult> runs;
  /// The runtime's time for one micro-batch through every stage in run `r`.
  double stageTime(size_t r) const {
    return runs[r].stages[0] + runs[r].stages[1] + runs[r].stages[2];
  }
  /// The median over the runs of `of(run)`.
  template <typename Of> double medianOf(Of of) const {
    std::vector<double> values;
    for (const JobResult &r : runs)
      values.push_back(of(r));
    return median(values);
  }
};

/// Rounds of the calibration jobs in a profile (runRound): at the start,
/// after each of the three passes over the layers, after the contention
/// and after the optimizer step.
constexpr int kRounds = 6;

/// Writes the calibration jobs run in rounds into `work` and compiles them
/// (a 1F1B job's order does not depend on the costs, so the cluster may
/// still be unmeasured), per model in the order a round runs them:
///  - 1F1B on one rank at every micro-batch size measured, the model's own
///    size last (foldRoundJobs);
///  - 1F1B over k = 2 .. cores ranks at its own size, right after the
///    1-rank job it is compared with (fitRunContention); only for the
///    first model of its blocks' shape (shapeOwner), whose points those
///    jobs fit.
llvm::Expected<std::vector<RoundJob>>
compileRoundJobs(const sched::ClusterConfig &cluster,
                 const std::vector<sched::ModelConfig> &models, int64_t ranks,
                 const std::string &compiler, const std::string &work) {
  std::vector<RoundJob> jobs;
  for (size_t i = 0; i < models.size(); ++i) {
    const int64_t own = models[i].microBatchSize;
    std::vector<std::pair<int64_t, int64_t>> shapes; // (ranks, micro-batch)
    for (int64_t b : microBatchSizes(models[i]))
      if (b != own && !layersScaledBy(models, i, b))
        shapes.push_back({1, b});
    if (!layersScaledBy(models, i, own))
      shapes.push_back({1, own});
    const int64_t most = shapeOwner(models, i) != i
                             ? 1
                             : std::min({cluster.measured.coresPerNode, ranks,
                                         models[i].modules.front().layers});
    for (int64_t k = 2; k <= most; ++k)
      shapes.push_back({k, own});
    for (auto [r, b] : shapes) {
      sched::ModelConfig model = models[i];
      model.microBatchSize = b;
      RoundJob job;
      job.model = i;
      job.microBatch = b;
      job.ranks = r;
      job.dir = r == 1 ? calibrationDir(work, i, b)
                       : work + "/contention-" + std::to_string(i) + "-" +
                             std::to_string(r);
      // The model's own size gets longer runs.
      job.seconds = b == own ? 1.0 : 0.4;
      if (llvm::Error error = compileJob(cluster, calibrationJob(model, r),
                                         model, compiler, job.dir))
        return std::move(error);
      jobs.push_back(std::move(job));
    }
  }
  return jobs;
}

/// Runs every job of `jobs` once. A profile runs kRounds rounds spread over
/// its minutes, between its other measurements, and takes medians over
/// them: the machine's speed moves for longer than a job's runs take in a
/// row (in one profile the hidden-256 jobs on one rank at micro-batch 2
/// and 4, 7 and 3 runs in a row, about 25 s, read 8-13% faster than the
/// layers alone, where other profiles read them 0-11% slower, and every
/// candidate of that model was then priced about 13% fast).
llvm::Error runRound(std::vector<RoundJob> &jobs) {
  for (RoundJob &job : jobs) {
    llvm::Expected<JobResult> run = runJobOnce(job.dir, job.iterations);
    if (!run)
      return run.takeError();
    // A job's first run sizes its runs (the runtime times the iterations
    // after the first: at least one); one that took much less than a run
    // should is run again at that size (the tiny GPT's 1-rank job timed
    // over one iteration read 1.9 to 4.5 ms for a micro-batch).
    const int iterations = iterationsFor(job.seconds, run->iteration);
    if (job.runs.empty() && iterations > 2 * job.iterations) {
      run = runJobOnce(job.dir, iterations);
      if (!run)
        return run.takeError();
    }
    job.runs.push_back(*run);
    job.iterations = iterations;
  }
  return llvm::Error::success();
}

/// Calibration job `job` (its model at its micro-batch size over its ranks,
/// into its dir) compiled with flexpipe-compile and run `repeats` times
/// (runRound), each run about its seconds.
llvm::Error runCalibrationJob(const sched::ClusterConfig &cluster,
                              sched::ModelConfig model,
                              const std::string &compiler, RoundJob &job,
                              int repeats) {
  model.microBatchSize = job.microBatch;
  if (llvm::Error error = compileJob(cluster, calibrationJob(model, job.ranks),
                                     model, compiler, job.dir))
    return error;
  std::vector<RoundJob> jobs{std::move(job)};
  for (int i = 0; i < repeats; ++i)
    if (llvm::Error error = runRound(jobs))
      return error;
  job = std::move(jobs.front());
  return llvm::Error::success();
}

/// What the measured layers of `model` add up to for one micro-batch
/// through every stage (the stages cover each layer once), per kind.
std::array<double, 3> layerTotals(const sched::MachineProfile &measured,
                                  const sched::ModelConfig &model) {
  const sched::ModuleModel &m = model.modules.front();
  std::array<double, 3> total{};
  for (auto kind :
       {sched::MeasuredLayer::Block, sched::MeasuredLayer::Embedding,
        sched::MeasuredLayer::Head})
    if (std::optional<sched::MeasuredLayer> l =
            measured.layer(kind, m, model.microBatchSize)) {
      const double n = kind == sched::MeasuredLayer::Block ? m.layers : 1;
      total[0] += n * l->fwd;
      total[1] += n * l->igrad;
      total[2] += n * l->wgrad;
    }
  return total;
}

/// The simulated time of one micro-batch through every stage of `job`
/// (its actors' compute time over the micro-batches) on `cluster`, without
/// the per-instruction overhead (the runtime times the computations alone).
double simulatedStageTime(const sched::Candidate &job,
                          const sched::ModelConfig &model,
                          const sched::ClusterConfig &cluster, int64_t r) {
  sched::TuneOptions options;
  options.gpus = r;
  options.pp = {r};
  llvm::Expected<sched::TuneOptions> resolved =
      sched::resolveOptions(model, cluster, options);
  if (!resolved) {
    llvm::consumeError(resolved.takeError());
    return 0;
  }
  sched::ClusterConfig jobCluster = cluster;
  jobCluster.jobDevices = r;
  for (sched::MachineProfile::Contention &point :
       jobCluster.measured.contention)
    point.instruction = 0;
  sched::EvaluationDetail detail;
  if (!sched::evaluate(job, model, jobCluster, *resolved, &detail).ok())
    return 0;
  return detail.sim.busyTotal() /
         static_cast<double>(model.globalBatchSize / model.microBatchSize);
}

/// The contention point of `m`'s shape (`shaped`; else the points without
/// one) at k ranks; added where missing, with what the points around it
/// give there.
sched::MachineProfile::Contention &
contentionPoint(sched::ClusterConfig &cluster, const sched::ModuleModel &m,
                bool shaped, int64_t k) {
  std::vector<sched::MachineProfile::Contention> &points =
      cluster.measured.contention;
  auto matches = [&](const sched::MachineProfile::Contention &p) {
    return shaped ? p.hidden == m.hidden && p.heads == m.heads && p.seq == m.seq
                  : p.hidden == 0;
  };
  auto at = std::find_if(points.begin(), points.end(), [&](const auto &p) {
    return matches(p) && p.ranks == k;
  });
  if (at != points.end())
    return *at;
  sched::MachineProfile::Contention point;
  point.ranks = k;
  if (shaped) {
    point.hidden = m.hidden;
    point.heads = m.heads;
    point.seq = m.seq;
  }
  sched::ClusterConfig job = cluster;
  job.jobDevices = k;
  job.devicesPerNode = std::max(job.devicesPerNode, k);
  point.slowdown = sched::computeSlowdown(job, shaped ? &m : nullptr,
                                          static_cast<double>(k));
  // The overhead per instruction belongs to the points without a shape
  // (the reader refuses it on a shaped one: a profile of a second model
  // whose contention could not be measured wrote one).
  if (!shaped)
    point.instruction = sched::instructionOverhead(job);
  // Kept in increasing ranks within the shape's points.
  at = std::find_if(points.begin(), points.end(),
                    [&](const auto &p) { return matches(p) && p.ranks > k; });
  return *points.insert(at, point);
}

/// How much longer (relative) the fastest contention must make a
/// calibration job's computations in the simulation for its run to fit the
/// contention: the rounds' ratios scatter by a few percent, and a job that
/// cannot tell 1x from 4x by more would fit its noise.
constexpr double kLeastOverlap = 0.1;

/// The contention at `k` ranks that module `m`'s layers suffer in a real
/// run, where each rank has a core (k <= cores): in each round, 1F1B of
/// `model` over k ranks ran right after it ran on one rank, and the
/// runtime's time for one micro-batch through every stage in both gives a
/// ratio (`ratio`, the median over the rounds); the slowdown is the one at
/// which the simulation of the k-rank job (`together`) computes as much
/// longer than alone as the run did, since only part of the ranks'
/// computations overlap. Blocks run in loops by processes at once
/// (measureContention) keep their working set in the caches: the tiny
/// GPT's blocks read 1.00x at 2 processes, where its 2-rank runs computed
/// 6-12% longer than its 1-rank ones. Sets the point of `m`'s shape
/// (`shaped`; else the points without one) at k, added where missing. A
/// job whose ranks hardly compute at once (one micro-batch: one rank at a
/// time) says nothing about the contention: there the loops' figure stays
/// (any ratio over 1, noise, had fitted the cap of 4x); false then.
bool fitRunContention(sched::ClusterConfig &cluster,
                      const sched::ModelConfig &model, bool shaped, int64_t k,
                      double measuredRatio, const sched::Candidate &together) {
  sched::MachineProfile::Contention &point =
      contentionPoint(cluster, model.modules.front(), shaped, k);
  const double loops = point.slowdown;
  point.slowdown = 1;
  const double free = simulatedStageTime(together, model, cluster, k);
  auto simulatedRatio = [&](double slowdown) {
    point.slowdown = slowdown;
    return free > 0 ? simulatedStageTime(together, model, cluster, k) / free
                    : 0;
  };
  // The simulated ratio grows with the slowdown: bisect in [1, 4] (1 when
  // the runs computed no longer on k ranks, 4 at most).
  double lo = 1, hi = 4;
  const double most = free > 0 ? simulatedRatio(hi) : 1;
  if (most < 1 + kLeastOverlap) {
    point.slowdown = loops;
    return false;
  }
  if (measuredRatio <= 1)
    hi = 1;
  else if (most <= measuredRatio)
    lo = hi;
  while (hi - lo > 1e-4) {
    const double mid = (lo + hi) / 2;
    (simulatedRatio(mid) < measuredRatio ? lo : hi) = mid;
  }
  point.slowdown = lo;
  return true;
}

/// The runtime's overhead per instruction (beyond computations, waits and
/// registered operations) that `job`, the first model's, measured over its
/// ranks: the median over its runs, into the point without a shape there
/// (Contention::instruction). Measured, not fitted: each run's runtime
/// reports it.
void recordInstructionOverhead(sched::ClusterConfig &cluster,
                               const sched::ModelConfig &model,
                               const RoundJob &job) {
  if (job.runs.empty())
    return;
  contentionPoint(cluster, model.modules.front(), false, job.ranks)
      .instruction =
      job.medianOf([](const JobResult &r) { return r.instruction; });
}

/// Points without a shape at more ranks than any job ran (a model of fewer
/// layers than --ranks) take the overhead per instruction of the most
/// ranks measured, as interpolation does beyond the last point.
void carryInstructionOverhead(sched::ClusterConfig &cluster) {
  const sched::MachineProfile::Contention *last = nullptr;
  for (const sched::MachineProfile::Contention &p : cluster.measured.contention)
    if (p.hidden == 0 && p.instruction > 0 && (!last || p.ranks > last->ranks))
      last = &p;
  if (!last)
    return;
  const double instruction = last->instruction;
  const int64_t ranks = last->ranks;
  for (sched::MachineProfile::Contention &p : cluster.measured.contention)
    if (p.hidden == 0 && p.ranks > ranks && p.instruction == 0)
      p.instruction = instruction;
}

/// Folds the calibration jobs' rounds into `cluster`:
///  - each kind of every model's layers at each micro-batch size is scaled
///    by what its 1-rank job measured in a real run (the median over the
///    rounds) over what those layers add up to: the layers measured alone
///    run faster or slower in a run (its working set, the runtime's own
///    work around each computation), and how far depends on the size
///    (scaled by a run at micro-batch 1, the tiny GPT's blocks at 4 ran
///    their F and I 26-29% slower in a run than priced);
///  - then, per model, the contention in runs at 2 .. cores ranks
///    (fitRunContention) from its k-rank jobs against its 1-rank job at its
///    own size;
///  - the runtime's overhead per instruction the first model's jobs at its
///    own size measured on 1 .. cores ranks, into the points without a
///    shape (recordInstructionOverhead).
void foldRoundJobs(sched::ClusterConfig &cluster,
                   const std::vector<sched::ModelConfig> &models,
                   const std::vector<RoundJob> &jobs,
                   const std::function<void(std::string)> &progress) {
  sched::MachineProfile &measured = cluster.measured;
  // Per model, by micro-batch size.
  std::vector<std::map<int64_t, std::string>> scales(models.size());
  std::vector<std::string> slowdowns(models.size());
  for (size_t i = 0; i < models.size(); ++i)
    slowdowns[i] = models[i].name + ", computing in runs over k ranks "
                                    "against 1 (the slowdown fitted):";
  for (const RoundJob &job : jobs) {
    if (job.ranks != 1 || job.runs.empty())
      continue;
    sched::ModelConfig model = models[job.model];
    model.microBatchSize = job.microBatch;
    const sched::ModuleModel &m = model.modules.front();
    const std::array<double, 3> alone = layerTotals(measured, model);
    std::array<double, 3> scale;
    for (int k = 0; k < 3; ++k)
      scale[k] = alone[k] > 0 ? job.medianOf([k](const JobResult &r) {
        return r.stages[k];
      }) / alone[k]
                              : 1.0;
    for (sched::MeasuredLayer &l : measured.layers)
      if (l.microBatch == job.microBatch && l.hidden == m.hidden &&
          l.seq == m.seq &&
          (l.kind == sched::MeasuredLayer::Block ? l.heads == m.heads
                                                 : l.vocab == m.vocab)) {
        l.fwd *= scale[0];
        l.igrad *= scale[1];
        l.wgrad *= scale[2];
      }
    char part[96];
    std::snprintf(part, sizeof part, " %lld: %.2fx %.2fx %.2fx",
                  static_cast<long long>(job.microBatch), scale[0], scale[1],
                  scale[2]);
    scales[job.model][job.microBatch] = part;
    if (job.model == 0 && job.microBatch == models[0].microBatchSize)
      recordInstructionOverhead(cluster, models[0], job);
  }
  for (size_t i = 0; i < models.size(); ++i) {
    std::string line = models[i].name + ", 1F1B on 1 rank";
    if (scales[i].empty())
      line += ": none of its own";
    else
      line += ", its layers' time in a run over alone (F, I, W) at "
              "micro-batch";
    for (const auto &[b, part] : scales[i])
      line += part;
    std::string shared;
    for (int64_t b : microBatchSizes(models[i]))
      if (std::optional<size_t> j = layersScaledBy(models, i, b))
        shared += (shared.empty() ? "" : ", ") + std::to_string(b) + " (" +
                  models[*j].name + "'s)";
    if (!shared.empty())
      line += "; its layers were scaled at micro-batch " + shared;
    progress(line);
  }

  for (const RoundJob &job : jobs) {
    if (job.ranks == 1)
      continue;
    const sched::ModelConfig &model = models[job.model];
    // The model's 1-rank job at its own size, which ran just before.
    auto alone = std::find_if(jobs.begin(), jobs.end(), [&](const auto &j) {
      return j.model == job.model && j.ranks == 1 &&
             j.microBatch == model.microBatchSize;
    });
    std::vector<double> ratios;
    for (size_t r = 0; r < job.runs.size() && r < alone->runs.size(); ++r)
      if (alone->stageTime(r) > 0)
        ratios.push_back(job.stageTime(r) / alone->stageTime(r));
    const double ratio = ratios.empty() ? 1.0 : median(ratios);
    // (Only the first model of a shape ran k-rank jobs: compileRoundJobs.)
    const bool shaped = job.model > 0;
    const bool fits = fitRunContention(cluster, model, shaped, job.ranks, ratio,
                                       calibrationJob(model, job.ranks));
    if (!shaped)
      recordInstructionOverhead(cluster, model, job);
    const double fitted = sched::computeSlowdown(
        cluster, shaped ? &model.modules.front() : nullptr,
        static_cast<double>(job.ranks));
    char part[96];
    std::snprintf(part, sizeof part, " %lld: %.2fx (%.2fx%s)",
                  static_cast<long long>(job.ranks), ratio, fitted,
                  fits ? "" : ", the loops': its ranks hardly compute at once");
    slowdowns[job.model] += part;
  }
  for (size_t i = 0; i < models.size(); ++i)
    if (slowdowns[i].back() != ':')
      progress(slowdowns[i]);
  std::string overheads;
  for (const sched::MachineProfile::Contention &p : measured.contention)
    if (p.hidden == 0 && p.instruction > 0) {
      char part[64];
      std::snprintf(part, sizeof part, "%s %lld: %.2f us",
                    overheads.empty() ? "" : ",",
                    static_cast<long long>(p.ranks), p.instruction * 1e6);
      overheads += part;
    }
  if (!overheads.empty())
    progress(models.front().name +
             ", the runtime's overhead per instruction in runs over k "
             "ranks:" +
             overheads);
}

/// Folds the calibration jobs' rounds into `cluster` (foldRoundJobs), then
/// runs 1F1B of the first model over 2, 3, ... `ranks` ranks, each printed
/// beside the tuner's simulation of the same job: a check. (Fitting a
/// per-iteration overhead to them, as flexpipe-profile once did, followed
/// these jobs' noise: docs/Tuning.md.) Returns an error, or empty.
std::string calibrate(sched::ClusterConfig &cluster,
                      const std::vector<sched::ModelConfig> &models,
                      const std::vector<RoundJob> &rounds, int64_t ranks,
                      const std::string &compiler, const std::string &work,
                      const std::function<void(std::string)> &progress) {
  foldRoundJobs(cluster, models, rounds, progress);

  // Jobs of r ranks: a check of the model, printed, not fitted; beyond the
  // cores (no calibration job there) they measure the runtime's overhead
  // per instruction at r ranks, which the simulation then takes.
  const sched::ModelConfig &model = models.front();
  for (int64_t r = 2; r <= std::min(ranks, model.modules.front().layers); ++r) {
    RoundJob run;
    run.microBatch = model.microBatchSize;
    run.ranks = r;
    run.dir = work + "/model-0-" + std::to_string(r);
    run.seconds = 0.8;
    if (llvm::Error error = runCalibrationJob(cluster, model, compiler, run, 5))
      return llvm::toString(std::move(error));
    const double iteration =
        run.medianOf([](const JobResult &j) { return j.iteration; });
    if (r > cluster.measured.coresPerNode)
      recordInstructionOverhead(cluster, model, run);
    sched::TuneOptions options;
    options.gpus = r;
    options.pp = {r};
    llvm::Expected<sched::TuneOptions> resolved =
        sched::resolveOptions(model, cluster, options);
    if (!resolved)
      return llvm::toString(resolved.takeError());
    sched::ClusterConfig jobCluster = cluster;
    jobCluster.jobDevices = r;
    const double simulated =
        sched::evaluate(calibrationJob(model, r), model, jobCluster, *resolved)
            .iterationTime;
    char line[240];
    std::snprintf(
        line, sizeof line,
        "%s, 1F1B over %lld ranks: %.3f ms per iteration, simulated "
        "%.3f ms (%+.1f%%); runtime overhead %.2f us per instruction",
        model.name.c_str(), static_cast<long long>(r), iteration * 1e3,
        simulated * 1e3, (simulated / iteration - 1) * 100,
        run.medianOf([](const JobResult &j) { return j.instruction; }) * 1e6);
    progress(line);
  }
  carryInstructionOverhead(cluster);
  return {};
}

/// Rounds per second of `copies` copies of `shape`'s layer (one
/// micro-batch) in each of `k` processes started together and run for
/// `seconds`, the slowest process's; 0 on failure (or rounds longer than
/// `seconds`). With more processes than `cores`, process i is bound to core
/// coreOf(i, cores), as the runtime binds ranks that share cores.
double concurrentRate(const Shape &shape, int copies, int k, int64_t cores,
                      double seconds) {
  int ready[2], go[2], result[2];
  if (pipe(ready) != 0 || pipe(go) != 0 || pipe(result) != 0)
    return 0;
  std::vector<pid_t> children;
  for (int i = 0; i < k; ++i) {
    const pid_t pid = fork();
    if (pid < 0)
      break;
    if (pid == 0) {
      asChild(SIGKILL);
      if (k > cores && !rt::bindToCore(flexpipe::coreOf(i, cores)).empty())
        _exit(1);
      LayerRunner runner(shape, copies, 1);
      std::array<double, 3> times;
      runner.round(times);
      char c = 'r';
      if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
        _exit(1);
      // Every process runs until the same deadline; only rounds that end
      // before it count, so that all ran at once.
      const Clock::time_point start = Clock::now();
      int rounds = 0;
      double last = 0;
      for (;;) {
        runner.round(times);
        const double now = since(start);
        if (now > seconds)
          break;
        ++rounds;
        last = now;
      }
      const double rate = rounds > 0 ? rounds / last : 0;
      _exit(write(result[1], &rate, sizeof rate) == sizeof rate ? 0 : 1);
    }
    children.push_back(pid);
  }
  close(ready[1]);
  close(go[0]);
  close(result[1]);
  bool ok = static_cast<int>(children.size()) == k;
  char c;
  for (size_t i = 0; ok && i < children.size(); ++i)
    ok = read(ready[0], &c, 1) == 1;
  for (size_t i = 0; ok && i < children.size(); ++i)
    ok = write(go[1], "g", 1) == 1;
  close(go[1]);
  double slowest = std::numeric_limits<double>::infinity();
  for (size_t i = 0; ok && i < children.size(); ++i) {
    double rate;
    ok = read(result[0], &rate, sizeof rate) == sizeof rate && rate > 0;
    slowest = std::min(slowest, rate);
  }
  close(ready[0]);
  close(result[0]);
  for (pid_t pid : children) {
    if (!ok)
      kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  return ok ? slowest : 0;
}

/// fork(), the child (0 returned) bound to core 0 and killed with its
/// parent; it exits with 1 where it cannot be bound.
pid_t forkOnCoreZero() {
  const pid_t pid = fork();
  if (pid == 0) {
    asChild(SIGKILL);
    if (!rt::bindToCore(0).empty())
      _exit(1);
  }
  return pid;
}

/// How long the OS scheduler lets a process compute on a shared core while
/// another one is ready there: two processes bound to one core spin for
/// `seconds`, each counting the stretches it ran (a gap of more than 20 us
/// between its clock readings ends one); their time over their stretches.
/// 0 when it cannot be measured (no binding here, or under the shortest
/// slice a cluster file may give).
double measureTimeSlice(double seconds) {
  int result[2];
  if (pipe(result) != 0)
    return 0;
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    const pid_t pid = forkOnCoreZero();
    if (pid < 0)
      break;
    if (pid == 0) {
      const Clock::time_point start = Clock::now();
      Clock::time_point last = start;
      double ran = 0, stretch = 0;
      long stretches = 1;
      for (double now = 0; now < seconds;) {
        const Clock::time_point t = Clock::now();
        const double gap = std::chrono::duration<double>(t - last).count();
        if (gap > 20e-6) {
          ran += stretch;
          stretch = 0;
          ++stretches;
        } else {
          stretch += gap;
        }
        last = t;
        now = std::chrono::duration<double>(t - start).count();
      }
      const double mean = (ran + stretch) / static_cast<double>(stretches);
      _exit(write(result[1], &mean, sizeof mean) == sizeof mean ? 0 : 1);
    }
    children.push_back(pid);
  }
  close(result[1]);
  std::vector<double> means;
  for (size_t i = 0; i < children.size(); ++i) {
    double mean;
    if (read(result[0], &mean, sizeof mean) == sizeof mean && mean > 0)
      means.push_back(mean);
  }
  close(result[0]);
  for (pid_t pid : children)
    waitpid(pid, nullptr, 0);
  if (means.size() != 2)
    return 0;
  // Shorter than any OS scheduler's slice: a measurement that went wrong.
  const double slice = (means[0] + means[1]) / 2;
  return slice < sched::MachineProfile::kMinTimeSlice ? 0 : slice;
}

/// Seconds per round (a micro-batch forward and backward through `copies`
/// blocks of `shape`) of a process bound to core 0: alone (`pair` false),
/// or handing the core to a second such process after each round and
/// taking it back (a round and a hand-over each, the pair's time over its
/// rounds). 0 on failure.
double roundsOnOneCore(const Shape &shape, int copies, bool pair, int rounds) {
  int result[2], ab[2], ba[2];
  if (pipe(result) != 0 || pipe(ab) != 0 || pipe(ba) != 0)
    return 0;
  std::vector<pid_t> children;
  for (int i = 0; i < (pair ? 2 : 1); ++i) {
    const pid_t pid = forkOnCoreZero();
    if (pid < 0)
      break;
    if (pid == 0) {
      LayerRunner runner(shape, copies, 1);
      std::array<double, 3> times;
      runner.round(times); // warm
      char c = 't';
      if (i == 1) { // takes its turn when handed the core, hands it back
        for (int r = 0; r < rounds; ++r) {
          if (read(ab[0], &c, 1) != 1)
            _exit(1);
          runner.round(times);
          if (write(ba[1], &c, 1) != 1)
            _exit(1);
        }
        _exit(0);
      }
      const Clock::time_point start = Clock::now();
      for (int r = 0; r < rounds; ++r) {
        runner.round(times);
        if (pair && (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1))
          _exit(1);
      }
      const double each = since(start) / (pair ? 2.0 : 1.0) / rounds;
      _exit(write(result[1], &each, sizeof each) == sizeof each ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (int fd : {result[1], ab[0], ab[1], ba[0], ba[1]})
    close(fd);
  double each = 0;
  if (read(result[0], &each, sizeof each) != sizeof each)
    each = 0;
  close(result[0]);
  for (pid_t pid : children) {
    if (!(each > 0))
      kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  return each;
}

/// What a computation takes longer right after its process took a shared
/// core over from another (MachineProfile::handoff): two processes bound to
/// one core, each holding a stage's `copies` blocks of `shape`, hand each
/// other the core after every micro-batch through them, against one process
/// running the same rounds alone right before; the median of 3 such pairs,
/// in seconds per hand-over, at least 0. The switch alone is microseconds;
/// the rest is the caches, which the other process's blocks filled.
double measureHandoff(const Shape &shape, int copies, double seconds) {
  std::vector<double> handoffs;
  for (int i = 0; i < 3; ++i) {
    const double alone = roundsOnOneCore(shape, copies, false, 3);
    if (!(alone > 0))
      return 0;
    const int rounds = std::clamp(static_cast<int>(seconds / alone), 10, 2000);
    const double single = roundsOnOneCore(shape, copies, false, rounds);
    const double taking = roundsOnOneCore(shape, copies, true, rounds / 2);
    if (!(single > 0 && taking > 0))
      return 0;
    handoffs.push_back(std::max(0.0, taking - single));
  }
  return median(handoffs);
}

/// measureHandoff for `model`'s blocks, as many as a stage holds at
/// `ranks` ranks, printed.
double measureHandoffOf(const sched::ModelConfig &model, int64_t ranks,
                        double seconds,
                        const std::function<void(std::string)> &progress) {
  const sched::ModuleModel &m = model.modules.front();
  const int copies =
      static_cast<int>(std::max<int64_t>(1, (m.layers + ranks - 1) / ranks));
  const double handoff = measureHandoff(
      {sched::MeasuredLayer::Block, configOf(m, model.microBatchSize)}, copies,
      std::max(0.1, 2 * seconds));
  progress(model.name +
           ", a computation right after its rank took a "
           "shared core over: " +
           std::to_string(handoff * 1e6) + " us longer");
  return handoff;
}

/// How much each model's blocks slow down while 2, 3, ... `ranks`
/// processes compute at once, beyond taking turns on `cores` cores: the
/// contention points (the first model's without a shape, the others' with
/// theirs), at least 1.
void measureContention(sched::MachineProfile &measured,
                       const std::vector<sched::ModelConfig> &models,
                       int64_t ranks, double seconds,
                       const std::function<void(std::string)> &progress) {
  measured.contention.clear();
  for (size_t i = 0; i < models.size(); ++i) {
    const sched::ModelConfig &model = models[i];
    const sched::ModuleModel &m = model.modules.front();
    const Shape shape{sched::MeasuredLayer::Block,
                      configOf(m, model.microBatchSize)};
    sched::MachineProfile::Contention point;
    // Each shape's points once (a second set was refused by every
    // reader); the first model's serve its shape too (they have none).
    if (const size_t owner = shapeOwner(models, i); owner != i) {
      progress(model.name + ": its blocks' shape (hidden " +
               std::to_string(m.hidden) + ", heads " + std::to_string(m.heads) +
               ", seq " + std::to_string(m.seq) +
               ") has its contention points already, " + models[owner].name +
               "'s");
      continue;
    }
    if (i > 0) {
      point.hidden = m.hidden;
      point.heads = m.heads;
      point.seq = m.seq;
    }
    measured.contention.push_back(point);
    const int64_t cores = measured.coresPerNode;
    // Each slowdown is the median of 3 pairs, each the rate alone
    // measured just before the rate among k: one process slowed by
    // something else on the machine made a single measurement read 1.69x
    // for hidden 256 at 2 processes where the others read 1.0-1.16x
    // (docs/Tuning.md, run (k)); and this machine's speed moves by about
    // 10% from one second to the next (one tiny-GPT job: 12.8-15.4 ms per
    // iteration in 8 runs), which medians taken apart (alone first, then
    // each k) read as contention: the tiny GPT's blocks read 1.15x at 2 in
    // one profile, 1.01x in the next.
    // Each process holds the blocks of one stage of a pipeline over the k
    // ranks (the layers over k, rounded up): how much they slow each other
    // depends on how much memory they sweep. With four blocks each
    // whatever k, hidden 256 read 1.16x at 4 processes, and its 4-rank
    // pipelines (2 blocks a rank) ran up to 21% faster than priced
    // (docs/Tuning.md, run (o)); held so, it read 1.07x and those pipelines
    // came within 15% (run (p)).
    auto ratio = [&](int64_t k) {
      const int copies =
          static_cast<int>(std::max<int64_t>(1, (m.layers + k - 1) / k));
      std::vector<double> ratios;
      for (int i = 0; i < 3; ++i) {
        const double alone = concurrentRate(shape, copies, 1, cores, seconds);
        const double together =
            alone > 0 ? concurrentRate(shape, copies, static_cast<int>(k),
                                       cores, seconds)
                      : 0;
        if (!(together > 0))
          return 0.0;
        ratios.push_back(alone / together);
      }
      return median(ratios);
    };
    std::string text = model.name + ", blocks computing at once, slowdown:";
    bool any = false;
    for (int64_t k = 2; k <= ranks; ++k) {
      const double slower = ratio(k);
      if (!(slower > 0)) {
        progress(model.name + ": its blocks take longer than " +
                 std::to_string(seconds) + " s; no contention measured");
        break;
      }
      // The busiest core's processes take turns on it.
      const double turns =
          k > cores ? static_cast<double>((k + cores - 1) / cores) : 1.0;
      point.ranks = k;
      point.slowdown = std::max(1.0, slower / turns);
      measured.contention.push_back(point);
      char part[64];
      std::snprintf(part, sizeof part, " %lld: %.2fx",
                    static_cast<long long>(k), point.slowdown);
      text += part;
      any = true;
    }
    if (any) // else the line above says why not
      progress(text);
  }
}

/// Times every module's block, embedding and head at every micro-batch size
/// that divides its model's global batch (each shape once) into `measured`;
/// calls `afterPass` after each pass over the shapes.
void measureLayers(const std::vector<sched::ModelConfig> &models,
                   double seconds, sched::MachineProfile &measured,
                   const std::function<void(std::string)> &progress,
                   const std::function<void()> &afterPass) {
  // The shapes: every module's block, embedding and head at every
  // micro-batch size that divides its global batch (each shape once).
  std::vector<Shape> shapes;
  std::map<std::string, bool> seen;
  for (const sched::ModelConfig &model : models)
    for (const sched::ModuleModel &m : model.modules)
      for (int64_t b : microBatchSizes(model)) {
        const rt::GptConfig c = configOf(m, b);
        std::vector<sched::MeasuredLayer::Kind> kinds = {
            sched::MeasuredLayer::Block};
        if (m.vocab > 0)
          kinds.push_back(sched::MeasuredLayer::Embedding);
        if (m.hasHead())
          kinds.push_back(sched::MeasuredLayer::Head);
        for (auto kind : kinds) {
          std::ostringstream key;
          key << kindName(kind) << ' ' << c.hidden << ' ' << c.seq << ' '
              << (kind == sched::MeasuredLayer::Block ? c.heads : c.vocab)
              << ' ' << b;
          if (seen.emplace(key.str(), true).second)
            shapes.push_back({kind, c});
        }
      }

  // Three passes over the shapes, each a third of the time, and the median
  // of all rounds: shapes whose working set leaves the core's cache (the
  // tiny GPT's block from micro-batch 4) read 0.29-0.45 ms for one forward
  // in three profiles in a row measured in one pass each (the sizes below
  // stable to 3%): one moment of the machine's noise decided the figure.
  constexpr int kPasses = 3;
  std::vector<std::array<std::vector<double>, 3>> samples(shapes.size());
  for (int pass = 0; pass < kPasses; ++pass) {
    // (From the first: the progress began at "pass 2 of 3".)
    progress("layers, pass " + std::to_string(pass + 1) + " of " +
             std::to_string(kPasses) + " over " +
             std::to_string(shapes.size()) + " shapes");
    for (size_t i = 0; i < shapes.size(); ++i)
      timeLayer(shapes[i], seconds / kPasses, samples[i]);
    afterPass();
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape &s = shapes[i];
    sched::MeasuredLayer l;
    l.kind = s.kind;
    l.hidden = s.config.hidden;
    l.seq = s.config.seq;
    if (s.kind == sched::MeasuredLayer::Block)
      l.heads = s.config.heads;
    else
      l.vocab = s.config.vocab;
    l.microBatch = s.config.microBatch;
    l.fwd = median(samples[i][0]);
    l.igrad = median(samples[i][1]);
    l.wgrad = median(samples[i][2]);
    measured.layers.push_back(l);
    char line[200];
    std::snprintf(line, sizeof line,
                  "[%zu/%zu] %-9s hidden %lld seq %lld micro-batch %lld: "
                  "F %.3f ms, I %.3f ms, W %.3f ms",
                  i + 1, shapes.size(), kindName(s.kind),
                  static_cast<long long>(l.hidden),
                  static_cast<long long>(l.seq),
                  static_cast<long long>(l.microBatch), l.fwd * 1e3,
                  l.igrad * 1e3, l.wgrad * 1e3);
    progress(line);
  }
}

/// The rate the analytic fallback (shapes not measured) prices FLOPs at:
/// the share of the sgemm rate the first model's block reaches in a run.
void setFallbackRate(sched::ClusterConfig &cluster,
                     const sched::ModelConfig &model) {
  const sched::ModuleModel &m = model.modules.front();
  const sched::StageFlops f = sched::stageFlops({&m, 1, false, false}, 1);
  if (std::optional<sched::MeasuredLayer> l =
          cluster.measured.layer(sched::MeasuredLayer::Block, m, 1)) {
    const double rate =
        (f.fwd + f.igrad + f.wgrad) / (l->fwd + l->igrad + l->wgrad);
    cluster.efficiency = std::min(1.0, rate / cluster.peakFlops);
  }
}

struct Options {
  std::vector<std::string> models;
  std::string base, output = "flexpipe-profile.yaml", name;
  int64_t ranks = 0;
  double seconds = 0.2;
  std::string mpirun = "mpirun", compiler;
  /// --mpirun was given: its failure stops the profile (the default's only
  /// leaves the messages unmeasured, on a machine without MPI).
  bool mpirunGiven = false;
  bool jobs = true;
  bool quiet = false;
  // --check: a cluster file to compare with this machine now.
  std::string check;
  double tolerance = 0.1;
  // The ping-pong worker (under mpirun; not shown in --help).
  std::string worker;
};

/// This executable's path (the ping-pong worker and the flexpipe-compile
/// beside it).
std::string selfPath(const char *argv0) {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, n) : std::string(argv0);
}

/// The flexpipe-compile the calibration jobs use: --compiler, else the one
/// beside this tool (`self`).
std::string compilerPath(const Options &o, const std::string &self) {
  return !o.compiler.empty()
             ? o.compiler
             : self.substr(0, self.find_last_of('/') + 1) + "flexpipe-compile";
}

/// With mpirun: the latency and bandwidth between two ranks and their
/// gradient all-reduce (this tool's ping-pong worker, placed as mpirun
/// places rank executables) into `cluster`, and the latency of a message
/// while 3 .. `ranks` ranks ping-pong in pairs into `latencyAt` (by ranks).
/// Returns whether mpirun ran (without it, no calibration jobs either).
bool measureMessages(sched::ClusterConfig &cluster, const Options &o,
                     const std::string &self, int64_t ranks,
                     std::map<int64_t, double> &latencyAt,
                     const std::function<void(std::string)> &progress) {
#ifdef FLEXPIPE_PROFILE_MPI
  if (o.mpirun == "none")
    return false;
  const std::string launch =
      (getuid() == 0 ? "OMPI_ALLOW_RUN_AS_ROOT=1 "
                       "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                     : "") +
      shellQuote(o.mpirun) + " --oversubscribe -np ";
  const std::string out =
      capture(launch + "2 " + shellQuote(self) + " --worker ping-pong");
  const double latency = field(out, "latency_s"),
               bandwidth = field(out, "bandwidth_bytes_per_s");
  if (!(latency > 0 && bandwidth > 0)) {
    std::fprintf(stderr,
                 o.mpirunGiven ? "flexpipe-profile: error: --mpirun '%s' "
                                 "failed to run the message measurement\n"
                               : "flexpipe-profile: warning: '%s' failed: no "
                                 "messages or calibration jobs measured\n",
                 o.mpirun.c_str());
    return false;
  }
  cluster.intraNode = {bandwidth, latency};
  cluster.interNode = cluster.intraNode;
  progress("messages between two ranks: " + std::to_string(latency * 1e6) +
           " us latency, " + std::to_string(bandwidth / 1e9) + " GB/s");
  const sched::Link reduce{field(out, "allreduce_bandwidth_bytes_per_s"),
                           field(out, "allreduce_latency_s")};
  if (reduce.bandwidth > 0 && reduce.latency > 0) {
    cluster.measured.allReduce = reduce;
    progress("gradient all-reduce, as a ring step: " +
             std::to_string(reduce.latency * 1e6) + " us latency, " +
             std::to_string(reduce.bandwidth / 1e9) + " GB/s");
  }
  for (int64_t k = 3; k <= ranks; ++k) {
    const double at = field(capture(launch + std::to_string(k) + " " +
                                    shellQuote(self) + " --worker ping-pong"),
                            "latency_s");
    if (!(at > 0))
      continue;
    latencyAt[k] = at;
    progress("messages while " + std::to_string(k) +
             " ranks ping-pong in pairs: " + std::to_string(at * 1e6) +
             " us latency");
  }
  return true;
#else
  (void)cluster, (void)o, (void)self, (void)ranks, (void)latencyAt;
  progress("built without MPI: no messages or calibration jobs measured");
  return false;
#endif
}

/// A scratch directory in /tmp, removed with everything in it at the end,
/// or when the tool is interrupted.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    char name[] = "/tmp/flexpipe-profile-XXXXXX";
    if (!mkdtemp(name))
      return;
    path = name;
    std::snprintf(interruptedScratch, sizeof interruptedScratch, "%s", name);
  }
  ~ScratchDir() {
    if (path.empty())
      return;
    interruptedScratch[0] = '\0';
    (void)llvm::sys::fs::remove_directories(path);
  }
  ScratchDir(const ScratchDir &) = delete;
  ScratchDir &operator=(const ScratchDir &) = delete;
};

/// Runs this tool as `worker` under mpirun (measureMessages); its exit
/// code.
int runWorker(int argc, char **argv, const std::string &worker) {
#ifdef FLEXPIPE_PROFILE_MPI
  std::unique_ptr<rt::Comm> comm = rt::makeMpiComm(&argc, &argv);
  int code = 1;
  if (worker != "ping-pong")
    std::fprintf(stderr, "flexpipe-profile: unknown worker '%s'\n",
                 worker.c_str());
  else if (comm->size() < 2)
    std::fprintf(stderr, "flexpipe-profile: the ping-pong worker needs 2 or "
                         "more ranks (under mpirun -np K)\n");
  else
    code = pingPongWorker(*comm);
  comm->finalize();
  return code;
#else
  (void)argc, (void)argv, (void)worker;
  std::fprintf(stderr, "flexpipe-profile: built without MPI\n");
  return 1;
#endif
}

/// Writes the measured `cluster` to `path` (through a file beside it,
/// renamed when complete); false, with a message, when it cannot.
bool writeCluster(const sched::ClusterConfig &cluster,
                  const std::string &path) {
  std::ostringstream os;
  os << "# Measured by flexpipe-profile on this machine ("
     << cluster.measured.coresPerNode
     << " cores): the CPU runtime's layer durations and optimizer step,\n"
     << "# contention of ranks sharing the cores, messages between two "
        "ranks. Read by\n"
     << "# flexpipe-tune --cluster and flexpipe-compile --cluster "
        "(docs/CostModel.md).\n";
  os << sched::formatCluster(cluster);
  // Written as the runtime writes its results (rt::OutputFile): whole,
  // through a temporary renamed over the target (a link's), or in place and
  // appended to under /dev and /proc. OutputFile records the temporary for
  // the interrupt handler (removeLiveTemporaries).
  rt::OutputFile out(path);
  if (out.get())
    std::fputs(os.str().c_str(), out.get());
  const bool written = out.get() && out.commit();
  if (!written)
    std::fprintf(stderr, "flexpipe-profile: %s\n", out.error().c_str());
  return written;
}

/// --check: runs each model's 1-rank calibration job at its own
/// micro-batch size three times and compares the runtime's time for one
/// micro-batch through every layer (the median) with what `cluster`'s
/// measured layers add up to, which the profile scaled to that job's runs
/// (foldRoundJobs). Prints one line per model on standard output; returns
/// the exit code (0: every model within `tolerance`, 3: further, 1: error).
int checkCluster(const sched::ClusterConfig &cluster,
                 const std::vector<sched::ModelConfig> &models,
                 const std::string &file, const std::string &compiler,
                 double tolerance) {
  ScratchDir scratch;
  if (scratch.path.empty()) {
    std::fprintf(stderr, "flexpipe-profile: cannot make a scratch directory "
                         "in /tmp\n");
    return 1;
  }
  int code = 0;
  for (size_t i = 0; i < models.size(); ++i) {
    const sched::ModelConfig &model = models[i];
    const std::array<double, 3> layers = layerTotals(cluster.measured, model);
    const double profiled = layers[0] + layers[1] + layers[2];
    // Every kind of the model's layers: without its blocks the file's sum
    // read 28x off, "the machine moved" (exit 3) where the file is wrong.
    std::string missing;
    const sched::ModuleModel &m = model.modules.front();
    for (auto [kind, name, has] :
         {std::tuple{sched::MeasuredLayer::Block, "blocks", true},
          std::tuple{sched::MeasuredLayer::Embedding, "embedding", m.vocab > 0},
          std::tuple{sched::MeasuredLayer::Head, "head", m.hasHead()}})
      // (Measured at the model's micro-batch size itself: an interpolated
      // figure is no measurement of the machine to compare with.)
      if (has && !cluster.measured.measuredAt(kind, m, model.microBatchSize))
        missing += std::string(missing.empty() ? "" : ", ") + name;
    if (!missing.empty() || !(profiled > 0)) {
      std::fprintf(
          stderr,
          "flexpipe-profile: %s has no measured %s of %s at "
          "micro-batch size %lld (--check compares with figures measured "
          "at the model's micro_batch_size, not interpolated ones; written "
          "by flexpipe-profile --model for that model?)\n",
          file.c_str(),
          missing.empty() || !(profiled > 0) ? "layers" : missing.c_str(),
          model.name.c_str(), static_cast<long long>(model.microBatchSize));
      return 1;
    }
    RoundJob job;
    job.microBatch = model.microBatchSize;
    job.dir = calibrationDir(scratch.path, i, model.microBatchSize);
    job.seconds = 1.0;
    if (llvm::Error error =
            runCalibrationJob(cluster, model, compiler, job, 3)) {
      std::fprintf(stderr, "flexpipe-profile: %s\n",
                   llvm::toString(std::move(error)).c_str());
      return 1;
    }
    std::vector<double> times;
    std::ostringstream runs;
    runs.setf(std::ios::fixed);
    runs.precision(3);
    for (size_t r = 0; r < job.runs.size(); ++r) {
      times.push_back(job.stageTime(r));
      runs << (r ? " " : "") << times.back() * 1e3;
    }
    const double now = median(times);
    const double ratio = now / profiled;
    const bool moved = std::abs(ratio - 1) > tolerance;
    std::printf("%s: a micro-batch through its layers takes %.3f ms now "
                "(runs %s), %.3f ms in %s: %.2fx%s\n",
                model.name.c_str(), now * 1e3, runs.str().c_str(),
                profiled * 1e3, file.c_str(), ratio,
                moved ? " (moved beyond the tolerance)" : "");
    if (moved)
      code = 3;
  }
  return code;
}

/// The ranks the cluster file offers (--ranks, default twice the cores), or
/// -1 after an error: the contention step starts 2, 3, ..., ranks processes
/// at once, and the calibration jobs run up to that many ranks, so past a
/// few per core they would only measure the OS's time slicing, for hours.
int64_t profiledRanks(int64_t requested, int64_t cores) {
  const int64_t most = std::max<int64_t>(8, 4 * cores);
  if (requested > most) {
    std::fprintf(stderr,
                 "flexpipe-profile: --ranks %lld is more than %lld (4 ranks "
                 "per core on this machine's %lld cores, at least 8): the "
                 "profiler starts up to that many processes at once\n",
                 static_cast<long long>(requested),
                 static_cast<long long>(most), static_cast<long long>(cores));
    return -1;
  }
  return requested > 0 ? requested : 2 * cores;
}

/// Parses the command line into `o`; returns an exit code to stop with
/// (after --help or an error), or -1 to go on.
int parseOptions(int argc, char **argv, Options &o) {
  CLI::App app{
      "Measure this machine for the cost model: the CPU runtime's layer "
      "durations (forward, input gradient, weight gradient of a block, the "
      "embedding and the head) at every micro-batch size that divides each "
      "model's global batch, the optimizer step, the sgemm rate and the "
      "blocks' slowdown while 2, 3, ... processes compute at once, the OS "
      "time slice of ranks sharing a core (more --ranks than cores); with "
      "mpirun, the latency and bandwidth between two ranks, their gradient "
      "all-reduce and calibration jobs (1F1B compiled and trained on 1 "
      "rank: the layers' in-run time; over 2 .. cores ranks against 1, per "
      "model: the slowdown in runs; over 2, 3, ... ranks: printed beside "
      "the simulation as a check). Writes a cluster file that "
      "flexpipe-tune --cluster, flexpipe-compile --cluster and the passes "
      "read (docs/CostModel.md, "
      "\"Measured cluster\").",
      "flexpipe-profile"};
  app.add_option("--model", o.models,
                 "Model YAML whose layer shapes to measure; repeatable")
      ->check(CLI::ExistingFile);
  CLI::Option *base =
      app.add_option("--base", o.base,
                     "Cluster YAML to start from: its links and memory stay "
                     "where nothing is measured (default: one CPU node)")
          ->check(CLI::ExistingFile);
  CLI::Option *ranks =
      app.add_option(
             "--ranks", o.ranks,
             "Ranks the cluster file offers (its devices; the calibration "
             "jobs run on up to this many); default: twice the cores, "
             "at most max(8, 4 x cores)")
          ->check(flexpipe::integerAtLeast(1));
  CLI::Option *seconds =
      app.add_option("--seconds", o.seconds,
                     "Measuring time per shape (more: steadier figures; the "
                     "profile takes a few hundred times this)")
          ->check(flexpipe::positiveNumber(60))
          ->capture_default_str();
  CLI::Option *name =
      app.add_option("--name", o.name,
                     "The cluster's name (default: cpu-measured)")
          ->check(
              [](const std::string &name) {
                return sched::isConfigName(name)
                           ? std::string()
                           : "a cluster's name must be " +
                                 std::string(sched::kConfigNameRule);
              },
              "NAME");
  CLI::Option *mpirun =
      app.add_option(
             "--mpirun", o.mpirun,
             "mpirun to launch the message measurement with; 'none' "
             "skips it and the calibration jobs (which run-mpi.sh "
             "launches with the mpirun on PATH); when given, its failure "
             "stops the profile (the default's is a warning)")
          ->capture_default_str();
  app.add_option("--compiler", o.compiler,
                 "flexpipe-compile for the calibration jobs (default: the "
                 "one beside this tool)");
  CLI::Option *noJobs =
      app.add_flag("!--no-jobs", o.jobs,
                   "Skip the calibration jobs (1F1B over 1, 2, ... ranks, "
                   "compiled and trained)");
  CLI::Option *check =
      app.add_option(
             "--check", o.check,
             "Measure nothing new: run each --model's 1-rank calibration "
             "job at its micro-batch size three times and compare what "
             "a micro-batch through its layers takes with this cluster "
             "file's figures (a few seconds). Exit status 0 when every "
             "model is within --tolerance, 3 when the machine has moved "
             "further (measure again), 1 on an error")
          ->check(CLI::ExistingFile);
  CLI::Option *tolerance =
      app.add_option("--tolerance", o.tolerance,
                     "With --check: how far (relative) the machine may have "
                     "moved")
          ->check(flexpipe::positiveNumber())
          ->capture_default_str();
  app.add_flag("-q,--quiet", o.quiet, "No progress on standard error");
  CLI::Option *output =
      app.add_option("-o,--output", o.output, "The cluster file to write")
          ->capture_default_str();
  // --check measures nothing new and writes nothing: what shapes a
  // measurement has no say there (it was ignored), and --tolerance none
  // without it.
  for (CLI::Option *measuring :
       {base, ranks, seconds, name, mpirun, noJobs, output})
    check->excludes(measuring);
  tolerance->needs(check);
  app.add_option("--worker", o.worker)->group("");
  if (int exit = flexpipe::parseCommandLine(app, argc, argv); exit >= 0)
    return exit;
  o.mpirunGiven = app.count("--mpirun") > 0 && o.mpirun != "none";
  return -1;
}

/// Whether the calibration jobs (and --check's), which train the
/// runtime's built-in GPT, can run for every --model; says why not.
bool calibratable(const Options &o,
                  const std::vector<sched::ModelConfig> &models) {
  if ((!o.jobs || o.mpirun == "none") && o.check.empty())
    return true;
  for (size_t i = 0; i < models.size(); ++i) {
    const size_t modules = models[i].modules.size();
    if (modules == 1 && models[i].modules[0].lmHead)
      continue;
    std::fprintf(
        stderr,
        "flexpipe-profile: error: --model %s: the calibration jobs%s train "
        "the runtime's built-in GPT, one module with a vocabulary and an LM "
        "head, but '%s' has %zu module%s%s; %s\n",
        o.models[i].c_str(), o.check.empty() ? "" : " of --check",
        models[i].name.c_str(), modules, modules == 1 ? "" : "s",
        modules == 1 ? " without an LM head" : "",
        o.check.empty() ? "--no-jobs measures its layers without them"
                        : "check the profile with a GPT model file");
    return false;
  }
  return true;
}

/// Reads the --model files into `models` and checks that they can be
/// measured as asked (calibratable); says why not.
bool loadModels(const Options &o, std::vector<sched::ModelConfig> &models) {
  if (o.models.empty()) {
    std::fprintf(stderr, "flexpipe-profile: give at least one --model (the "
                         "shapes to measure); see --help\n");
    return false;
  }
  models.resize(o.models.size());
  for (size_t i = 0; i < o.models.size(); ++i)
    if (llvm::Error error = sched::loadModel(o.models[i], models[i])) {
      std::fprintf(stderr, "%s\n", llvm::toString(std::move(error)).c_str());
      return false;
    }
  return calibratable(o, models);
}

} // namespace

/// The OS scheduler's time slice (`sharing`: more ranks than cores) and the
/// optimizer step's rate into `measured`.
static void
measureSliceAndStep(sched::MachineProfile &measured, bool sharing,
                    double seconds,
                    const std::function<void(std::string)> &progress) {
  if (sharing) {
    measured.timeSlice = measureTimeSlice(std::max(0.2, 2 * seconds));
    progress(measured.timeSlice > 0
                 ? "time slice of ranks sharing a core: " +
                       std::to_string(measured.timeSlice * 1e3) + " ms"
                 : std::string("time slice: not measured (cannot bind to a "
                               "core here, or under 0.1 ms); ranks sharing a "
                               "core are priced by processor sharing"));
  }
  measured.optimizerPerParameter = timeOptimizer(seconds);
  progress("optimizer (Adam): " +
           std::to_string(measured.optimizerPerParameter * 1e9) +
           " ns per parameter");
}

/// Where the result goes must be writable before minutes of measuring,
/// and not a file the run reads (a model given as -o was replaced). Says
/// why not.
bool outputAllowed(const Options &o) {
  for (const std::string &input : o.models)
    if (llvm::sys::fs::equivalent(input, o.output) || input == o.output) {
      std::fprintf(stderr,
                   "flexpipe-profile: -o '%s' is the model file --model '%s'; "
                   "write the measured cluster to another file\n",
                   o.output.c_str(), input.c_str());
      return false;
    }
  if (!o.base.empty() && llvm::sys::fs::equivalent(o.base, o.output))
    std::fprintf(stderr,
                 "flexpipe-profile: note: -o '%s' is --base: the measured "
                 "cluster replaces it\n",
                 o.output.c_str());
  if (const std::string why = rt::OutputFile::check(o.output); !why.empty()) {
    std::fprintf(stderr, "flexpipe-profile: %s (checked before measuring)\n",
                 why.c_str());
    return false;
  }
  return true;
}

static int profileMain(int argc, char **argv) {
  Options o;
  if (int code = parseOptions(argc, argv, o); code >= 0)
    return code;
  // As the CPU backend runs its kernels: one thread per rank.
  rt::prepareHostProcess();

  if (!o.worker.empty())
    return runWorker(argc, argv, o.worker);
  // Ctrl-C or a kill ends the measuring at once, with no profile written.
  stopOnInterrupts();
  std::vector<sched::ModelConfig> models;
  if (!loadModels(o, models))
    return 1;
  if (!o.check.empty()) {
    sched::ClusterConfig profiled;
    if (llvm::Error error = sched::loadCluster(o.check, profiled)) {
      std::fprintf(stderr, "%s\n", llvm::toString(std::move(error)).c_str());
      return 1;
    }
    return checkCluster(profiled, models, o.check,
                        compilerPath(o, selfPath(argv[0])), o.tolerance);
  }
  if (!outputAllowed(o))
    return 1;
  sched::ClusterConfig cluster;
  cluster.name = "cpu-measured";
  cluster.deviceKind = "cpu";
  cluster.intraNode = {5e9, 2e-6};
  cluster.interNode = {1e9, 50e-6};
  cluster.memoryBytes = 4.0 * (1 << 30);
  if (!o.base.empty())
    if (llvm::Error error = sched::loadCluster(o.base, cluster)) {
      std::fprintf(stderr, "%s\n", llvm::toString(std::move(error)).c_str());
      return 1;
    }
  // (Not the base's name: a profile of this machine started from a800.yaml
  // read "name: a800"; nor its kind of device: it measured CPU ranks.)
  cluster.name = o.name.empty() ? "cpu-measured" : o.name;
  cluster.deviceKind = "cpu";
  // The CPUs it may run on, as the runtime binds ranks to them (taskset -c 0
  // read 2 cores on this machine, and two processes on one CPU read as
  // contention).
  const int64_t cores = std::max<int64_t>(1, rt::allowedCpus());
  const int64_t ranks = profiledRanks(o.ranks, cores);
  if (ranks < 0)
    return 1;
  cluster.devices = cluster.devicesPerNode = ranks;
  sched::MachineProfile &measured = cluster.measured;
  measured = {};
  measured.coresPerNode = cores;

  auto progress = [&](const std::string &line) {
    if (!o.quiet)
      std::fprintf(stderr, "flexpipe-profile: %s\n", line.c_str());
  };

  // Messages first: the calibration jobs need mpirun. Their 1-rank jobs
  // run in rounds between the other measurements (runRound).
  const std::string self = selfPath(argv[0]);
  std::map<int64_t, double> latencyAt;
  const bool withMpi =
      measureMessages(cluster, o, self, ranks, latencyAt, progress);
  if (!withMpi && o.mpirunGiven) {
#ifndef FLEXPIPE_PROFILE_MPI
    std::fprintf(stderr, "flexpipe-profile: error: --mpirun given, but this "
                         "flexpipe-profile was built without MPI\n");
#endif
    return 1;
  }
  // The sgemm rate before the jobs compile: a cluster file needs a rate.
  cluster.peakFlops = timeSgemm(o.seconds);
  progress("sgemm 256: " + std::to_string(cluster.peakFlops / 1e9) +
           " GFLOP/s");
  const std::string compiler = compilerPath(o, self);
  ScratchDir scratch;
  std::vector<RoundJob> rounds;
  if (withMpi && o.jobs) {
    if (scratch.path.empty()) {
      std::fprintf(stderr, "flexpipe-profile: cannot make a scratch "
                           "directory in /tmp\n");
      return 1;
    }
    llvm::Expected<std::vector<RoundJob>> jobs =
        compileRoundJobs(cluster, models, ranks, compiler, scratch.path);
    if (!jobs) {
      std::fprintf(stderr, "flexpipe-profile: %s\n",
                   llvm::toString(jobs.takeError()).c_str());
      return 1;
    }
    rounds = std::move(*jobs);
  }
  std::string failure;
  int round = 0;
  auto calibrationRound = [&] {
    if (rounds.empty() || !failure.empty())
      return;
    progress("calibration jobs, round " + std::to_string(++round) + " of " +
             std::to_string(kRounds));
    if (llvm::Error error = runRound(rounds))
      failure = llvm::toString(std::move(error));
  };

  calibrationRound();
  measureLayers(models, o.seconds, measured, progress, calibrationRound);
  measureContention(measured, models, ranks, std::max(0.1, 6 * o.seconds),
                    progress);
  // A pipeline message's latency at k ranks (messageLatency), where more
  // than the link's.
  for (auto [k, latency] : latencyAt)
    if (latency > cluster.intraNode.latency)
      contentionPoint(cluster, models.front().modules.front(), false, k)
          .latency = latency;
  calibrationRound();

  measureSliceAndStep(measured, ranks > cores, o.seconds, progress);
  if (ranks > cores)
    measured.handoff =
        measureHandoffOf(models.front(), ranks, o.seconds, progress);
  // A hand-over measured at or above what a slice gets done at the largest
  // slowdown (noise, or a model whose caches a slice cannot refill) would
  // leave computations taking turns no progress, and cluster files refuse
  // it: written just below, with a note (also with --quiet).
  if (const double limit = measured.handoffLimit(); measured.handoff >= limit) {
    std::fprintf(stderr,
                 "flexpipe-profile: note: the hand-over measured %.1f us, at "
                 "least what a time slice gets done at the largest slowdown "
                 "(%.1f us); written as 0.99 of that\n",
                 measured.handoff * 1e6, limit * 1e6);
    measured.handoff = 0.99 * limit;
  }
  calibrationRound();

  if (failure.empty() && !rounds.empty())
    failure = calibrate(cluster, models, rounds, ranks, compiler, scratch.path,
                        progress);
  if (!failure.empty()) {
    std::fprintf(stderr, "flexpipe-profile: %s\n", failure.c_str());
    return 1;
  }

  setFallbackRate(cluster, models.front());
  progress("the first model's blocks reach " +
           std::to_string(cluster.efficiency * 100) + "% of the sgemm rate");

  if (!writeCluster(cluster, o.output))
    return 1;
  progress("wrote " + o.output);
  return 0;
}

int main(int argc, char **argv) {
  // A closed standard stream is /dev/null, not the next file opened (the
  // cluster file, say).
  if (std::error_code ec = llvm::sys::Process::FixupStandardFileDescriptors()) {
    std::fprintf(stderr, "flexpipe-profile: %s\n", ec.message().c_str());
    return 1;
  }
  // A model too large for the machine ended in std::terminate (abort).
  try {
    return profileMain(argc, argv);
  } catch (const std::bad_alloc &) {
    std::fputs("flexpipe-profile: out of host memory: an allocation failed "
               "while measuring; a --model's layers do not fit this machine "
               "(flexpipe-compile --emit=report with --model and --cluster "
               "prices a rank's memory): profile a smaller model of the same "
               "kind, or on a machine with more memory\n",
               stderr);
    return 1;
  }
}
