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
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit"]

config.substitutions.append(("%schedules", os.path.join(config.flexpipe_src_root, "schedules")))
config.substitutions.append(("%peer_orders", os.path.join(config.flexpipe_src_root, "test", "unit", "data", "peer-orders")))
config.substitutions.append(("%same_order", "python3 " + os.path.join(config.flexpipe_src_root, "test", "Schedules", "same-order.py")))
config.substitutions.append(("%examples", os.path.join(config.flexpipe_src_root, "examples")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.flexpipe_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["flexpipe-opt", "flexpipe-compile"], [config.flexpipe_tools_dir])
