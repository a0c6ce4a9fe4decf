"""``--help`` on every ``python -m`` entry point: exit 0, plain text for users on stdout.

The entry points are found in the source (a module with ``if __name__ == "__main__":`` or a
package with ``__main__.py``), so a new CLI is covered without being listed here. Each is run
as a user runs it, in a process of its own.
"""
from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT, run_module

PACKAGES = ("common", "legacy", "modern", "compare", "benchmarks", "tests/corpus")
#: What a developer's docstring holds and a user's help must not: Sphinx roles and literals,
#: and the words that describe the code rather than the command.
NOT_FOR_USERS = re.compile(r"``|:(func|mod|class|meth|data|attr|exc):`|thin CLI|\bA thin\b")
#: An absolute source path, as absl prints above a module's flags.
SOURCE_PATH = re.compile(r"(^|\s)/\S+\.py:?(\s|$)", re.M)
#: absl help flags and ``-h``: all of them print the same help.
HELP_FLAGS = ("--help", "-h", "--helpfull")


def entry_points() -> list[str]:
    """``python -m`` names of every module that runs as a program."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if path.name == "__main__.py":
                found.append(module.removesuffix(".__main__"))
            elif re.search(r"^if __name__ == .__main__.:", path.read_text(), re.M):
                found.append(module)
    return found


def test_the_entry_points_found_include_every_cli_the_readme_names():
    readme = (ROOT / "README.md").read_text()
    ours = {p.split("/")[0] for p in PACKAGES}
    named = {m for m in re.findall(r"python -m ([a-z_.]+)", readme) if m.split(".")[0] in ours}
    assert named <= set(entry_points()), named - set(entry_points())
    assert {"compare.run", "compare.explain", "compare.migrate", "modern.run", "modern.service",
            "legacy.run", "legacy", "modern"} <= set(entry_points())


@pytest.mark.slow  # ~1 s each, 3 s for compare.run (its imports): ~18 s in all
@pytest.mark.parametrize("module", entry_points())
def test_help_exits_0_with_plain_text_for_users(module):
    proc = run_module(module, "--help", timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    text = proc.stdout
    assert text.startswith(f"usage: python -m {_program(module)}"), text[:200]
    assert not NOT_FOR_USERS.search(text), NOT_FOR_USERS.search(text)
    assert not SOURCE_PATH.search(text), SOURCE_PATH.search(text)
    assert str(ROOT) not in text
    assert len(text.splitlines()) >= 5, text  # a usage line, what it does, the flags


@pytest.mark.parametrize("flag", HELP_FLAGS[1:])
def test_every_help_flag_prints_the_same_help(flag):
    proc = run_module("compare.explain", flag, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == run_module("compare.explain", "--help", timeout=120).stdout


def test_an_absl_cli_lists_each_of_its_flags_with_type_default_and_help():
    text = run_module("modern.run", "--help", timeout=120).stdout
    flags_part = text.split("\nflags:\n", 1)[1]
    assert "  --steps=<integer>  (default 20; integer >= 2)\n" \
           "      Steps to profile (one image per step).\n" in flags_part
    assert "  --[no]skip_bad  (default off)\n" in flags_part
    assert "  --images=<a,b,...>\n" in flags_part
    assert "  --out=<text>\n" in flags_part
    # only the CLI's own flags: none of absl's or TensorFlow's
    assert "logtostderr" not in flags_part and "--only_check_args" not in flags_part
    assert all(len(line) <= 100 for line in text.splitlines()), text


def _program(module: str) -> str:
    """``legacy`` and ``modern`` run ``legacy.run`` and ``modern.run``, and say so."""
    return {"legacy": "legacy.run", "modern": "modern.run"}.get(module, module)
