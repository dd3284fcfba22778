"""What the user sees when something is wrong: the exit code of each kind of
mistake, messages that say what and where, command-line errors that suggest
the right word, global options accepted anywhere, and nothing written when a
manifest is refused.

Builds here compile one tiny C++ file at most, so the file runs in seconds.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BAD = SOURCE_DIR / "tests" / "manifests" / "bad"
CPP_SOURCE = "int tvmffi_jit_errors_answer() { return 42; }\n"


def run(*args, env=None, cwd=None, check=None, **kwargs):
    p = subprocess.run([TOOL, *map(str, args)], env=env, cwd=cwd, capture_output=True, text=True, **kwargs)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e["TVMFFI_JIT_CACHE_DIR"] = str(tmp_path / "cache")
    return e


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "answer.cc"
    path.write_text(CPP_SOURCE)
    return path


# --- command-line errors ---------------------------------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["frob"], "tvmffi-jit: error: unknown command 'frob' for tvmffi-jit"),
    (["buidl"], "tvmffi-jit: error: unknown command 'buidl' for tvmffi-jit, did you mean 'build'?"),
    (["cache", "lst"], "tvmffi-jit: error: unknown command 'lst' for tvmffi-jit cache, did you mean 'list'?"),
    (["build", "--forse", "x.cc"],
     "tvmffi-jit: error: unknown option '--forse' for tvmffi-jit build, did you mean '--force'?"),
    (["inspect", "--jsn", "x"], "tvmffi-jit: error: unknown option '--jsn' for tvmffi-jit inspect, did you mean '--json'?"),
    (["cache"], "tvmffi-jit: error: missing command: tvmffi-jit cache needs one of path, list, show"),
    (["doctor", "extra"], "tvmffi-jit: error: unexpected argument 'extra' for tvmffi-jit doctor"),
])
def test_unknown_commands_and_options_are_named_with_a_suggestion(argv, expected, env):
    p = run(*argv, env=env, check=2)
    assert p.stderr.startswith(expected), p.stderr
    assert "A subcommand is required" not in p.stderr and p.stdout == ""


def test_global_options_are_accepted_before_and_after_the_subcommand(tmp_path, env):
    root = tmp_path / "elsewhere"
    assert run("--cache-dir", root, "cache", "path", env=env, check=0).stdout == f"{root}\n"
    assert run("--cache-dir=" + str(root), "cache", "path", env=env, check=0).stdout == f"{root}\n"
    assert run("cache", "path", "--cache-dir", root, env=env, check=0).stdout == f"{root}\n"
    stats = json.loads(run("--json", "--cache-dir", root, "cache", "stats", env=env, check=0).stdout)
    assert stats["root"] == str(root)
    assert json.loads(run("--json", "doctor", "--cache-dir", root, env=env).stdout)["cache"]["root"] == str(root)
    # A global option the subcommand has no use for is named as such.
    p = run("--cache-dir", root, "inspect", "x.cubin", env=env, check=2)
    assert "tvmffi-jit inspect takes no --cache-dir" in p.stderr


def test_verbose_and_quiet_are_accepted_anywhere(source, env):
    for argv in (["-v", "build", source, "--no-cache"], ["build", source, "--no-cache", "-v"]):
        p = run(*argv, env=env, check=0)
        assert "info: " in p.stderr and " -c " in p.stderr, p.stderr  # the compile command is shown
    for argv in (["-q", "build", source, "--no-cache"], ["build", source, "--no-cache", "-q"]):
        assert run(*argv, env=env, check=0).stderr == ""


def test_build_with_nothing_to_build_says_what_to_give(env):
    p = run("build", env=env, check=2)
    assert "nothing to build: give source files" in p.stderr and "-m manifest.json" in p.stderr
    assert "--name: required" not in p.stderr


def test_command_line_mistakes_name_the_flag_not_a_json_pointer(source, env):
    p = run("build", source, "--compiler", "nvrtc", env=env, check=2)
    assert "command line: --compiler: nvrtc compiles only for emit cubin or ptx" in p.stderr, p.stderr
    assert "/compiler" not in p.stderr
    p = run("build", source, "--kernel-name", "k<int>", env=env, check=2)
    assert "command line: --kernel-name:" in p.stderr and "/kernel_names" not in p.stderr


def test_missing_manifest_message_has_its_colon(tmp_path, env):
    p = run("build", "-m", tmp_path / "none.json", env=env, check=2)
    assert p.stderr.startswith('tvmffi-jit: error: manifest: no such file "'), p.stderr


def test_version_prints_at_once_without_running_python(tmp_path, env):
    # tvm-ffi-config and python3 that leave a mark: --version must not run them.
    marks = tmp_path / "marks"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("tvm-ffi-config", "python3", "nvcc"):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\necho {name} >> {marks}\nexit 1\n")
        script.chmod(0o755)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    start = time.monotonic()
    p = run("--version", env=env, check=0)
    elapsed = time.monotonic() - start
    assert p.stdout.strip().startswith("tvmffi-jit ") and len(p.stdout.splitlines()) == 1, p.stdout
    assert not marks.exists(), marks.read_text()
    assert elapsed < 5  # generous; the point is that nothing is probed


# --- exit codes of hostile manifests (#11 item 10) -------------------------------------

def test_json_number_overflow_is_exit_2_not_an_internal_error(env):
    p = run("build", "-m", BAD / "number_overflow.json", env=env, check=2)
    assert "internal error" not in p.stderr
    assert "number 1e999 is out of range" in p.stderr and "line 1, column" in p.stderr


def test_too_long_module_name_is_exit_2_before_anything_is_written(tmp_path, env):
    cache = Path(env["TVMFFI_JIT_CACHE_DIR"])
    p = run("build", "-m", BAD / "name_too_long.json", env=env, check=2)
    assert "name_too_long.json: /name: module name" in p.stderr and "300 characters long" in p.stderr
    assert not cache.exists(), list(cache.rglob("*"))  # no toolchain/ or compilers/ memo either
    before = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("tvmffi-jit-aaaa*"))
    run("build", "-m", BAD / "name_too_long.json", "--no-cache", env=env, check=2)
    assert set(Path(os.environ.get("TMPDIR", "/tmp")).glob("tvmffi-jit-aaaa*")) == before


def test_a_nul_in_a_name_does_not_cut_the_message(env):
    p = run("build", "-m", BAD / "name_with_nul.json", env=env, check=2)
    assert 'module name "ab\\x00cd" is not an identifier' in p.stderr, repr(p.stderr)


def test_too_many_flags_are_exit_2_naming_the_key_never_4(tmp_path, source, env):
    arg_max = os.sysconf("SC_ARG_MAX")
    manifest = tmp_path / "big.json"
    manifest.write_text(json.dumps({"name": "big", "sources": [str(source)],
                                    "extra_cflags": ["-DX=1"] * (arg_max // 8)}))
    p = run("build", "-m", manifest, "--no-cache", env=env, check=2)
    assert "/extra_cflags:" in p.stderr and "E2BIG" in p.stderr and "response file" in p.stderr


def test_a_deleted_current_directory_does_not_break_a_build_with_absolute_paths(tmp_path, source, env):
    gone = tmp_path / "gone"
    gone.mkdir()
    # The shell enters the directory, removes it, then runs the tool from there.
    script = f'cd "{gone}" && rmdir "{gone}" && exec "$@"'
    for extra in (["--no-cache"], [], []):  # uncached, cached miss, cached hit
        p = subprocess.run(["sh", "-c", script, "sh", TOOL, "-q", "build", str(source), *extra], env=env,
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert Path(p.stdout.strip()).is_file()
        gone.mkdir()
    p = subprocess.run(["sh", "-c", script, "sh", TOOL, "-q", "build", "answer.cc"], env=env,
                       capture_output=True, text=True)
    assert p.returncode != 0 and "the current directory is unavailable" in p.stderr


def test_proc_pseudo_files_are_refused_as_sources_and_embeds(tmp_path, source, env):
    link = tmp_path / "environ.cc"
    link.symlink_to("/proc/self/environ")
    p = run("build", link, "--no-cache", env=env, check=2)
    assert "is a pseudo-file" in p.stderr and "not a file with real content" in p.stderr
    p = run("build", source, "--embed-cubin", "k=/proc/self/maps", "--no-cache", env=env, check=2)
    assert "is a pseudo-file" in p.stderr


def test_inspect_of_a_proc_file_says_pseudo_file_not_empty_file(env):
    p = run("inspect", "/proc/self/maps", env=env)
    assert p.returncode != 0
    assert "empty file" not in p.stdout + p.stderr
    assert "pseudo-file" in p.stderr


def test_a_fifo_source_is_refused_without_hanging(tmp_path, env):
    fifo = tmp_path / "pipe.cc"
    os.mkfifo(fifo)
    p = run("build", fifo, "--no-cache", env=env, check=2, timeout=30)
    assert "is not a regular file (a FIFO)" in p.stderr


def test_an_unreadable_source_says_permission_denied(tmp_path, env):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "s.cc").write_text(CPP_SOURCE)
    locked.chmod(0)
    nobody_cache = None
    try:
        if os.geteuid() == 0:
            # Root reads anything: run the tool as nobody, who cannot enter `locked`.
            tmp_path.chmod(0o755)
            nobody = 65534
            kwargs = {"user": nobody, "group": nobody, "extra_groups": []}
            # A cache root nobody can reach and write (tmp_path's parents are private), removed below.
            nobody_cache = tempfile.mkdtemp(prefix="tvmffi-jit-errors-test-nobody-", dir="/tmp")
            os.chown(nobody_cache, nobody, nobody)
            env["TVMFFI_JIT_CACHE_DIR"] = nobody_cache
        else:
            kwargs = {}
        p = subprocess.run([TOOL, "build", str(locked / "s.cc"), "--no-cache"], env=env, capture_output=True,
                           text=True, **kwargs)
    finally:
        locked.chmod(0o755)
        if nobody_cache:
            shutil.rmtree(nobody_cache, ignore_errors=True)
    assert p.returncode == 2, p.stderr
    assert "permission denied" in p.stderr and "no such file" not in p.stderr, p.stderr


# --- doctor ---------------------------------------------------------------------------

def test_doctor_names_the_tvm_ffi_header_and_package_versions(env):
    report = json.loads(run("doctor", "--json", env=env).stdout)
    tvm = report["tvm_ffi"]
    assert tvm["found"], tvm
    assert tvm["version"] == tvm["header_version"]
    import importlib.metadata
    assert tvm["package_version"] == importlib.metadata.version("apache-tvm-ffi")
    text = run("doctor", env=env).stdout
    line = next(l for l in text.splitlines() if " tvm-ffi " in l)
    assert f"headers {tvm['header_version']}, package {tvm['package_version']}" in line, line


# --- NVRTC ------------------------------------------------------------------------------

def test_nvrtc_host_header_error_gets_a_cuda_std_hint_that_works(tmp_path, env):
    report = json.loads(run("doctor", "--json", env=env).stdout)
    if not report["compilers"]["nvrtc"]["found"]:
        pytest.skip("no NVRTC on this machine")
    host = tmp_path / "host.cu"
    host.write_text("#include <cstdint>\n__global__ void k(int32_t* x) { x[0] = 1; }\n")
    p = run("build", host, "--emit", "ptx", "--compiler", "nvrtc", "--arch", "9.0", "--no-cache", env=env, check=1)
    assert "hint: NVRTC has no host C++ headers: include <cuda/std/cstdint> instead of <cstdint>" in p.stderr
    # The hint is right: the suggested header compiles.
    fixed = tmp_path / "fixed.cu"
    fixed.write_text("#include <cuda/std/cstdint>\n__global__ void k(cuda::std::int32_t* x) { x[0] = 1; }\n")
    run("build", fixed, "--emit", "ptx", "--compiler", "nvrtc", "--arch", "9.0", "--no-cache", env=env, check=0)


@pytest.mark.parametrize("argv, expected", [
    # A mistyped option that takes a value is named, not what CLI11 tripped on next.
    (["cache", "gc", "--older-than", "30d"],
     "tvmffi-jit: error: unknown option '--older-than' for tvmffi-jit cache gc: it is an option of tvmffi-jit cache clean"),
    (["cache", "clean", "--older", "30d"],
     "tvmffi-jit: error: unknown option '--older' for tvmffi-jit cache clean, did you mean '--older-than'?"),
    (["-o", "x.so", "build", "x.cc"],
     "tvmffi-jit: error: unknown option '-o' for tvmffi-jit: it is an option of tvmffi-jit build (write it after 'build')"),
])
def test_a_mistyped_option_with_a_value_is_reported_as_itself(argv, expected, env):
    p = run(*argv, env=env, check=2)
    assert p.stderr.startswith(expected), p.stderr
    assert "is required" not in p.stderr and "unexpected argument" not in p.stderr


def test_mem_per_job_without_a_unit_is_exit_2_saying_so(source, env):
    p = run("build", source, "--mem-per-job", "4096", env=env, check=2)
    assert "--mem-per-job 4096: a size needs a unit; write 4096M " in p.stderr
    assert "4096G" not in p.stderr  # one suggestion, the plausible one
    p = run("build", source, "--mem-per-job", "6", env=env, check=2)
    assert "--mem-per-job 6: a size needs a unit; write 6G " in p.stderr and "6M" not in p.stderr


@pytest.mark.skipif(not shutil.which("nvcc") and not os.path.exists("/usr/local/cuda/bin/nvcc"), reason="needs nvcc")
def test_an_arch_nvcc_cannot_compile_for_is_exit_2_before_anything_is_built(tmp_path, env):
    e = dict(env, PATH="/usr/local/cuda/bin:" + env.get("PATH", ""))
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k(float* x) { x[0] = 1; }\n")
    out = tmp_path / "out"
    p = run("build", cu, "--emit", "cubin", "--arch", "9.5", "--build-dir", out, env=e, check=2)
    assert "--arch: " in p.stderr and "cannot compile for 9.5; it supports " in p.stderr, p.stderr
    assert " 9.0 " in p.stderr  # the supported list, from nvcc --list-gpu-arch
    assert not out.exists()
    # Cached: no staging or entry left, and the list is memoised with nvcc's identity.
    p = run("build", cu, "--emit", "cubin", "--arch", "9.5", env=e, check=2)
    cache = Path(env["TVMFFI_JIT_CACHE_DIR"])
    memo = list((cache / "toolchain").glob("nvcc-archs-*.json"))
    assert len(memo) == 1 and 90 in json.loads(memo[0].read_text())["archs"]
    assert not [d for d in cache.iterdir() if d.name.startswith(("k_", "staging"))]
