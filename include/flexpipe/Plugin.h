//===- Plugin.h - Scheduler plugins: checks, priorities, rules --*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The public interface of FlexPipe plugins: shared libraries that
// flexpipe-opt, flexpipe-compile and flexpipe-tune load with
// `--load-plugin lib.so` and that add, by name,
//
//  - check functions (the paper's register_new_checkfunc), named in a spec by
//    `flexpipe.check "name"`: consulted for every item the scheduler
//    considers; returning false vetoes the item for this step;
//  - priorities (register_new_priority), named by
//    `flexpipe.priority [@module] [actors [...]] custom("name")`: the step
//    function of those actors, which picks the next item among the ready
//    ones;
//  - in-flight rules (config_inflight_micros with a callable), named by
//    `flexpipe.inflight [@module] per_stage|per_actor|global rule("name")`:
//    the limit for each index of the scope.
//
// A plugin exports two functions, both written by FLEXPIPE_PLUGIN:
//
//   #include "flexpipe/Plugin.h"
//   using namespace flexpipe;
//   FLEXPIPE_PLUGIN(registry) {
//     registry.addCheck("no_backward_before_3",
//                       [](const sched::StepView &view,
//                          const sched::ReadyItem &item) {
//                         return item.kind != sched::CompKind::Bwd ||
//                                view.now >= 3;
//                       });
//   }
//
// A plugin needs this header and Scheduler.h only, and links against nothing
// from FlexPipe: the registry's add functions are virtual, everything else it
// sees is a type or inline. It must be built with the same compiler and C++
// standard library as the tools (they exchange std::function and
// std::string); the loader checks kPluginApiVersion. Hooks must be
// thread-safe (flexpipe-tune calls them from several threads at once) and
// must not throw (the registry catches what one throws: the scheduling
// stops with its message). docs/Plugins.md has the whole contract.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_PLUGIN_H
#define FLEXPIPE_PLUGIN_H

#include "flexpipe/Scheduling/Scheduler.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace flexpipe::plugin {

/// Bumped whenever this header or the hook types of Scheduler.h change
/// incompatibly.
constexpr int kPluginApiVersion = 2;

/// The C++ ABI the hooks are exchanged in (std::string, std::function):
/// compared by the loader, which cannot call a plugin built with another
/// standard library or string ABI safely. Only plain integers cross here.
constexpr unsigned long long pluginAbiTag() {
  return (static_cast<unsigned long long>(sizeof(std::string)) << 48) |
         (static_cast<unsigned long long>(sizeof(std::function<int(int)>))
          << 32) |
#if defined(_LIBCPP_VERSION)
         (1ull << 16) |
#elif defined(_GLIBCXX_USE_CXX11_ABI)
         (static_cast<unsigned long long>(2 + _GLIBCXX_USE_CXX11_ABI) << 16) |
#endif
         static_cast<unsigned long long>(sizeof(void *));
}

/// What an in-flight rule is asked: the limit for one index of its scope.
struct InflightQuery {
  /// The stage index (per_stage), the actor's position in the scope
  /// (per_actor), or 0 (global).
  int64_t index = 0;
  /// Sizes of the scope (the whole pipeline or one module).
  int64_t numActors = 1, numStages = 1, numMicrobatches = 1;
};
/// Returns the limit (at least 1) for the queried index.
using InflightRule = std::function<int64_t(const InflightQuery &)>;

/// Named hooks, filled by plugins and read when a spec names them.
///
/// Filling is not thread-safe; the tools load every plugin before anything
/// else runs, after which the registry is only read.
class Registry {
public:
  Registry() = default;
  Registry(const Registry &) = delete;
  Registry &operator=(const Registry &) = delete;
  virtual ~Registry();

  /// Each add records the hook under `name` for the plugin being loaded. A
  /// name already taken (by any plugin or by the program, for the same kind
  /// of hook), one that is not [A-Za-z_][A-Za-z0-9_.-]*, or an empty
  /// function is an error: the first registration stays, the error is kept
  /// in `error` (the first one only) and load() reports it. Returns whether
  /// the hook was recorded. Virtual so that plugins reach them through the
  /// registry they are given, without linking against the tools.
  virtual bool addCheck(const std::string &name, sched::CheckFunction function);
  virtual bool addPriority(const std::string &name,
                           sched::PriorityFunction function);
  virtual bool addInflightRule(const std::string &name, InflightRule function);

  /// Lookups; nullptr when nothing of that name is registered. The pointers
  /// stay valid while the registry lives.
  const sched::CheckFunction *check(const std::string &name) const;
  const sched::PriorityFunction *priority(const std::string &name) const;
  const InflightRule *inflightRule(const std::string &name) const;

  /// Registered names of one kind ("check", "priority", "inflight rule"),
  /// sorted, for diagnostics; empty for any other kind.
  std::vector<std::string> names(const std::string &kind) const;

  /// The plugin (the path it was loaded from) that registered a hook of
  /// `kind` under `name`; empty when the program registered it or nothing
  /// did.
  std::string owner(const std::string &kind, const std::string &name) const;

  /// Loads a plugin: opens the shared library, checks its API version and
  /// calls its registration function. Returns an empty string, or
  /// "PATH: reason" where the reason is one of: it cannot be opened (the
  /// loader's message), it is not a FlexPipe plugin (which entry points are
  /// missing), its API version differs (both numbers), it is already loaded,
  /// or a name it registers clashes (with which plugin) or is invalid. A
  /// failed load leaves nothing behind: its registrations are removed and the
  /// library is closed. A loaded library stays open while the process runs.
  std::string load(const std::string &path);

  /// The registry the tools load plugins into and passes read.
  static Registry &global();

  /// Used by load(): the plugin whose registration function is running
  /// (empty outside load()), and the first error an add caused.
  std::string currentPlugin;
  std::string error;

private:
  template <typename F> struct Entry {
    F function;
    std::string plugin;
  };
  template <typename F>
  bool add(std::map<std::string, Entry<F>> &table, const char *kind,
           const std::string &name, F function);
  void fail(const std::string &message);

  std::map<std::string, Entry<sched::CheckFunction>> checks;
  std::map<std::string, Entry<sched::PriorityFunction>> priorities;
  std::map<std::string, Entry<InflightRule>> inflightRules;
  /// What the load in progress added (kind, name), to undo on failure.
  std::vector<std::pair<std::string, std::string>> added;
  /// Loaded plugins: (canonical path, path as given).
  std::vector<std::pair<std::string, std::string>> loaded;
};

} // namespace flexpipe::plugin

/// The entry points a plugin exports (FLEXPIPE_PLUGIN defines both); the
/// body that follows the macro is the registration function.
#define FLEXPIPE_PLUGIN(registry)                                              \
  extern "C" __attribute__((visibility("default"))) int                        \
  flexpipePluginApiVersion() {                                                 \
    return ::flexpipe::plugin::kPluginApiVersion;                              \
  }                                                                            \
  extern "C" __attribute__((visibility("default"))) unsigned long long         \
  flexpipePluginAbiTag() {                                                     \
    return ::flexpipe::plugin::pluginAbiTag();                                 \
  }                                                                            \
  extern "C" __attribute__((visibility("default"))) void                       \
  flexpipePluginRegister(::flexpipe::plugin::Registry &registry)

#endif // FLEXPIPE_PLUGIN_H
