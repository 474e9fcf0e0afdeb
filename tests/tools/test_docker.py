"""The image recipes and the CI guide call only what the project has: files that exist,
``planner`` commands that parse, modules that import, settings the service knows. The
commands themselves are tested where they are defined (``planner warm`` in test_install,
the installed image's start in test_install_matrix)."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest

from planner.api.settings import Settings
from planner.cli import build_parser
from tests.support.paths import ROOT

ROOT = ROOT
DOCKERFILES = [ROOT / "docker" / "Dockerfile", ROOT / "docker" / "Dockerfile.gpu"]
_COMMAND = re.compile(r"^\s*(RUN|CMD|ENTRYPOINT|COPY|ENV)\s+(.*)$")


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(instruction, arguments) with continuation lines joined."""
    text = re.sub(r"\\\n", " ", path.read_text())
    found = []
    for line in text.splitlines():
        match = _COMMAND.match(line)
        if match:
            found.append((match.group(1), match.group(2).strip()))
    return found


def _argv(arguments: str) -> list[str]:
    """The words of a RUN/CMD: its JSON (exec) form or its shell form."""
    if arguments.startswith("["):
        return [str(word) for word in json.loads(arguments)]
    return shlex.split(arguments)


def _commands(words: list[str]) -> list[list[str]]:
    """Each simple command of a shell line (split at &&, ||, ;)."""
    commands: list[list[str]] = [[]]
    for word in words:
        if word in ("&&", "||", ";"):
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def _check_planner_command(argv: list[str]) -> None:
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse reports and exits on a bad command line
        pytest.fail(f"'planner {' '.join(argv)}' does not parse (exit {exc.code})")


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_dockerfile_calls_only_what_exists(dockerfile: Path) -> None:
    entrypoint: list[str] = []
    checked = 0
    for instruction, arguments in _instructions(dockerfile):
        if instruction == "COPY":
            words = [w for w in shlex.split(arguments) if not w.startswith("--")]
            if not any(w.startswith("--from") for w in shlex.split(arguments)):
                for source in words[:-1]:
                    assert (ROOT / source).exists(), f"{dockerfile.name}: COPY {source} is missing"
            continue
        if instruction == "ENV":
            names = re.findall(r"(PLANNER_[A-Z_]+)=(\S+)", arguments)
            for name, value in names:
                field = name.removeprefix("PLANNER_").lower()
                assert field in Settings.model_fields, f"{dockerfile.name}: unknown {name}"
                Settings(**{field: value})  # the value parses
            continue
        if instruction == "ENTRYPOINT":
            entrypoint = _argv(arguments)
            continue
        words = _argv(arguments)
        if instruction == "CMD" and entrypoint == ["planner"]:
            _check_planner_command(words)
            checked += 1
            continue
        for command in _commands(words):
            if command[0] == "planner":
                _check_planner_command(command[1:])
                checked += 1
            elif command[0] in ("python", "python3") and command[1:2] == ["-m"]:
                module = command[2]
                if module not in ("venv", "pip"):
                    assert importlib.util.find_spec(module) is not None, module
                    checked += 1
            elif command[0] in ("python", "python3") and command[1:2] == ["-c"]:
                imported = re.findall(r"(?:from|import)\s+(\w+)", command[2])
                project = [m for m in imported if m in ("planner", "api", "solvers", "validators")]
                assert not project, (
                    f"{dockerfile.name}: inline Python imports {project}; call a tested "
                    "planner command instead"
                )
    assert checked >= 1, f"{dockerfile.name} runs no project command"


def test_the_image_compiles_its_kernels_with_planner_warm() -> None:
    runs = [a for i, a in _instructions(DOCKERFILES[0]) if i == "RUN"]
    assert any(_commands(_argv(a)) == [["planner", "warm"]] for a in runs)


def test_compose_sets_only_known_settings() -> None:
    text = (ROOT / "docker" / "compose.yaml").read_text()
    pairs = re.findall(r"^\s*(PLANNER_[A-Z_]+):\s*\"?([^\"#\s]+)\"?", text, re.MULTILINE)
    assert pairs, "compose.yaml sets no PLANNER_ variable"
    values = {}
    for name, value in pairs:
        field = name.removeprefix("PLANNER_").lower()
        assert field in Settings.model_fields, f"compose.yaml: unknown {name}"
        values[field] = value
    Settings(**values)


def test_gpu_ci_guide_commands_parse() -> None:
    text = (ROOT / "docs" / "gpu-ci.md").read_text()
    blocks = "\n".join(re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL))
    lines = re.findall(r"(?:run: |^\s*)(planner \S[^\n]*)", blocks, re.MULTILINE)
    # Usage lines name placeholders (DIR, [--flag]): those show the syntax, not a command.
    commands = [shlex.split(line) for line in lines if "[" not in line and "DIR" not in line]
    assert len(commands) >= 2
    for argv in commands:
        _check_planner_command(argv[1:])
    joined = re.sub(r"\\\n\s*", " ", text)  # shell continuation lines joined
    image_runs = re.findall(r"alloc-planner-gpu ((?:selftest|batch)[^\n]*)", joined)
    assert len(image_runs) >= 2
    for run in image_runs:
        _check_planner_command(shlex.split(run))
