"""Build time is part of the code's shape (docs/benchmarks.md, "Build and CI
time"): fmt and spdlog are compiled once (src/util/fmt_spdlog.cpp), so a file
that logs or formats carries declarations only. Header-only, each such file
compiled fmt's whole formatting engine again (seconds at -O2 -g, ~70 KB of
code per object). These tests compile a probe with the real compile command of
a layer (compile_commands.json) and look at what the object defines.
"""

import re
import subprocess

from test_layers import layer_command


# The formatting engine: the argument parser, integer and float writers. (A
# small buffer class and its vtable are header code and stay.)
ENGINE = re.compile(r"fmt::v\d+::detail::(vformat_to|parse_replacement_field|write_int|do_write_float|format_float|"
                    r"dragonbox|format_dragon)")


def engine_functions(layer, source, tmp_path):
    argv, directory = layer_command(layer)
    probe = tmp_path / "probe.cpp"
    probe.write_text(source)
    obj = tmp_path / "probe.o"
    subprocess.run([*argv, "-c", str(probe), "-o", str(obj)], cwd=directory, check=True)
    nm = subprocess.run(["nm", "--defined-only", "-C", str(obj)], capture_output=True, text=True, check=True)
    assert "probe(" in nm.stdout or "probe[abi:cxx11](" in nm.stdout
    return sorted({m.group(0) for m in ENGINE.finditer(nm.stdout)})


def test_a_file_that_logs_does_not_compile_fmts_formatting_engine(tmp_path):
    assert engine_functions("compile", """
#include "tvmffi_jit/util/log.h"
void probe(int n, double x, const char* s) { spdlog::info("{} {} {}", n, x, s); }
""", tmp_path) == []


def test_a_file_that_formats_does_not_compile_fmts_formatting_engine(tmp_path):
    assert engine_functions("devcode", """
#include <string>
#include <fmt/format.h>
std::string probe(int n, double x) { return fmt::format("{:>8} {:.3f}", n, x); }
""", tmp_path) == []
