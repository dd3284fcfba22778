"""The layer rule of ARCHITECTURE.md is enforced by the build itself: each
layer compiles against an include tree holding only the layers it may use, so
including a forbidden layer -- a public header or a private src/<layer>/
header -- fails to compile. These tests take the real compile command of one
source of each layer from compile_commands.json and compile a probe file with
it.
"""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

BINARY_DIR = Path(os.environ["TVMFFI_JIT_BINARY_DIR"])
SOURCE_DIR = Path(os.environ["TVMFFI_JIT_SOURCE_DIR"])

# layer -> the layers it may use (ARCHITECTURE.md), and one header of every layer.
ALLOWED = {
    "util": {"util"},
    "toolchain": {"util", "toolchain"},
    "devcode": {"util", "devcode"},
    "cache": {"util", "cache"},
    "compile": {"util", "toolchain", "cache", "devcode", "compile"},
    "driver": {"util", "toolchain", "devcode", "driver"},
    "cli": {"util", "toolchain", "cache", "devcode", "compile", "driver", "cli"},
}
PUBLIC_HEADER = {
    "util": "tvmffi_jit/util/fs.h",
    "toolchain": "tvmffi_jit/toolchain/toolchain.h",
    "devcode": "tvmffi_jit/devcode/report.h",
    "cache": "tvmffi_jit/cache/store.h",
    "compile": "tvmffi_jit/compile/plan.h",
    "driver": "tvmffi_jit/driver/validate.h",
    "cli": "tvmffi_jit/cli/app.h",
}
# A private header of a layer, included the way its own sources include it.
PRIVATE_HEADER = {"compile": "compile/command.h", "devcode": "devcode/elf.h"}


def layer_command(layer):
    """The compiler argv CMake uses for a source of `layer`, minus -o/-c/input."""
    entries = json.loads((BINARY_DIR / "compile_commands.json").read_text())
    for e in entries:
        if f"/src/{layer}/" in e["file"] and e["file"].endswith(".cpp"):
            argv = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
            out, skip = [], False
            for a in argv:
                if skip:
                    skip = False
                    continue
                if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
                    skip = a != "-c"
                    continue
                if a == e["file"] or a in ("-MD", "-MMD"):
                    continue
                out.append(a)
            if out and Path(out[0]).name == "ccache":
                out = out[1:]
            return out, e["directory"]
    pytest.fail(f"no compile command for a source of layer {layer}")


def compiles(layer, include, tmp_path):
    argv, directory = layer_command(layer)
    probe = tmp_path / f"probe_{layer}.cpp"
    probe.write_text(f'#include "{include}"\nint tvmffi_jit_layer_probe;\n')
    p = subprocess.run([*argv, "-fsyntax-only", str(probe)], cwd=directory, capture_output=True, text=True)
    return p.returncode == 0, p.stderr


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_compiles_only_against_the_layers_it_may_use(layer, tmp_path):
    for other, header in PUBLIC_HEADER.items():
        ok, err = compiles(layer, header, tmp_path)
        if other in ALLOWED[layer]:
            assert ok, f"{layer} must be able to include {header}:\n{err}"
        else:
            assert not ok, f"{layer} may not use {other}, yet {header} compiled"


@pytest.mark.parametrize("owner,header", sorted(PRIVATE_HEADER.items()))
def test_a_private_src_header_is_visible_to_its_own_layer_only(owner, header, tmp_path):
    for layer in ALLOWED:
        ok, _ = compiles(layer, header, tmp_path)
        assert ok == (layer == owner), f"{layer} including {header}: compiled={ok}"


def test_the_shipped_binary_does_not_depend_on_a_test_helper():
    ninja = (BINARY_DIR / "build.ninja").read_text()
    for line in ninja.splitlines():
        if line.startswith("build tvmffi-jit:"):
            assert "fakecuda" not in line, line
            break
    else:
        pytest.fail("no build statement for tvmffi-jit in build.ninja")


def test_no_source_reaches_another_layer_by_a_relative_include():
    # "../compile/x.h" would resolve next to the including file and bypass the
    # include trees above; no source of ours needs such a path.
    offenders = []
    for folder in ("src", "include"):
        for f in (SOURCE_DIR / folder).rglob("*"):
            if f.suffix in (".h", ".cpp"):
                for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                    if line.lstrip().startswith("#include") and '"..' in line.replace(" ", "") or "/../" in line and "#include" in line:
                        offenders.append(f"{f.relative_to(SOURCE_DIR)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_no_two_sources_of_src_call_each_other_round_a_circle():
    # scripts/include_graph.py: the graph of which source's code calls which
    # (object files' symbols, a header and its source as one node). A circle
    # means neither side can be read, tested or moved without the other.
    p = subprocess.run([sys.executable, str(SOURCE_DIR / "scripts" / "include_graph.py"), "--build", str(BINARY_DIR),
                        "--source", str(SOURCE_DIR)], capture_output=True, text=True)
    assert p.returncode == 0 and not p.stdout, p.stdout + p.stderr


def test_the_parts_of_a_cached_build_include_its_options_not_the_orchestrator():
    # compile/cached_build_options.h holds what they read; only the
    # orchestrator itself (and its callers above compile) include cached_build.h.
    offenders = []
    for f in sorted((SOURCE_DIR / "src" / "compile").iterdir()):
        if f.suffix in (".h", ".cpp") and f.name != "cached_build.cpp":
            for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                if re.match(r'\s*#\s*include\s+"tvmffi_jit/compile/cached_build\.h"', line):
                    offenders.append(f"{f.relative_to(SOURCE_DIR)}:{n}")
    assert not offenders, "include compile/cached_build_options.h instead: " + ", ".join(offenders)
