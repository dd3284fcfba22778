"""The pip wheel: `pip wheel .` (scikit-build-core, pyproject.toml) builds one
wheel, which this test inspects and installs into a fresh venv, then runs
`tvmffi-jit --version`, a `tvmffi-jit build` and a Python `load_inline` from
there, with nothing pointing at the build tree.

The wheel compiles the CLI in build-wheel-tree/, without the tests: slow on a
first run unless a Release build/ with the same options (scripts/test.sh's)
has put the objects in ccache. The pip build is given the build/ tree's
TVMFFI_JIT_WERROR, so that its compile commands match; the build type stays
the wheel's own (Release). The tree is kept, so later runs rebuild only what
changed, and the one wheel is shared by every check here (module-scoped
fixtures). pip runs
with build isolation, as users run it, from a local wheelhouse (offline): the
second `pip wheel .` then runs in a new isolated environment, the case that
made scikit-build-core wipe the objects (cmake/wheel.cmake); it costs seconds.
The venv sees the base environment's packages (--system-site-packages), so the
apache-tvm-ffi dependency resolves offline.
"""

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BINARY_DIR = Path(os.environ.get("TVMFFI_JIT_BINARY_DIR", SOURCE_DIR / "build"))
CMAKE_VERSION = re.search(r"project\(tvmffi_jit\s+VERSION\s+([0-9.]+)", (SOURCE_DIR / "CMakeLists.txt").read_text())[1]

ADD = "int64_t add(int64_t a, int64_t b) { return a + b; }"


def clean_env(**extra):
    """The environment minus everything that points at the build tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("TVMFFI_JIT_BIN", "PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    return env


def run(argv, **kw):
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kw)
    assert p.returncode == 0, f"{argv}: exit {p.returncode}\nstdout:\n{p.stdout[-4000:]}\nstderr:\n{p.stderr[-8000:]}"
    return p


WHEEL_BUILD_DIR = SOURCE_DIR / "build-wheel"  # pyproject.toml's build-dir
WHEEL_TREE = SOURCE_DIR / "build-wheel-tree"  # where the pip build compiles (cmake/wheel.cmake)
# scikit-build-core and its dependencies as wheels (scripts/setup.sh downloads
# them): pip builds with build isolation, as users run it, but offline.
BUILD_WHEELHOUSE = BINARY_DIR / "pip-build-wheelhouse"


@pytest.fixture(scope="module")
def build_wheelhouse():
    if not list(BUILD_WHEELHOUSE.glob("scikit_build_core-*.whl")):
        run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", BUILD_WHEELHOUSE,
             "scikit-build-core>=0.11"])
    return BUILD_WHEELHOUSE


def developer_build_werror():
    """The build/ tree's TVMFFI_JIT_WERROR (ON in scripts/test.sh), or None without a configured build/."""
    cache = BINARY_DIR / "CMakeCache.txt"
    found = re.search(r"^TVMFFI_JIT_WERROR:BOOL=(\w+)$", cache.read_text(), re.M) if cache.is_file() else None
    return found[1] if found else None


def pip_wheel(dist, wheelhouse):
    """`pip wheel .` with build isolation: each run installs scikit-build-core into a new temp folder."""
    shutil.rmtree(dist, ignore_errors=True)
    # scikit-build-core would take CXX from Python's sysconfig (g++); c++/cc are
    # what CMake picks for the developer build, so ccache serves its objects.
    env = clean_env(CXX=os.environ.get("CXX", "c++"), CC=os.environ.get("CC", "cc"))
    # -Werror is part of every compile command: the same setting as build/, or
    # no object would be shared through ccache.
    werror = developer_build_werror()
    settings = [f"--config-settings=cmake.define.TVMFFI_JIT_WERROR={werror}"] if werror else []
    run([sys.executable, "-m", "pip", "wheel", SOURCE_DIR, "--no-index", "--find-links", wheelhouse, "--no-deps",
         *settings, "-q", "-w", dist], env=env, cwd=SOURCE_DIR)
    [whl] = dist.glob("*.whl")
    return whl


def skbuild_path():
    """The scikit-build-core a pip build ran (its record in the build dir): a new folder for each isolated build."""
    return json.loads((WHEEL_BUILD_DIR / ".skbuild-info.json").read_text())["skbuild_path"]


def ninja_logs():
    """Every ninja log of the pip build (the outer build's and the tree's): one line per command run."""
    logs = [*WHEEL_BUILD_DIR.glob("**/.ninja_log"), *WHEEL_TREE.glob("**/.ninja_log")]
    return {log: log.read_text().splitlines() for log in logs}


@pytest.fixture(scope="module")
def wheel(build_wheelhouse):
    return pip_wheel(BINARY_DIR / "wheel-dist", build_wheelhouse)


@pytest.fixture(scope="module")
def second_build(wheel, build_wheelhouse):
    """A second `pip wheel .` of the unchanged checkout: what ninja ran for it, and whether it ran in a new
    isolated environment (which makes scikit-build-core wipe its build dir's CMakeFiles/)."""
    before, first_env = ninja_logs(), skbuild_path()
    pip_wheel(BINARY_DIR / "wheel-dist-2", build_wheelhouse)
    ran = [line.split("\t")[3] for log, lines in ninja_logs().items()
           for line in lines[len(before.get(log, [""])):] if line.count("\t") >= 4]
    return {"ran": ran, "new_isolated_env": skbuild_path() != first_env}


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    v = tmp_path_factory.mktemp("venv") / "v"
    run([sys.executable, "-m", "venv", "--system-site-packages", v])
    run([v / "bin" / "python", "-m", "pip", "install", "-q", "--no-index", wheel], env=clean_env())
    return v


def test_wheel_name_says_py3_any_python_and_this_platform(wheel):
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")  # linux_x86_64
    assert wheel.name == f"tvmffi_jit-{CMAKE_VERSION}-py3-none-{platform}.whl"


def auditwheel():
    try:
        import auditwheel  # noqa: F401, PLC0415
    except ImportError:
        pytest.skip("auditwheel is not installed (scripts/setup.sh installs it)")
    return [sys.executable, "-m", "auditwheel"]


def test_auditwheel_finds_the_wheel_manylinux_2_34_and_repair_tags_it_so(wheel, tmp_path):
    shown = run([*auditwheel(), "show", wheel]).stdout
    # "... is consistent with the following platform tag: "manylinux_2_34_x86_64"."
    tag = re.search(r'consistent\s+with\s+the\s+following\s+platform\s+tag:\s*"(manylinux_2_(\d+)_\w+)"', shown)
    assert tag, shown
    assert int(tag[2]) <= 34, shown  # glibc 2.34: no arc4random (2.36), no _dl_find_object (2.35)
    run([*auditwheel(), "repair", "--plat", tag[1], "-w", tmp_path, wheel])
    [repaired] = tmp_path.glob("*.whl")
    assert repaired.name == f"tvmffi_jit-{CMAKE_VERSION}-py3-none-{tag[1]}.whl"
    with zipfile.ZipFile(repaired) as z:  # nothing grafted: only glibc and libgcc_s are needed
        assert not [n for n in z.namelist() if ".libs/" in n]


def test_wheel_is_a_release_build_without_debug_info(wheel, tmp_path):
    cache = (WHEEL_TREE / "CMakeCache.txt").read_text()
    assert re.search(r"^CMAKE_BUILD_TYPE:STRING=Release$", cache, re.M)
    assert re.search(r"^TVMFFI_JIT_BUILD_TESTS:BOOL=OFF$", cache, re.M)
    with zipfile.ZipFile(wheel) as z:
        for name in (f"tvmffi_jit-{CMAKE_VERSION}.data/scripts/tvmffi-jit", "tvmffi_jit/libtvmffi_jit_engine.so"):
            path = Path(z.extract(name, tmp_path))
            sections = run(["readelf", "-S", "-W", path]).stdout
            assert ".text" in sections and ".debug_" not in sections, name


def tree_relative_commands(tree):
    """compile_commands.json of a build tree, keyed by source file, each command with every path in the checkout
    made relative to the tree (../src/... from a tree at the checkout's top): what ccache hashes with
    CCACHE_BASEDIR at the checkout (scripts/test.sh)."""
    def relative(word, directory):
        at = word.find(str(SOURCE_DIR))
        return word if at < 0 else word[:at] + os.path.relpath(word[at:], directory)
    return {os.path.relpath(e["file"], e["directory"]): [relative(w, e["directory"]) for w in shlex.split(e["command"])]
            for e in json.loads((tree / "compile_commands.json").read_text())}


def test_wheel_tree_compiles_every_source_as_a_release_build_does_so_ccache_shares_them(wheel):
    cache = (BINARY_DIR / "CMakeCache.txt").read_text()
    if not re.search(r"^CMAKE_BUILD_TYPE:STRING=Release$", cache, re.M):
        pytest.skip("build/ is not a Release build (scripts/test.sh's is): its objects are not the wheel's")
    wheel_commands, build_commands = tree_relative_commands(WHEEL_TREE), tree_relative_commands(BINARY_DIR)
    assert wheel_commands and set(wheel_commands) <= set(build_commands)
    differ = {f: (c, build_commands[f]) for f, c in wheel_commands.items() if c != build_commands[f]}
    assert differ == {}


def test_second_isolated_pip_wheel_recompiles_nothing(second_build):
    assert second_build["new_isolated_env"]  # the case that used to recompile everything
    compiled = [o for o in second_build["ran"] if o.endswith(".o")]
    assert compiled == [], compiled


def test_wheel_holds_binary_as_script_data_files_and_package_without_tests(wheel):
    data = f"tvmffi_jit-{CMAKE_VERSION}.data"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        script = z.getinfo(f"{data}/scripts/tvmffi-jit")
        assert stat.S_IMODE(script.external_attr >> 16) & 0o111, "the binary is not executable in the wheel"
        metadata = z.read(f"tvmffi_jit-{CMAKE_VERSION}.dist-info/METADATA").decode()
    for expected in [
        f"{data}/data/share/man/man1/tvmffi-jit.1",
        f"{data}/data/share/tvmffi-jit/manifest.schema.json",
        f"{data}/data/share/tvmffi-jit/completions/tvmffi-jit.bash",
        f"{data}/data/share/bash-completion/completions/tvmffi-jit",
        f"{data}/data/share/zsh/site-functions/_tvmffi-jit",
        f"{data}/data/lib/cmake/tvmffi_jit/tvmffi_jitConfig.cmake",
        "tvmffi_jit/__init__.py",
        "tvmffi_jit/_version.py",
        "tvmffi_jit/_engine.py",
        "tvmffi_jit/libtvmffi_jit_engine.so",
    ]:
        assert expected in names, expected
    assert not [n for n in names if "unit_tests" in n or "fakecuda" in n or "/tests/" in n]
    assert f"Version: {CMAKE_VERSION}" in metadata
    # The tvm-ffi versions the wrapper is tested against, and no other.
    assert re.search(r"^Requires-Dist: apache-tvm-ffi<0\.1\.16,>=0\.1\.15$", metadata, re.M), metadata


def test_installed_binary_is_on_the_venv_path_and_needs_only_glibc_and_libgcc(venv):
    binary = venv / "bin" / "tvmffi-jit"
    env = clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    assert shutil.which("tvmffi-jit", path=env["PATH"]) == str(binary)
    out = run(["tvmffi-jit", "--version"], env=env).stdout
    assert out.splitlines()[0] == f"tvmffi-jit {CMAKE_VERSION}"
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", binary]).stdout)
    assert set(needed) <= {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "ld-linux-x86-64.so.2",
                           "ld-linux-aarch64.so.1", "libgcc_s.so.1"}, needed
    assert ".debug_info" not in run(["readelf", "-S", binary]).stdout  # stripped


def test_installed_data_files_are_where_man_shells_and_cmake_look(venv, tmp_path):
    for rel in ["share/man/man1/tvmffi-jit.1", "share/tvmffi-jit/manifest.schema.json",
                "share/bash-completion/completions/tvmffi-jit", "share/zsh/site-functions/_tvmffi-jit",
                "share/tvmffi-jit/examples/add_one/manifest.json", "lib/cmake/tvmffi_jit/tvmffi_jitConfig.cmake"]:
        assert (venv / rel).is_file(), rel
    json.loads((venv / "share/tvmffi-jit/manifest.schema.json").read_text())
    # find_package(tvmffi_jit) from the venv's prefix gives the binary pip put in bin/.
    project = tmp_path / "cmake_project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(probe LANGUAGES NONE)\n"
        "find_package(tvmffi_jit REQUIRED)\nmessage(STATUS \"EXE=${TVMFFI_JIT_EXECUTABLE}\")\n")
    out = run(["cmake", "-S", project, "-B", project / "build", f"-DCMAKE_PREFIX_PATH={venv}"]).stdout
    assert f"EXE={venv / 'bin' / 'tvmffi-jit'}" in out


def test_installed_cli_builds_the_installed_example(venv, tmp_path):
    env = clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                    TVMFFI_JIT_CACHE_DIR=str(tmp_path / "cache"))
    manifest = venv / "share/tvmffi-jit/examples/add_one/manifest.json"
    path = run(["tvmffi-jit", "build", "-m", manifest], env=env).stdout.strip()
    code = "import sys, tvm_ffi; print(tvm_ffi.load_module(sys.argv[1]).add(2, 3))"
    assert run([venv / "bin" / "python", "-c", code, path], env=env).stdout.strip() == "5"


def test_installed_package_finds_its_binary_and_load_inline_works(venv, tmp_path):
    code = f"""
import sys, tvmffi_jit
assert "tvm_ffi" not in sys.modules
print(tvmffi_jit.find_binary())
print(tvmffi_jit.__version__)
mod = tvmffi_jit.load_inline("wheel_add", cpp_sources={ADD!r}, functions=["add"])
print(mod.add(2, 3))
from tvmffi_jit import _engine
print(_engine.library_path())
mod = tvmffi_jit.load_inline("wheel_add", cpp_sources={ADD!r}, functions=["add"])  # a hit, in-process
print(_engine._engine is not None and _engine._engine is not _engine._UNSET)
"""
    # PATH without the venv: the package must find the binary next to itself.
    env = clean_env(TVMFFI_JIT_CACHE_DIR=str(tmp_path / "cache"))
    out = run([venv / "bin" / "python", "-c", code], env=env, cwd=tmp_path).stdout.splitlines()
    site = run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    assert out == [str(venv / "bin" / "tvmffi-jit"), CMAKE_VERSION, "5",
                   os.path.join(site, "tvmffi_jit", "libtvmffi_jit_engine.so"), "True"]
