//===- Plugin.cpp - Scheduler plugins: the registry and the loader --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The loader opens plugins with dlopen rather than llvm::sys::DynamicLibrary:
// it needs RTLD_LOCAL (DynamicLibrary opens with RTLD_GLOBAL, so a helper of
// one plugin would interpose the same-named helper of the next), RTLD_NOW
// (an unresolved symbol is a load error naming it, not a crash in the middle
// of a schedule) and dlclose for a plugin that fails to register.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

#include <dlfcn.h>
#include <exception>
#include <link.h>

using namespace flexpipe;
using namespace flexpipe::plugin;

namespace {

constexpr const char *kCheck = "check";
constexpr const char *kPriority = "priority";
constexpr const char *kInflightRule = "inflight rule";

/// [A-Za-z_][A-Za-z0-9_.-]*
bool isValidName(llvm::StringRef name) {
  if (name.empty() || !(llvm::isAlpha(name.front()) || name.front() == '_'))
    return false;
  return llvm::all_of(name, [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.' || c == '-';
  });
}

template <typename Table> std::vector<std::string> keysOf(const Table &table) {
  auto keys = llvm::make_first_range(table); // std::map: already sorted
  return std::vector<std::string>(keys.begin(), keys.end());
}

/// The dynamic loader's last message without the leading "PATH: " it often
/// repeats.
std::string loaderMessage(const std::string &path) {
  const char *message = dlerror();
  llvm::StringRef text = message ? message : "unknown error";
  text.consume_front(path + ": ");
  return text.str();
}

} // namespace

Registry::~Registry() = default;

void Registry::fail(const std::string &message) {
  if (error.empty())
    error = message;
}

template <typename F>
bool Registry::add(std::map<std::string, Entry<F>> &table, const char *kind,
                   const std::string &name, F function) {
  const std::string what = std::string(kind) + " '" + name + "'";
  if (!isValidName(name)) {
    fail(what + " has an invalid name: names match [A-Za-z_][A-Za-z0-9_.-]*");
    return false;
  }
  if (!function) {
    fail(what + " is registered without a function");
    return false;
  }
  auto [it, inserted] = table.try_emplace(name);
  if (!inserted) {
    const std::string &holder = it->second.plugin;
    if (!currentPlugin.empty() && holder == currentPlugin)
      fail(what + " is registered twice");
    else if (holder.empty())
      fail(what + " is already registered by the program itself");
    else
      fail(what + " is already registered by plugin " + holder);
    return false;
  }
  it->second.function = std::move(function);
  it->second.plugin = currentPlugin;
  if (!currentPlugin.empty())
    added.emplace_back(kind, name);
  return true;
}

/// `function`, which may throw (plugins are C++), as a hook that does not:
/// an exception becomes sched::setHookFailure and the answer `neutral`. The
/// tools' scheduler is built without exceptions; one thrown through it
/// stopped the process.
template <typename R, typename... Args>
static std::function<R(Args...)> catching(std::function<R(Args...)> function,
                                          const char *kind,
                                          const std::string &name, R neutral) {
  if (!function)
    return function;
  const std::string what = std::string("the ") + kind + " '" + name + "'";
  return [function = std::move(function), what, neutral](Args... args) -> R {
    try {
      return function(std::forward<Args>(args)...);
    } catch (const std::exception &e) {
      sched::setHookFailure(what + " threw: " + e.what() +
                            " (a plugin's hooks must not throw)");
    } catch (...) {
      sched::setHookFailure(what + " threw (a plugin's hooks must not throw)");
    }
    return neutral;
  };
}

bool Registry::addCheck(const std::string &name,
                        sched::CheckFunction function) {
  return add(checks, kCheck, name,
             catching(std::move(function), kCheck, name, false));
}

bool Registry::addPriority(const std::string &name,
                           sched::PriorityFunction function) {
  return add(priorities, kPriority, name,
             catching(std::move(function), kPriority, name, -1));
}

bool Registry::addInflightRule(const std::string &name, InflightRule function) {
  return add(inflightRules, kInflightRule, name,
             catching(std::move(function), "in-flight rule", name, int64_t(0)));
}

const sched::CheckFunction *Registry::check(const std::string &name) const {
  auto it = checks.find(name);
  return it == checks.end() ? nullptr : &it->second.function;
}

const sched::PriorityFunction *
Registry::priority(const std::string &name) const {
  auto it = priorities.find(name);
  return it == priorities.end() ? nullptr : &it->second.function;
}

const InflightRule *Registry::inflightRule(const std::string &name) const {
  auto it = inflightRules.find(name);
  return it == inflightRules.end() ? nullptr : &it->second.function;
}

std::vector<std::string> Registry::names(const std::string &kind) const {
  if (kind == kCheck)
    return keysOf(checks);
  if (kind == kPriority)
    return keysOf(priorities);
  if (kind == kInflightRule)
    return keysOf(inflightRules);
  return {};
}

std::string Registry::owner(const std::string &kind,
                            const std::string &name) const {
  auto find = [&](const auto &table) {
    auto it = table.find(name);
    return it == table.end() ? std::string() : it->second.plugin;
  };
  if (kind == kCheck)
    return find(checks);
  if (kind == kPriority)
    return find(priorities);
  if (kind == kInflightRule)
    return find(inflightRules);
  return {};
}

/// Whether `address`, found by dlsym, is a function's (a plugin could
/// export data under an entry point's name; calling it would crash).
static bool isFunction(void *address) {
  Dl_info info;
  void *entry = nullptr; // the symbol's ElfW(Sym)
  if (dladdr1(address, &info, &entry, RTLD_DL_SYMENT) == 0 || !entry)
    return false;
  return ELF64_ST_TYPE(static_cast<const ElfW(Sym) *>(entry)->st_info) ==
         STT_FUNC;
}

std::string Registry::load(const std::string &path) {
  auto failed = [&](const std::string &reason) { return path + ": " + reason; };
  if (path.empty())
    return "(an empty path): give the plugin's file";

  // dlopen searches the library path for a name without a slash; a file of
  // that name in the working directory is meant.
  std::string file = path;
  if (path.find('/') == std::string::npos && llvm::sys::fs::exists(path))
    file = "./" + path;
  dlerror();
  void *handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return failed("cannot load it: " + loaderMessage(file));
  // The same file under another name (a link, another relative path, a
  // bare name found on the library path) is the same plugin: the file the
  // loader opened is compared.
  llvm::SmallString<256> canonical;
  struct link_map *map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name ||
      !*map->l_name || llvm::sys::fs::real_path(map->l_name, canonical))
    if (llvm::sys::fs::real_path(path, canonical))
      canonical = path;
  for (const auto &[known, given] : loaded)
    if (known == canonical.str()) {
      dlclose(handle);
      return failed(given == path
                        ? "this plugin is already loaded"
                        : "this plugin is already loaded (as " + given + ")");
    }

  using VersionFn = int (*)();
  using RegisterFn = void (*)(Registry &);
  auto version =
      reinterpret_cast<VersionFn>(dlsym(handle, "flexpipePluginApiVersion"));
  auto registration =
      reinterpret_cast<RegisterFn>(dlsym(handle, "flexpipePluginRegister"));
  if (!version || !registration) {
    dlclose(handle);
    std::string missing = !version && !registration
                              ? "flexpipePluginApiVersion and "
                                "flexpipePluginRegister"
                          : !version ? "flexpipePluginApiVersion"
                                     : "flexpipePluginRegister";
    return failed("not a FlexPipe plugin: it does not export " + missing +
                  " (FLEXPIPE_PLUGIN from flexpipe/Plugin.h defines both)");
  }
  if (!isFunction(reinterpret_cast<void *>(version)) ||
      !isFunction(reinterpret_cast<void *>(registration))) {
    dlclose(handle);
    return failed("not a FlexPipe plugin: flexpipePluginApiVersion and "
                  "flexpipePluginRegister must be functions (FLEXPIPE_PLUGIN "
                  "from flexpipe/Plugin.h defines both)");
  }
  if (int found = version(); found != kPluginApiVersion) {
    dlclose(handle);
    return failed("it was built for plugin API version " +
                  std::to_string(found) + ", but this FlexPipe loads version " +
                  std::to_string(kPluginApiVersion) +
                  "; rebuild it against this FlexPipe's flexpipe/Plugin.h");
  }
  // The version says which header it saw, not which C++ library: a plugin
  // built with another std::string ABI crashed the tool in its first add.
  using AbiFn = unsigned long long (*)();
  auto abi = reinterpret_cast<AbiFn>(dlsym(handle, "flexpipePluginAbiTag"));
  if (!abi || !isFunction(reinterpret_cast<void *>(abi)) ||
      abi() != pluginAbiTag()) {
    dlclose(handle);
    return failed("it was built with another C++ standard library or ABI "
                  "(std::string, std::function) than this FlexPipe; rebuild "
                  "it with the compiler and standard library the tools were "
                  "built with");
  }

  // A registration function may itself load a plugin: keep the outer
  // load's state.
  std::string outerPlugin = std::move(currentPlugin);
  std::string outerError = std::move(error);
  std::vector<std::pair<std::string, std::string>> outerAdded =
      std::move(added);
  currentPlugin = path;
  error.clear();
  added.clear();
  try {
    registration(*this);
  } catch (const std::exception &thrown) {
    if (error.empty())
      error = std::string("its registration threw: ") + thrown.what();
  } catch (...) {
    if (error.empty())
      error = "its registration threw";
  }
  std::string reason = std::move(error);
  if (!reason.empty()) {
    // Undo every registration of this plugin before its code goes away.
    for (const auto &[kind, name] : added) {
      if (kind == kCheck)
        checks.erase(name);
      else if (kind == kPriority)
        priorities.erase(name);
      else
        inflightRules.erase(name);
    }
  }
  added = std::move(outerAdded);
  currentPlugin = std::move(outerPlugin);
  error = std::move(outerError);
  if (!reason.empty()) {
    dlclose(handle);
    return failed(reason);
  }
  loaded.emplace_back(canonical.str().str(), path);
  return {};
}

Registry &Registry::global() {
  static Registry registry;
  return registry;
}
