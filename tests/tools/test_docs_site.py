"""The documentation site builds strictly, and a broken link or anchor fails its build."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT

ROOT = ROOT
MKDOCS = Path(sys.executable).with_name("mkdocs")

needs_mkdocs = pytest.mark.skipif(not MKDOCS.exists(), reason="needs mkdocs (the dev extra)")


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", root / "docs")
    return root


@needs_mkdocs
def test_the_site_builds_with_every_link_checked(tmp_path: Path) -> None:
    done = _build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    pages = {
        p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("index.html")
    }
    assert {"index.html", "design/index.html", "cli/index.html", "benchmarks/index.html"} <= pages


@needs_mkdocs
@pytest.mark.parametrize(
    ("planted", "said"),
    [
        ("[x](no-such-page.md)", "no-such-page.md"),
        ("[y](design.md#no-such-heading)", "no-such-heading"),
    ],
)
def test_a_broken_link_fails_the_build(tmp_path: Path, planted: str, said: str) -> None:
    root = _copy(tmp_path)
    page = root / "docs" / "cli.md"
    page.write_text(page.read_text() + "\n" + planted + "\n")
    done = _build(root, tmp_path / "site")
    assert done.returncode != 0
    assert said in done.stderr


@needs_mkdocs
def test_a_page_left_out_of_the_navigation_fails_the_build(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "docs" / "orphan.md").write_text("# Orphan\n")
    done = _build(root, tmp_path / "site")
    assert done.returncode != 0
    assert "orphan.md" in done.stderr


def test_the_readme_is_short_and_links_only_to_pages_that_exist() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 160
    for target in (part.split(")")[0] for part in text.split("](")[1:]):
        if not target.startswith("http"):
            assert (ROOT / target.split("#")[0]).exists(), target


def _tables() -> Any:
    spec = importlib.util.spec_from_file_location(
        "docs_tables", ROOT / "scripts" / "docs_tables.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_measured_block_holds_what_its_command_printed_with_a_date(tmp_path: Path) -> None:
    tables = _tables()
    page = tmp_path / "page.md"
    page.write_text("# T\n\n<!-- measured: echo 'arena 4096' -->\nstale 1234\n<!-- /measured -->\n")
    assert tables.undated(page.read_text()) == ["echo 'arena 4096'"]
    assert tables.main(["--page", str(page), "--check"]) == 1
    assert tables.main(["--page", str(page)]) == 0
    text = page.read_text()
    assert "stale 1234" not in text
    assert "$ echo 'arena 4096'\narena 4096\n" in text
    assert tables.undated(text) == []
    assert tables.main(["--page", str(page), "--check"]) == 0


def test_every_figure_on_the_benchmarks_page_is_a_dated_measured_block() -> None:
    tables = _tables()
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert len(tables.blocks(text)) >= 5
    assert tables.undated(text) == []
    outside = tables.BLOCK.sub("", text)
    assert "```console" not in outside
