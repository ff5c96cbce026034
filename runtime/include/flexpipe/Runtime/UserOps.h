//===- UserOps.h - Runtime operations for registered instructions -*- C++ -*-=//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The paper's map_inst_to_operation: a C++ function bound by name to a
// registered `kind(compute)` instruction. A spec registers
//
//   flexpipe.instruction @log_norms kind(compute) on(@gpt[-1])
//       attrs {file = "norms.txt"}
//   flexpipe.dependency fwd @gpt[-1] -> @log_norms @gpt[-1]
//
// the scheduler places `flexpipe.exec @log_norms stage S mb M attrs {...}`
// in the programs, the lowering turns each into flexpipe_rt_exec, and the
// runtime calls the operation of that name:
//
//   #include "flexpipe/Runtime/UserOps.h"
//   FLEXPIPE_OPERATION(log_norms)(flexpipe::rt::OpContext &ctx) {
//     flexpipe::rt::TensorView out = ctx.getOutput();
//     ...
//   }
//
// `flexpipe-compile --ops FILE.cpp` compiles the file into every rank
// executable (and into the reference trainer it builds beside them). A rank
// whose program runs an operation that no file defined stops at start-up.
// docs/Plugins.md ("Runtime operations") has the whole contract.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_USEROPS_H
#define FLEXPIPE_RUNTIME_USEROPS_H

#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace flexpipe::rt {

/// Read-only floats with a shape, row-major: an activation a runtime
/// operation may inspect. Empty (no data, no shape) when there is none.
struct TensorView {
  const float *data = nullptr;
  size_t size = 0;
  std::vector<int64_t> shape;

  bool empty() const { return size == 0; }
  const float *begin() const { return data; }
  const float *end() const { return data + size; }
  float operator[](size_t i) const { return data[i]; }
};

/// One runtime attribute of the instruction (its `attrs {...}`).
struct OpAttribute {
  enum class Kind { String, Integer, Float, Bool, Unit };
  Kind kind = Kind::Unit;
  /// The string itself; an integer or float in decimal; "true" or "false";
  /// empty for a unit attribute.
  std::string text;
};

class OpContext;
using OperationFn = void (*)(OpContext &);

/// Everything an operation may ask about the instance it runs.
class OpContext {
public:
  /// Where and when the instance runs.
  struct Place {
    std::string name; ///< the instruction, without '@'
    int rank = 0, ranks = 1, actor = 0, replica = 0;
    int64_t iteration = 0, stage = 0;
    /// The micro-batches the instance covers: [microbatch, microbatch +
    /// numMicrobatches), numbered within the replica as in the program.
    int64_t microbatch = 0, numMicrobatches = 1;
  };
  /// What the runtime provides behind the context.
  class Host {
  public:
    virtual ~Host() = default;
    /// The output of the instance's stage for micro-batch `mb`, or an empty
    /// view.
    virtual TensorView output(int64_t mb) = 0;
    /// Stops the run with `message`.
    [[noreturn]] virtual void fail(const std::string &message) = 0;
  };

  OpContext(Place place, std::map<std::string, OpAttribute> attributes,
            Host &host)
      : place(std::move(place)), attributes(std::move(attributes)), host(host) {
  }

  const std::string &getName() const { return place.name; }
  /// This process among all ranks (actor * dp + replica).
  int getRank() const { return place.rank; }
  int getNumRanks() const { return place.ranks; }
  int getActor() const { return place.actor; }
  /// The data-parallel replica of the pipeline.
  int getReplica() const { return place.replica; }
  /// The training iteration, from 0.
  int64_t getIteration() const { return place.iteration; }
  int64_t getStage() const { return place.stage; }
  /// The first micro-batch the instance covers, and how many it covers (1
  /// unless the instruction groups several with prev(k)).
  int64_t getMicrobatch() const { return place.microbatch; }
  int64_t getNumMicrobatches() const { return place.numMicrobatches; }

  /// The output activation of the stage for micro-batch `mb` of the
  /// instance's micro-batches, on this actor: what the stage's forward passes
  /// on ([micro-batch size, sequence, hidden]); on the GPT's last stage the
  /// hidden state entering its final LayerNorm and LM head, on a tower's last
  /// stage its embeddings ([micro-batch size, embed]). Empty when the forward
  /// of `mb` has not run on this actor before the instance, and on
  /// vocabulary-parallel and sync stages. Valid during the call only.
  TensorView getOutput(int64_t mb) const;
  /// The output for getMicrobatch().
  TensorView getOutput() const { return getOutput(place.microbatch); }

  /// The instruction's runtime attributes, by key.
  const std::map<std::string, OpAttribute> &getAttributes() const {
    return attributes;
  }
  bool hasAttribute(const std::string &key) const {
    return attributes.count(key) != 0;
  }
  /// The attribute `key`; without a fallback, a missing attribute or one of
  /// another kind stops the run with a message that names the operation.
  /// getFloat accepts integers; getBool accepts unit attributes (true).
  std::string getString(const std::string &key) const;
  std::string getString(const std::string &key,
                        const std::string &fallback) const;
  int64_t getInt(const std::string &key) const;
  int64_t getInt(const std::string &key, int64_t fallback) const;
  double getFloat(const std::string &key) const;
  double getFloat(const std::string &key, double fallback) const;
  bool getBool(const std::string &key) const;
  bool getBool(const std::string &key, bool fallback) const;

  /// Stops every rank: "operation @NAME on stage S mb M (rank R): message".
  [[noreturn]] void fail(const std::string &message) const;

private:
  const OpAttribute &require(const std::string &key, const char *kind) const;

  Place place;
  std::map<std::string, OpAttribute> attributes;
  Host &host;
};

/// Registers `fn` as the operation `name` (FLEXPIPE_OPERATION does this
/// during static initialisation). Names match [A-Za-z_][A-Za-z0-9_.-]*; an
/// invalid or repeated name is reported when a rank starts.
void registerOperation(const char *name, OperationFn fn, const char *file,
                       int line);

/// The operation registered as `name`, or null.
OperationFn findOperation(const std::string &name);
/// Every registered name, sorted.
std::vector<std::string> registeredOperations();
/// What was wrong with the registrations (invalid or repeated names), one
/// sentence each; empty when nothing.
std::vector<std::string> registrationErrors();

namespace detail {
/// Calls `Fn`, turning an exception into OpContext::fail.
template <void (*Fn)(OpContext &)> void guarded(OpContext &ctx) {
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
  try {
    Fn(ctx);
  } catch (const std::exception &e) {
    ctx.fail(std::string("threw an exception: ") + e.what());
  } catch (...) {
    ctx.fail("threw an exception");
  }
#else
  Fn(ctx);
#endif
}

struct Registration {
  Registration(const char *name, OperationFn fn, const char *file, int line) {
    registerOperation(name, fn, file, line);
  }
};
} // namespace detail

} // namespace flexpipe::rt

/// Defines the operation bound to the registered instruction @NAME (an
/// identifier); the body follows:
///
///   FLEXPIPE_OPERATION(log_norms)(flexpipe::rt::OpContext &ctx) { ... }
#define FLEXPIPE_OPERATION(NAME) FLEXPIPE_NAMED_OPERATION(NAME, #NAME)

/// The same for instruction names that are not identifiers
/// (`@mylab.log_norms`): IDENT names the C++ function, NAME_STRING the
/// instruction.
#define FLEXPIPE_NAMED_OPERATION(IDENT, NAME_STRING)                           \
  static void flexpipeOperation_##IDENT(::flexpipe::rt::OpContext &);          \
  static const ::flexpipe::rt::detail::Registration                            \
      flexpipeRegistration_##IDENT(                                            \
          NAME_STRING,                                                         \
          &::flexpipe::rt::detail::guarded<&flexpipeOperation_##IDENT>,        \
          __FILE__, __LINE__);                                                 \
  static void flexpipeOperation_##IDENT

#endif // FLEXPIPE_RUNTIME_USEROPS_H
