"""The tool around the tool: --help for every subcommand, --version, the man
page, shell completions, the manifest schema against the parser, progress
output, --depfile/--output/--compile-commands, a Makefile and a CMake project
built against the installed package, and `doctor --json`.

Every build here compiles a C file or a tiny C++ file (no CUDA), so the whole
file stays well under a minute and a half.
"""

import json
import os
import pty
import re
import select
import shutil
import subprocess
import time
from pathlib import Path

import jsonschema
import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BINARY_DIR = Path(os.environ.get("TVMFFI_JIT_BINARY_DIR", Path(TOOL).resolve().parent))
SHARE = SOURCE_DIR / "share" / "tvmffi-jit"
MAN_PAGE = SOURCE_DIR / "man" / "tvmffi-jit.1"
BASH_COMPLETION = SHARE / "completions" / "tvmffi-jit.bash"
ZSH_COMPLETION = SHARE / "completions" / "_tvmffi-jit"
SCHEMA = SHARE / "manifest.schema.json"
MANIFESTS = SOURCE_DIR / "tests" / "manifests"
FAKE_LIBCUDA = BINARY_DIR / "tests" / "fake_libcuda" / "libfakecuda.so"


def run(*args, env=None, cwd=None, check=None, **kwargs):
    p = subprocess.run([TOOL, *map(str, args)], env=env, cwd=cwd, capture_output=True, text=True, **kwargs)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


@pytest.fixture
def env(tmp_path):
    """The process environment with a private cache, so tests neither see nor fill the user's."""
    e = dict(os.environ)
    e["TVMFFI_JIT_CACHE_DIR"] = str(tmp_path / "cache")
    for var in ("NO_COLOR", "CLICOLOR_FORCE", "FORCE_COLOR"):
        e.pop(var, None)
    return e


# --- help, version, man page, completions -----------------------------------------------

def listed_subcommands(help_text):
    """The names under "Subcommands:" in a CLI11 help screen."""
    names, inside = [], False
    for line in help_text.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
            continue
        if inside:
            m = re.match(r"^  (\S+)\s", line + " ")
            if m:
                names.append(m.group(1))
            elif line and not line.startswith(" "):
                inside = False
    return names


def listed_options(help_text):
    """Every --long and -s option in a CLI11 help screen (the Options: part)."""
    options = set()
    for line in help_text.splitlines():
        m = re.match(r"^\s+((?:-[A-Za-z],)?--[a-z][a-z0-9-]*|-[A-Za-z])\b", line)
        if m:
            for opt in m.group(1).split(","):
                options.add(opt)
    options.discard("-h")
    options.discard("--help")
    return options


@pytest.fixture(scope="module")
def command_helps():
    """{"build": help text, ..., "cache gc": help text} for every (sub)command `--help` lists."""
    top = run("--help", check=0).stdout
    helps = {}
    for name in listed_subcommands(top):
        text = run(name, "--help", check=0).stdout
        helps[name] = text
        for sub in listed_subcommands(text):
            helps[f"{name} {sub}"] = run(name, sub, "--help", check=0).stdout
    return helps


def test_every_subcommand_has_help(command_helps):
    top_level = [c for c in command_helps if " " not in c]
    assert {"build", "inspect", "cache", "doctor"} <= set(top_level)
    for command, text in command_helps.items():
        assert f"Usage: tvmffi-jit {command}" in text, command
        assert listed_options(text) or command.startswith("cache"), f"{command} --help lists no options"


def man_escape(option):
    return option.replace("-", "\\-")


def test_man_page_documents_every_subcommand_and_option(command_helps):
    page = MAN_PAGE.read_text()
    for command, text in command_helps.items():
        name = command.split()[-1]
        assert re.search(rf"^\.(SS|TP|B|BR|BI)\b.*\b{re.escape(name)}\b", page, re.M), f"man page lacks {command}"
        for option in listed_options(text):
            assert man_escape(option) in page, f"man page lacks {command} {option}"


def test_man_page_renders_without_warnings(tmp_path):
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed (scripts/setup.sh installs it)")
    p = subprocess.run([groff, "-man", "-ww", "-z", str(MAN_PAGE)], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    if shutil.which("man"):
        p = subprocess.run(["man", "--warnings", "-l", str(MAN_PAGE)], capture_output=True, text=True,
                           env={**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": "0"})
        assert p.returncode == 0 and p.stderr == "", p.stderr
        text = re.sub(r".\x08", "", p.stdout)  # overstrike bold/underline when not on a terminal
        for section in ("SYNOPSIS", "COMMANDS", "MANIFEST", "ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES"):
            assert section in text


def test_man_page_names_every_exit_code_and_variable():
    page = MAN_PAGE.read_text()
    exit_section = page.split(".SH EXIT STATUS", 1)[1].split(".SH", 1)[0]
    assert re.findall(r"^\.B ([0-9])$", exit_section, re.M) == ["0", "1", "2", "3", "4", "5"]
    sources = "\n".join(p.read_text() for d in ("src", "include") for p in (SOURCE_DIR / d).rglob("*")
                        if p.suffix in (".cpp", ".h"))
    # Every TVMFFI_JIT_* / TVM_FFI_* variable the code reads is documented.
    for var in set(re.findall(r'"((?:TVMFFI_JIT|TVM_FFI)_[A-Z_]+)"', sources)):
        if var.startswith("TVM_FFI_VERSION_"):
            continue  # header macros, not environment variables
        assert man_escape(var).replace("\\-", "-") in page.replace("\\-", "-"), f"man page lacks {var}"


def test_version_is_the_tool_alone_and_doctor_reports_the_toolchain(env):
    env["TVMFFI_JIT_LIBCUDA"] = "/nonexistent/libcuda.so.1"
    p = run("--version", env=env, check=0)
    assert re.fullmatch(r"tvmffi-jit \d+\.\d+\.\d+\n", p.stdout), p.stdout
    report = json.loads(run("doctor", "--json", env=env).stdout)
    assert report["tool"]["version"] == p.stdout.split()[1]
    assert {"tvm_ffi", "driver"} <= set(report) and "nvcc" in report["compilers"]


def test_bash_completion_loads_and_completes(command_helps):
    p = subprocess.run(["bash", "-c", f"source {BASH_COMPLETION} && complete -p tvmffi-jit"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.strip() == "complete -F _tvmffi_jit tvmffi-jit"

    script = f"""
source {BASH_COMPLETION}
t() {{
  COMP_WORDS=("$@"); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}}
  COMPREPLY=(); _tvmffi_jit; echo "${{COMPREPLY[*]}}"
}}
t tvmffi-jit ""
t tvmffi-jit build --emit ""
t tvmffi-jit build --arch 8.0,9.0
t tvmffi-jit cache ""
t tvmffi-jit -v doctor --require nvcc,dr
"""
    for framework in ("", "/usr/share/bash-completion/bash_completion"):
        if framework and not Path(framework).exists():
            continue
        full = (f"source {framework}\n" if framework else "") + script
        out = subprocess.run(["bash", "-c", full], capture_output=True, text=True, check=True).stdout.splitlines()
        assert set(out[0].split()) >= {"build", "inspect", "cache", "doctor"}
        assert out[1].split() == ["module", "object", "cubin", "fatbin", "ptx"]
        assert "8.0,9.0a" in out[2].split() and "8.0,9.0+PTX" in out[2].split()
        assert out[3].split() == ["path", "list", "show", "verify", "clean", "gc", "stats", "export", "import", "keygen"]
        assert out[4].split() == ["nvcc,driver"]

    # Every subcommand and option --help lists can be completed.
    text = BASH_COMPLETION.read_text()
    for command, help_text in command_helps.items():
        assert re.search(rf"\b{re.escape(command.split()[-1])}\b", text), f"bash completion lacks {command}"
        for option in listed_options(help_text):
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), f"bash completion lacks {command} {option}"


def test_zsh_completion_parses_and_knows_every_option(command_helps):
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.skip("zsh is not installed (scripts/setup.sh installs it)")
    p = subprocess.run([zsh, "-n", str(ZSH_COMPLETION)], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    text = ZSH_COMPLETION.read_text()
    assert text.startswith("#compdef tvmffi-jit")
    for command, help_text in command_helps.items():
        assert re.search(rf"\b{re.escape(command.split()[-1])}\b", text), f"zsh completion lacks {command}"
        for option in listed_options(help_text):
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), f"zsh completion lacks {command} {option}"


# --- manifest schema versus the parser --------------------------------------------------

@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    return jsonschema.Draft202012Validator(schema)


def schema_accepts(validator, path):
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError:
        return False
    return validator.is_valid(document)


def example_manifests():
    found = []
    for path in sorted((SHARE / "examples").rglob("*.json")):
        document = json.loads(path.read_text())
        if isinstance(document, dict) and "name" in document:
            found.append(path)
    return found


def test_schema_keys_are_the_parsers(validator):
    schema = json.loads(SCHEMA.read_text())
    documented = set(re.findall(r"^\| `([$a-z_]+)` \|", (SOURCE_DIR / "docs" / "manifest.md").read_text(), re.M)) \
        if (SOURCE_DIR / "docs" / "manifest.md").exists() else set()
    expected = {"$schema", "name", "sources", "cpp_sources", "cuda_sources", "functions", "extra_cflags",
                "extra_cuda_cflags", "extra_ldflags", "extra_include_paths", "system_include_paths", "cuda_runtime",
                "cuda_driver", "cuda_arch", "emit", "embed_cubin",
                "compiler", "kernel_names", "cxx_launcher", "cuda_launcher", "backend", "rocm_arch"}
    assert set(schema["properties"]) == expected
    assert schema["additionalProperties"] is False
    if documented:
        assert documented <= expected, documented - expected


def test_schema_accepts_every_good_manifest_and_example(validator):
    good = sorted((MANIFESTS / "good").glob("*.json")) + example_manifests()
    assert len(good) >= 14
    for path in good:
        errors = [e.message for e in validator.iter_errors(json.loads(path.read_text()))]
        assert not errors, f"{path}: {errors}"


def test_schema_and_parser_reject_every_bad_manifest(validator, env):
    bad = sorted((MANIFESTS / "bad").glob("*.json"))
    assert len(bad) >= 40
    for path in bad:
        assert not schema_accepts(validator, path), f"the schema accepts {path.name}"
        # The parser's side: exit 2 with a message naming the manifest, and no build.
        p = run("build", "-m", path, env=env)
        assert p.returncode == 2, f"{path.name}: exit {p.returncode}\n{p.stderr}"
        assert path.name in p.stderr and p.stdout == "", f"{path.name}: {p.stderr}"


def test_parser_accepts_every_example_manifest(env):
    # Building all examples needs nvcc for several of them; parsing them is
    # enough here (their builds are tested with their own features). A
    # manifest the parser rejects exits 2 before looking for any compiler, so
    # any other outcome (0, or 4 for a missing toolchain) means it was accepted.
    for path in example_manifests():
        p = run("build", "-m", path, "--emit=bogus", env=env)
        assert p.returncode == 2 and "--emit" in p.stderr, f"{path}: {p.stderr}"


# --- progress, stdout, colour -----------------------------------------------------------

C_SOURCE = "int tvmffi_jit_tooling_answer(void) { return 42; }\n"


def run_in_pty(argv, env):
    """Runs argv with stderr (and stdout) on a pseudo-terminal; returns (exit code, bytes written)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(argv[0], argv, env)
    chunks = []
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 60)
            if not ready:
                break
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks)


def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path, env):
    (tmp_path / "answer.c").write_text(C_SOURCE)
    p = run("build", tmp_path / "answer.c", "--no-cache", env=env, check=0)
    assert p.stdout.splitlines() == [p.stdout.strip()] and Path(p.stdout.strip()).is_file()
    steps = re.findall(r"^\[(\d+)/(\d+)\] (.+)$", p.stderr, re.M)
    assert steps, p.stderr
    assert steps[-1][0] == steps[-1][1], "the last step is N/N"
    assert any("answer.c" in label for _, _, label in steps)
    assert "\x1b" not in p.stderr and "\r" not in p.stderr

    forced = run("build", tmp_path / "answer.c", "--no-cache", env={**env, "CLICOLOR_FORCE": "1"}, check=0)
    assert "\x1b[" in forced.stderr and "\r" not in forced.stderr
    assert run("build", tmp_path / "answer.c", "--no-cache", env={**env, "CLICOLOR_FORCE": "1", "NO_COLOR": "1"},
               check=0).stderr.count("\x1b") == 0

    quiet = run("-q", "build", tmp_path / "answer.c", "--no-cache", env=env, check=0)
    assert quiet.stderr == "" and Path(quiet.stdout.strip()).is_file() and len(quiet.stdout.splitlines()) == 1


def test_progress_rewrites_one_line_on_a_terminal(tmp_path, env):
    (tmp_path / "answer.c").write_text(C_SOURCE)
    code, out = run_in_pty([TOOL, "build", str(tmp_path / "answer.c"), "--no-cache"], {**env, "TERM": "xterm"})
    text = out.decode(errors="replace")
    assert code == 0, text
    assert re.search(r"\r\x1b\[K(\x1b\[1;32m)?\[1/", text), repr(text)
    assert "\x1b[1;32m" in text  # colour on a terminal by default
    # Steps overwrite each other: no newline between two status lines.
    assert not re.search(r"\] [^\r\n]*\n\r?\x1b\[K\[", text), repr(text)
    code, out = run_in_pty([TOOL, "build", str(tmp_path / "answer.c"), "--no-cache"],
                           {**env, "TERM": "xterm", "NO_COLOR": "1"})
    assert code == 0 and "\x1b[1;32m" not in out.decode(errors="replace")
    code, out = run_in_pty([TOOL, "build", str(tmp_path / "answer.c"), "--no-cache"], {**env, "TERM": "dumb"})
    assert code == 0 and "\x1b[K" not in out.decode(errors="replace") and "[1/" in out.decode(errors="replace")


def test_cached_build_numbers_units_and_link_in_one_run_with_warnings_above_the_status_line(tmp_path, env):
    # The default (cached) path runs through the same executor as --no-cache:
    # one run of 3 steps, not [1/1] [2/2] [1/1], and compiler warnings on
    # lines of their own, never glued onto the status line.
    (tmp_path / "a.cc").write_text("int a() { return 1; }\n")
    (tmp_path / "b.cc").write_text("#warning tvmffi-jit-progress-test\nint b() { return 2; }\n")
    p = run("build", tmp_path / "a.cc", tmp_path / "b.cc", "--name", "two", env=env, check=0)
    steps = re.findall(r"^\[(\d+)/(\d+)\] (.+)$", p.stderr, re.M)
    assert [(n, t) for n, t, _ in steps] == [("1", "3"), ("2", "3"), ("3", "3")], p.stderr
    assert steps[-1][2] == "link two.so"
    assert re.search(r"^" + re.escape(str(tmp_path / "b.cc")) + r":1:2: warning: #warning tvmffi-jit-progress-test",
                     p.stderr, re.M), p.stderr

    code, out = run_in_pty([TOOL, "build", str(tmp_path / "a.cc"), str(tmp_path / "b.cc"), "--name", "two", "--force"],
                           {**env, "TERM": "xterm", "NO_COLOR": "1"})
    text = out.decode(errors="replace")
    assert code == 0, text
    assert re.findall(r"\[(\d)/(\d)\]", text)[-1] == ("3", "3") and "[1/1]" not in text and "[2/2]" not in text, repr(text)
    # The status line is erased, the warning printed from column 0, the status redrawn.
    warning = re.escape(str(tmp_path / "b.cc")) + r":1:2: warning: #warning tvmffi-jit-progress-test"
    assert re.search(r"\r\x1b\[K" + warning, text), repr(text)
    assert not re.search(r"\[\d/3\] [^\r\n]*" + warning, text), repr(text)


# --- depfile, --output, --link-to, --compile-commands -----------------------------------

@pytest.fixture
def header_project(tmp_path):
    src = tmp_path / "proj"
    (src / "include").mkdir(parents=True)
    (src / "include" / "answer.h").write_text("#define TVMFFI_JIT_ANSWER 42\n")
    (src / "answer.c").write_text('#include "answer.h"\nint answer(void) { return TVMFFI_JIT_ANSWER; }\n')
    (src / "m.json").write_text(json.dumps({"name": "answer", "sources": ["answer.c"],
                                            "extra_include_paths": ["include"]}))
    return src


def depfile_paths(path):
    text = path.read_text().replace("\\\n", " ")
    first_rule = text.split("\n", 1)[0]
    target, deps = first_rule.split(": ", 1) if ": " in first_rule else (first_rule.rstrip(":"), "")
    return target, deps.split()


def test_depfile_output_and_compile_commands(header_project, tmp_path, env):
    out = tmp_path / "out" / "answer.so"
    dep = tmp_path / "out" / "answer.so.d"
    db = tmp_path / "compile_commands.json"
    db.write_text(json.dumps([{"directory": "/elsewhere", "file": "/elsewhere/x.cc", "arguments": ["c++", "x.cc"]}]))
    p = run("build", "-m", header_project / "m.json", "-o", out, "--depfile", dep, "--compile-commands", db,
            env=env, check=0)
    assert p.stdout == f"{out}\n"
    assert out.is_file()
    target, deps = depfile_paths(dep)
    assert target == str(out)
    assert deps[:2] == [str(header_project / "m.json"), str(header_project / "answer.c")]
    assert str(header_project / "include" / "answer.h") in deps
    assert all(Path(d).is_file() for d in deps), deps

    entries = json.loads(db.read_text())
    assert [e["file"] for e in entries] == ["/elsewhere/x.cc", str(header_project / "answer.c")]
    args = entries[1]["arguments"]
    assert args[-3:-1] == [str(header_project / "answer.c"), "-o"] or str(header_project / "answer.c") in args
    assert any(a.endswith("/include") or a == "-I" + str(header_project / "include") for a in args)

    # Second run: a cache hit, and still the same depfile (the headers come from the cache entry).
    first = dep.read_text()
    before = out.stat().st_mtime_ns
    time.sleep(0.01)
    run("build", "-m", header_project / "m.json", "-o", out, "--depfile", dep, env=env, check=0)
    assert dep.read_text() == first
    assert out.stat().st_mtime_ns > before, "--output refreshes the mtime so make sees the target as new"

    link = tmp_path / "links" / "answer.so"
    p = run("build", "-m", header_project / "m.json", "--link-to", link, env=env, check=0)
    assert link.is_symlink() and os.path.realpath(link) == os.path.realpath(p.stdout.strip())

    # --output into a directory keeps the artifact's name.
    (tmp_path / "dir").mkdir()
    p = run("build", "-m", header_project / "m.json", "-o", tmp_path / "dir", env=env, check=0)
    assert p.stdout.strip() == str(tmp_path / "dir" / "answer.so") and (tmp_path / "dir" / "answer.so").is_file()


# --- Make and CMake ---------------------------------------------------------------------

def make(directory, *args, env):
    return subprocess.run(["make", "-C", str(directory), f"TVMFFI_JIT={TOOL}", *args], env=env,
                          capture_output=True, text=True)


def test_makefile_example_rebuilds_after_a_header_changes_and_not_otherwise(tmp_path, env):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    project = tmp_path / "make"
    shutil.copytree(SHARE / "examples" / "make", project)
    p = make(project, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    module = project / "build" / "scale.so"
    assert module.is_file()
    assert make(project, "-q", env=env).returncode == 0, "up to date right after a build"

    # An unrelated file changes: still up to date.
    (project / "README").write_text("not an input\n")
    assert make(project, "-q", env=env).returncode == 0

    # The header changes: out of date; the rebuild brings it up to date again.
    time.sleep(0.01)
    (project / "scale.h").write_text((project / "scale.h").read_text().replace("1000.0", "10.0"))
    assert make(project, "-q", env=env).returncode == 1, "a header edit must make the module out of date"
    before = module.stat().st_mtime_ns
    p = make(project, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "tvmffi-jit" in p.stdout and module.stat().st_mtime_ns > before
    assert make(project, "-q", env=env).returncode == 0
    assert "Nothing to be done" in make(project, env=env).stdout

    # Only touched (same content): make reruns the rule, which is a cache hit.
    os.utime(project / "scale.h")
    assert make(project, "-q", env=env).returncode == 1

    import tvm_ffi
    assert tvm_ffi.load_module(str(module))["scale"](3.0, 50.0) == 30.0


@pytest.fixture(scope="module")
def installed_prefix(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("prefix")
    p = subprocess.run(["cmake", "--install", str(BINARY_DIR), "--prefix", str(prefix)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return prefix


def test_cmake_install_layout(installed_prefix):
    p = installed_prefix
    for rel in ("bin/tvmffi-jit", "share/man/man1/tvmffi-jit.1", "share/tvmffi-jit/manifest.schema.json",
                "share/tvmffi-jit/completions/tvmffi-jit.bash", "share/tvmffi-jit/completions/_tvmffi-jit",
                "share/bash-completion/completions/tvmffi-jit", "share/zsh/site-functions/_tvmffi-jit",
                "share/tvmffi-jit/examples/make/Makefile", "share/tvmffi-jit/examples/cmake/CMakeLists.txt",
                "lib/cmake/tvmffi_jit/tvmffi_jitConfig.cmake", "lib/cmake/tvmffi_jit/tvmffi_jitConfigVersion.cmake",
                "lib/cmake/tvmffi_jit/tvmffi_jit_functions.cmake"):
        assert (p / rel).is_file(), rel
    assert os.access(p / "bin" / "tvmffi-jit", os.X_OK)


@pytest.mark.parametrize("generator, package", [("Ninja", "installed"), ("Unix Makefiles", "installed"),
                                                ("Ninja", "build tree")])
def test_cmake_project_builds_a_module_against_the_package(installed_prefix, tmp_path, env, generator, package):
    if generator == "Ninja" and shutil.which("ninja") is None:
        pytest.skip("ninja is not installed")
    project = tmp_path / "src"
    examples = installed_prefix / "share" / "tvmffi-jit" / "examples" if package == "installed" else SHARE / "examples"
    shutil.copytree(examples / "cmake", project)
    build_dir = tmp_path / "build"
    # Installed: found on CMAKE_PREFIX_PATH. Build tree: tvmffi_jit_DIR=<build>/cmake, no install.
    where = (f"-DCMAKE_PREFIX_PATH={installed_prefix}" if package == "installed"
             else f"-Dtvmffi_jit_DIR={BINARY_DIR / 'cmake'}")
    p = subprocess.run(["cmake", "-S", str(project), "-B", str(build_dir), "-G", generator, where], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Warning" not in p.stderr, p.stderr

    def build():
        r = subprocess.run(["cmake", "--build", str(build_dir)], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    out = build()
    module = build_dir / "offset.so"
    assert module.is_file() and "tvmffi-jit: building offset.so" in out
    assert "tvmffi-jit: building" not in build(), "a second build does nothing"
    time.sleep(0.01)
    (project / "offset.h").write_text((project / "offset.h").read_text().replace("= 42", "= 7"))
    assert "tvmffi-jit: building offset.so" in build(), "editing the header rebuilds"
    assert "tvmffi-jit: building" not in build()

    import tvm_ffi
    assert tvm_ffi.load_module(str(module))["offset"](1) == 8
    if package == "build tree":
        cache = (build_dir / "CMakeCache.txt").read_text()
        assert re.search(rf"^tvmffi_jit_DIR:\w+={re.escape(str(BINARY_DIR / 'cmake'))}$", cache, re.M)
        assert str(installed_prefix) not in (build_dir / "build.ninja").read_text()


def cmake_command_for(tmp_path, env, manifest, *cmake_args, arch=None):
    """Configures a project with one tvmffi_jit_add_module() and returns the tvmffi-jit command it generated."""
    project = tmp_path / "src"
    project.mkdir(exist_ok=True)
    (project / "m.json").write_text(json.dumps(manifest))
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(p LANGUAGES NONE)\nfind_package(tvmffi_jit REQUIRED)\n"
        f"tvmffi_jit_add_module(m MANIFEST m.json {'ARCH ' + arch if arch else ''})\n")
    build_dir = tmp_path / "build"
    shutil.rmtree(build_dir, ignore_errors=True)
    p = subprocess.run(["cmake", "-S", str(project), "-B", str(build_dir), "-G", "Ninja",
                        f"-Dtvmffi_jit_DIR={BINARY_DIR / 'cmake'}", *cmake_args], env=env, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return next(l for l in (build_dir / "build.ninja").read_text().splitlines() if " build -q -m " in l)


def test_cmake_cuda_architectures_become_the_arch_list_unless_arch_or_the_manifest_says(tmp_path, env):
    if shutil.which("ninja") is None:
        pytest.skip("ninja is not installed")
    kernel = {"name": "k", "cuda_sources": "__global__ void k() {}", "emit": "cubin"}
    command = cmake_command_for(tmp_path, env, kernel, "-DCMAKE_CUDA_ARCHITECTURES=80;90a-real;86-virtual")
    assert "--arch=8.0+PTX,9.0a,8.6+PTX" in command, command
    # native: the visible GPUs, which is what tvmffi-jit does without --arch.
    assert "--arch" not in cmake_command_for(tmp_path, env, kernel, "-DCMAKE_CUDA_ARCHITECTURES=native")
    assert "--arch" not in cmake_command_for(tmp_path, env, kernel)
    # ARCH wins; so does the manifest's own cuda_arch.
    assert "--arch=7.5 " in cmake_command_for(tmp_path, env, kernel, "-DCMAKE_CUDA_ARCHITECTURES=80", arch="7.5") + " "
    assert "--arch" not in cmake_command_for(tmp_path, env, {**kernel, "cuda_arch": "9.0"},
                                             "-DCMAKE_CUDA_ARCHITECTURES=80")


def test_cmake_package_from_an_unbuilt_tree_says_to_build_it(tmp_path, env):
    fake_build = tmp_path / "tvmffi-jit-build"
    shutil.copytree(BINARY_DIR / "cmake", fake_build / "cmake", ignore=shutil.ignore_patterns("install"))
    config = fake_build / "cmake" / "tvmffi_jitConfig.cmake"
    config.write_text(config.read_text().replace(str(BINARY_DIR), str(fake_build)))
    project = tmp_path / "src"
    shutil.copytree(SHARE / "examples" / "cmake", project)
    p = subprocess.run(["cmake", "-S", str(project), "-B", str(tmp_path / "b"), f"-Dtvmffi_jit_DIR={fake_build / 'cmake'}"],
                       env=env, capture_output=True, text=True)
    assert p.returncode != 0
    assert "does not exist: build tvmffi-jit first" in p.stderr, p.stderr


def test_make_and_cmake_examples_have_a_readme_with_their_commands():
    make_readme = (SHARE / "examples" / "make" / "README.md").read_text()
    assert "make TVMFFI_JIT=" in make_readme and "--depfile" in make_readme
    cmake_readme = (SHARE / "examples" / "cmake" / "README.md").read_text()
    assert "-DCMAKE_PREFIX_PATH=" in cmake_readme and "-Dtvmffi_jit_DIR=" in cmake_readme
    assert "CMAKE_CUDA_ARCHITECTURES" in cmake_readme


def test_setup_installs_no_libelf_which_nothing_uses():
    setup = (SOURCE_DIR / "scripts" / "setup.sh").read_text()
    assert "libelf" not in setup.split("PACKAGES=(", 1)[1].split(")", 1)[0]
    code = "\n".join(p.read_text(errors="replace") for d in ("src", "include", "tests") for p in (SOURCE_DIR / d).rglob("*")
                     if p.suffix in (".cpp", ".h", ".c", ".txt", ".cmake"))
    assert "gelf.h" not in code and "libelf.h" not in code and "elf_begin" not in code


# --- doctor -----------------------------------------------------------------------------

COMPONENT_FIELDS = {"name", "found", "required", "path", "version", "problem", "fix"}


def make_fake_cache(root):
    entry = root / "answer_0123456789abcdef"
    entry.mkdir(parents=True)
    (entry / "answer.so").write_bytes(b"x" * 100)
    (entry / "entry.json").write_text("{}")
    obj = root / "objects" / "ab" / ("ab" * 32)
    obj.mkdir(parents=True)
    (obj / "cpp_0.o").write_bytes(b"y" * 50)
    (obj / "entry.json").write_text("{}")
    (root / "tmp" / "stage.x" / "entry").mkdir(parents=True)
    (root / "tmp" / "stage.x" / "entry" / "entry.json").write_text("{}")  # staging: not an entry
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def test_doctor_json_has_every_field(tmp_path, env):
    cache = tmp_path / "cache"
    size = make_fake_cache(cache)
    cache.chmod(0o700)
    if FAKE_LIBCUDA.exists():
        env["TVMFFI_JIT_LIBCUDA"] = str(FAKE_LIBCUDA)
    report = json.loads(run("doctor", "--json", env=env, check=0).stdout)

    assert set(report) >= {"tool", "compilers", "tvm_ffi", "driver", "gpu", "gpus", "cache", "missing", "ok"}
    assert report["tool"]["name"] == "tvmffi-jit" and re.fullmatch(r"\d+\.\d+\.\d+", report["tool"]["version"])
    assert Path(report["tool"]["path"]).resolve() == Path(TOOL).resolve()
    assert set(report["compilers"]) == {"c++", "cc", "nvcc", "nvrtc"}
    components = [*report["compilers"].values(), report["tvm_ffi"], report["driver"], report["gpu"], report["cache"]]
    for c in components:
        assert COMPONENT_FIELDS <= set(c), c
        if c["found"]:
            assert c["problem"] is None and c["fix"] is None
        else:
            assert c["problem"] and c["fix"], c
    cxx = report["compilers"]["c++"]
    assert cxx["found"] and Path(cxx["path"]).is_file() and cxx["version"]
    tvm = report["tvm_ffi"]
    assert tvm["found"] and Path(tvm["include_dir"], "tvm", "ffi", "c_api.h").is_file()
    assert re.fullmatch(r"\d+\.\d+\.\d+", tvm["version"]) and Path(tvm["lib_dir"], "libtvm_ffi.so").exists()
    if shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists():
        assert report["compilers"]["nvcc"]["found"] and re.match(r"\d+\.\d+", report["compilers"]["nvcc"]["version"])

    c = report["cache"]
    assert c["root"] == str(cache) and c["exists"] and c["writable"]
    assert c["size_bytes"] == size and c["entries"] == 2
    assert c["module_entries"] == 1 and c["object_entries"] == 1

    if FAKE_LIBCUDA.exists():
        assert report["driver"]["found"] and report["driver"]["version"] == "13.0"
        assert report["gpu"]["found"] and len(report["gpus"]) == 1
        gpu = report["gpus"][0]
        assert set(gpu) >= {"ordinal", "name", "compute_capability", "arch"}
        assert gpu["name"].startswith("Fake GPU") and re.fullmatch(r"\d+\.\d", gpu["compute_capability"])
    assert report["ok"] is True
    assert [m["name"] for m in report["missing"]] == [c["name"] for c in components if not c["found"]]


def cuda_launcher_report(tmp_path, env, body):
    launcher = tmp_path / "launcher"
    launcher.write_text("#!/bin/sh\n" + body)
    launcher.chmod(0o755)
    p = run("doctor", "--json", "--cuda-launcher", launcher, env=env, check=0)
    return json.loads(p.stdout)["launchers"]["cuda"], p.stderr


@pytest.mark.skipif(not (shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists()), reason="needs nvcc")
def test_doctor_probes_a_cuda_launcher_in_each_nvcc_mode_through_the_build(tmp_path, env):
    # A launcher that runs the compiler: every mode's output is written.
    report, stderr = cuda_launcher_report(tmp_path, env, 'exec "$@"\n')
    assert [(p["mode"], p["exit"], p["output_ok"]) for p in report["probe"]] == [
        (mode, "exit status 0", True) for mode in ("object", "cubin", "fatbin", "ptx")]
    assert report["problem"] is None
    # One that exits 0 without running it: each mode is named, and doctor
    # says so on stdout only (the build's fallback warnings are not shown).
    report, stderr = cuda_launcher_report(tmp_path, env, "exit 0\n")
    assert [(p["exit"], p["output_ok"]) for p in report["probe"]] == [("exit status 0", False)] * 4
    assert report["problem"].startswith("launcher exited 0 without writing the output of nvcc object, cubin, fatbin, ptx")
    assert stderr == ""
    # One that fails: its status and output, and no problem of the exit-0 kind.
    report, _ = cuda_launcher_report(tmp_path, env, "echo launcher broke; exit 3\n")
    assert [(p["exit"], p["output"]) for p in report["probe"]] == [("exit status 3", "launcher broke\n")] * 4
    assert report["problem"] is None


def test_doctor_explains_what_is_missing_and_fails_on_required(tmp_path, env):
    env["TVMFFI_JIT_LIBCUDA"] = str(tmp_path / "no-such-libcuda.so")
    p = run("doctor", env=env, check=0)  # a missing driver is not fatal by default
    driver_line = next(l for l in p.stdout.splitlines() if re.match(r"\s+missing\s+driver\s", l))
    assert "no-such-libcuda.so" in driver_line
    assert "fix:" in p.stdout.split(driver_line, 1)[1].splitlines()[1]

    p = run("doctor", "--json", "--require", "driver,gpu", env=env, check=4)
    report = json.loads(p.stdout)
    assert report["ok"] is False
    assert {m["name"]: m["required"] for m in report["missing"]} == {"driver": True, "gpu": True}

    env["CXX"] = str(tmp_path / "no-such-c++")
    p = run("doctor", env=env, check=4)
    assert re.search(r"MISSING\s+c\+\+\s+CXX=.*no-such-c\+\+", p.stdout), p.stdout
    assert re.search(r"^\s+ok\s+cc\s", p.stdout, re.M), "a broken CXX is not blamed on cc"
    assert run("doctor", "--require", "gpu,bogus", env=env).returncode == 2
