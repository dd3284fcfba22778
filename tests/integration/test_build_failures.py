"""What a failed build tells a script and a person.

* `build --json` that fails prints one JSON object on stdout (share/tvmffi-jit/
  build.schema.json, "failure"): the exit code it returns, the error and the
  failed command with its whole output; a failed module of a batch carries
  the same failed_command.
* An export defined in another source of a mixed module (the .cu beside the
  .cc that holds the export wrappers, as tvm_ffi.cpp puts them) is diagnosed
  in one line, first, naming the function and the file to declare it in.
* NVRTC's failure (in-process: there is no command to re-run) does not
  speak of "the command above".
* `cache list` has a header row.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
HAVE_NVCC = (CUDA_HOME / "bin" / "nvcc").exists() or shutil.which("nvcc")


def validator(definition):
    schema = json.loads((SOURCE_DIR / "share" / "tvmffi-jit" / "build.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    whole = jsonschema.Draft202012Validator(schema)
    one = jsonschema.Draft202012Validator({**{k: v for k, v in schema.items() if k != "anyOf"},
                                            "$ref": f"#/$defs/{definition}"})
    return whole, one


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, TVMFFI_JIT_CACHE_DIR=str(tmp_path / "cache"), TVM_FFI_CUDA_ARCH_LIST="9.0")
    for k in ("TVMFFI_JIT_REMOTE", "TVM_FFI_GPU_BACKEND", "CXX", "CC", "TVMFFI_JIT_CXX_LAUNCHER"):
        e.pop(k, None)
    return e


def run(*args, env, cwd=None):
    return subprocess.run([TOOL, *map(str, args)], env=env, cwd=cwd, capture_output=True, text=True)


def test_a_failed_single_build_json_is_one_object_with_exit_code_error_and_the_compilers_output(tmp_path, env):
    whole, failure = validator("failure")
    (tmp_path / "broken.cc").write_text("int broken() { return undeclared_thing; }\n")
    for extra in ([], ["--no-cache"], ["--build-dir", tmp_path / "b"]):
        p = run("build", "--json", tmp_path / "broken.cc", *extra, env=env)
        assert p.returncode == 1
        j = json.loads(p.stdout)  # one object, nothing else
        whole.validate(j)
        failure.validate(j)
        assert j["status"] == "failed" and j["exit_code"] == 1 and j["name"] == "broken"
        assert "compiling" in j["error"] and "undeclared_thing" in j["error"]
        command = j["failed_command"]
        assert command["argv"][-1] == "cpp_0.o" and "-c" in command["argv"]
        assert "undeclared_thing" in command["output"] and command["status"] == "exit status 1"
        assert "undeclared_thing" in p.stderr  # stderr says it as without --json
    # A bad manifest (exit 2) and a missing tool (exit 4) are objects too, with their own codes.
    (tmp_path / "bad.json").write_text('{"name": "bad", "functions": ["1add"], "cpp_sources": "int x;"}')
    p = run("build", "--json", "-m", tmp_path / "bad.json", env=env)
    j = json.loads(p.stdout)
    failure.validate(j)
    assert p.returncode == j["exit_code"] == 2 and "1add" in j["error"] and "failed_command" not in j
    p = run("build", "--json", tmp_path / "broken.cc", env=dict(env, CXX=str(tmp_path / "no-such-c++")))
    j = json.loads(p.stdout)
    failure.validate(j)
    assert p.returncode == j["exit_code"] == 4


def test_a_failed_module_of_a_batch_carries_its_failed_command(tmp_path, env):
    whole, _ = validator("batch_line")
    (tmp_path / "ok.json").write_text(json.dumps({"name": "ok", "cpp_sources": "int ok() { return 1; }"}))
    (tmp_path / "ko.json").write_text(json.dumps({"name": "ko", "cpp_sources": "int ko() { return nope; }"}))
    p = run("build", "--json", "-k", "-m", tmp_path / "ok.json", "-m", tmp_path / "ko.json", env=env)
    assert p.returncode == 1
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    for line in lines:
        whole.validate(line)
    ko = [line for line in lines if line["name"] == "ko"][0]
    assert ko["status"] == "failed" and "nope" in ko["failed_command"]["output"]


def mixed_module(folder, other_ext):
    (folder / "host.cc").write_text("#include <cstdint>\nint64_t helper() { return 1; }\n")
    (folder / f"kernels{other_ext}").write_text("#include <cstdint>\nint64_t blocks(int64_t n) { return (n + 255) / 256; }\n")
    (folder / "m.json").write_text(json.dumps({"name": "mixed", "sources": ["host.cc", f"kernels{other_ext}"],
                                               "functions": ["blocks"]}))
    return folder / "m.json"


@pytest.mark.parametrize("other_ext", [".cu", ".cc"])
def test_an_export_defined_in_the_other_source_of_a_mixed_module_is_one_line_first(tmp_path, env, other_ext):
    if other_ext == ".cu" and not HAVE_NVCC:
        pytest.skip("no nvcc")
    manifest = mixed_module(tmp_path, other_ext)
    p = run("build", "-m", manifest, env=env)
    assert p.returncode == 1
    errors = [line for line in p.stderr.splitlines() if line.startswith("tvmffi-jit: error:")]
    assert errors[0] == ('tvmffi-jit: error: exported function "blocks" is not declared in host.cc, the source that '
                         "holds the export wrappers (as in tvm_ffi.cpp): declare it there (a prototype is enough "
                         "when another source defines it)"), p.stderr
    assert "was not declared" in p.stderr  # the compiler's own output follows
    # The advice works: a prototype in host.cc, and it builds.
    (tmp_path / "host.cc").write_text("#include <cstdint>\nint64_t blocks(int64_t n);\n")
    p = run("build", "-m", manifest, env=env)
    assert p.returncode == 0, p.stderr


def test_an_export_missing_everywhere_in_a_single_source_is_diagnosed_the_same(tmp_path, env):
    (tmp_path / "one.json").write_text(json.dumps({"name": "one", "cpp_sources": "int here() { return 1; }",
                                                   "functions": ["gone"]}))
    p = run("build", "--json", "-m", tmp_path / "one.json", env=env)
    j = json.loads(p.stdout)
    assert j["error"].startswith('exported function "gone" is not declared in cpp_sources,'), j["error"]


def test_an_nvrtc_failure_does_not_speak_of_a_command_above(tmp_path, env):
    (tmp_path / "bad.cu").write_text("__global__ void k(int* x) { x[0] = undeclared; }\n")
    p = run("build", tmp_path / "bad.cu", "--emit", "cubin", "--compiler", "nvrtc", "--arch", "9.0", env=env)
    if p.returncode == 4:
        pytest.skip(f"no NVRTC: {p.stderr.strip()}")
    assert p.returncode == 1 and "NVRTC failed to compile" in p.stderr
    assert "command above" not in p.stderr and "re-run" not in p.stderr, p.stderr
    assert "is kept with what the build wrote" in p.stderr


def test_cache_list_has_a_header_row(tmp_path, env):
    (tmp_path / "a.cc").write_text("int a() { return 1; }\n")
    assert run("build", tmp_path / "a.cc", env=env).returncode == 0
    lines = run("cache", "list", env=env).stdout.splitlines()
    assert lines[0].split() == ["NAME", "KEY", "SIZE", "LAST", "USED", "ARTIFACT"]
    assert lines[1].split()[0] == "a" and lines[1].endswith("a.so")
    assert lines[0].index("ARTIFACT") == lines[1].index("a.so")  # aligned columns
