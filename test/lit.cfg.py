# -*- Python -*-
# lit configuration for the FlexPipe test suite.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "FLEXPIPE"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.flexpipe_obj_root, "test")
config.excludes = ["CMakeLists.txt", "Inputs", "lit.cfg.py", "lit.site.cfg.py", "unit", "train.sh", "kill_rank.py", "BootstrapTest.cpp", "check-prediction.py", "replay.py", "differential.py"]

config.substitutions.append(("%schedules", os.path.join(config.flexpipe_src_root, "schedules")))
config.substitutions.append(("%peer_orders", os.path.join(config.flexpipe_src_root, "test", "unit", "data", "peer-orders")))
config.substitutions.append(("%same_order", "python3 " + os.path.join(config.flexpipe_src_root, "test", "Schedules", "same-order.py")))
config.substitutions.append(("%configs", os.path.join(config.flexpipe_src_root, "configs")))
config.substitutions.append(("%examples", os.path.join(config.flexpipe_src_root, "examples")))
config.substitutions.append(("%flexpipe_include", os.path.join(config.flexpipe_src_root, "include")))
# The benchmark scripts (bench/) and the build directory they take.
config.substitutions.append(("%bench", os.path.join(config.flexpipe_src_root, "bench")))
# The helper scripts (scripts/).
config.substitutions.append(("%scripts", os.path.join(config.flexpipe_src_root, "scripts")))
config.substitutions.append(("%build_dir", config.flexpipe_obj_root))
# Scheduler plugins: the example (examples/plugins) and the loader's test
# plugins (test/Plugin/Inputs).
config.substitutions.append(("%example_plugin", os.path.join(config.flexpipe_obj_root, "lib", "FlexPipeExamplePlugin.so")))
config.substitutions.append(("%test_plugins", os.path.join(config.flexpipe_obj_root, "test", "Plugin")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.flexpipe_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["flexpipe-opt", "flexpipe-compile", "flexpipe-tune", "flexpipe-profile"], [config.flexpipe_tools_dir])

# End-to-end training runs: compile, launch with mpirun, compare with the
# single-process reference (scripts/compare-training.py).
import shutil
if shutil.which("mpirun") and shutil.which("mpicxx"):
    config.available_features.add("mpi")
config.substitutions.append(("%train", "bash " + os.path.join(config.flexpipe_src_root, "test", "Runtime", "train.sh") + " %t"))
# `gdb` when gdb can run a program here (ptrace allowed): tests that freeze
# a rank at a chosen function (test/Runtime/stall_at.sh).
if shutil.which("gdb"):
    import subprocess
    try:
        probe = subprocess.run(["gdb", "-q", "-batch", "-ex", "run", "--args", "/bin/true"],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode == 0 and "exited normally" in probe.stdout:
            config.available_features.add("gdb")
    except (OSError, subprocess.SubprocessError):
        pass
# The GPU test's script, run with --emulation on this build.
config.substitutions.append(("%gpu_test", "env BUILD_DIR=" + config.flexpipe_obj_root + " bash " + os.path.join(config.flexpipe_src_root, "scripts", "gpu-test.sh")))

# The CUDA backend: `cuda` when this build has it (compile and link tests run
# without a GPU); `cuda-device` when a GPU is visible (run tests).
config_h = os.path.join(config.flexpipe_obj_root, "include", "flexpipe", "Config.h")
if os.path.exists(config_h) and "#define FLEXPIPE_ENABLE_CUDA 1" in open(config_h).read():
    config.available_features.add("cuda")
    import subprocess
    try:
        gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        if gpus.returncode == 0 and "GPU" in gpus.stdout:
            config.available_features.add("cuda-device")
    except (OSError, subprocess.SubprocessError):
        pass
llvm_config.add_tool_substitutions(["flexpipe-reference"], [config.flexpipe_tools_dir])
