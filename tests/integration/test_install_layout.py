"""What an install (and so the wheel, whose data tree the same install rules
fill) puts under its prefix: every JSON schema beside the others in
share/tvmffi-jit (inspect's and doctor's too, with doctor --json valid against
its schema), and shell completions that load from a venv-like prefix by the
lines docs/tooling.md gives ("Completions from a venv").
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BINARY_DIR = os.environ.get("TVMFFI_JIT_BINARY_DIR")
SCHEMAS = ("manifest", "build", "cache", "inspect", "doctor")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """`cmake --install` of this build into a fresh prefix (a venv's layout: bin/, share/)."""
    if not BINARY_DIR:
        pytest.skip("TVMFFI_JIT_BINARY_DIR (set by ctest) names the build to install")
    p = tmp_path_factory.mktemp("venv")
    subprocess.run(["cmake", "--install", BINARY_DIR, "--prefix", str(p)], check=True, capture_output=True)
    return p


def test_every_schema_is_installed_beside_the_others(prefix):
    share = prefix / "share" / "tvmffi-jit"
    for name in SCHEMAS:
        schema = json.loads((share / f"{name}.schema.json").read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
    assert not (SOURCE_DIR / "docs" / "inspect.schema.json").exists()  # one copy, where it is installed from


def test_doctor_json_matches_its_schema(tmp_path):
    schema = json.loads((SOURCE_DIR / "share" / "tvmffi-jit" / "doctor.schema.json").read_text())
    env = dict(os.environ, TVMFFI_JIT_CACHE_DIR=str(tmp_path / "cache"), TVMFFI_JIT_LIBCUDA=str(tmp_path / "none.so"))
    for extra in ([], ["--cxx-launcher", "ccache"] if shutil.which("ccache") else []):
        p = subprocess.run([TOOL, "doctor", "--json", *extra], env=env, capture_output=True, text=True)
        assert p.returncode in (0, 4), p.stderr
        report = json.loads(p.stdout)
        jsonschema.Draft202012Validator(schema).validate(report)
        assert report["ok"] == (p.returncode == 0)
    # A broken component validates too (its problem and fix are strings).
    env["CXX"] = str(tmp_path / "no-such-compiler")
    report = json.loads(subprocess.run([TOOL, "doctor", "--json"], env=env, capture_output=True, text=True).stdout)
    jsonschema.Draft202012Validator(schema).validate(report)
    assert report["compilers"]["c++"]["found"] is False and report["ok"] is False


def documented_block(shell_comment):
    """The fenced block of docs/tooling.md's venv section that starts with `shell_comment`."""
    text = (SOURCE_DIR / "docs" / "tooling.md").read_text()
    section = text.split("### Completions from a venv", 1)[1].split("\n## ", 1)[0]
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        if block.startswith(shell_comment):
            return block
    pytest.fail(f"docs/tooling.md's venv section has no block starting with {shell_comment!r}")


def test_bash_completion_loads_from_a_venv_by_the_documented_line(prefix):
    line = documented_block("# bash")
    script = f"""{line}
COMP_WORDS=(tvmffi-jit cache ""); COMP_CWORD=2; COMP_LINE="tvmffi-jit cache "; COMP_POINT=${{#COMP_LINE}}
COMPREPLY=(); _tvmffi_jit; echo "${{COMPREPLY[*]}}"
"""
    env = dict(os.environ, VIRTUAL_ENV=str(prefix))
    out = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "keygen" in out.stdout.split() and "gc" in out.stdout.split()
    # bash-completion's own on-demand loading, through the documented XDG_DATA_DIRS line.
    framework = Path("/usr/share/bash-completion/bash_completion")
    if framework.exists():
        text = (SOURCE_DIR / "docs" / "tooling.md").read_text()
        export = re.search(r"`(export XDG_DATA_DIRS=[^`]*)`", text).group(1)
        lazy = f"source {framework}\n{export}\n_completion_loader tvmffi-jit; complete -p tvmffi-jit"
        out = subprocess.run(["bash", "-c", lazy], env=env, capture_output=True, text=True)
        assert out.stdout.strip() == "complete -F _tvmffi_jit tvmffi-jit", out.stdout + out.stderr


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh not installed")
def test_zsh_completion_loads_from_a_venv_by_the_documented_line(prefix, tmp_path):
    line = documented_block("# zsh")
    script = f"""{line}
autoload -U compinit && compinit -u -d {tmp_path}/zcompdump
print -r -- ${{_comps[tvmffi-jit]}}
"""
    env = dict(os.environ, VIRTUAL_ENV=str(prefix), HOME=str(tmp_path), ZDOTDIR=str(tmp_path))
    out = subprocess.run(["zsh", "-f", "-c", script], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "_tvmffi-jit", out.stdout + out.stderr
