"""Shared pieces of the browser tests: a real service process and a headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import httpx
import pytest

from tests.server_process import free_port

if TYPE_CHECKING:
    from selenium.webdriver import Chrome
    from selenium.webdriver.remote.webelement import WebElement

T = TypeVar("T")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
try:
    import selenium  # noqa: F401

    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False

browser = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None or not HAVE_SELENIUM,
    reason="needs chromium, chromedriver and selenium",
)


def start_server() -> tuple[str, subprocess.Popen[bytes]]:
    """A service process on a free loopback port, answering /healthz."""
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "planner.api.app:create_app", "--factory"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return url, proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"the server did not start: {err}")
        time.sleep(0.2)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(timeout=30)


def start_driver(downloads: Path) -> Chrome:
    """Headless Chromium through selenium, saving downloads into ``downloads``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    assert CHROMIUM is not None
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1600",
    ):
        options.add_argument(arg)
    d = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    d.execute_cdp_cmd(
        "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    return d


def attribute(element: WebElement, name: str) -> str:
    """The attribute (or property) ``name`` of ``element``, which the page always sets."""
    value = element.get_attribute(name)
    assert value is not None, f"<{element.tag_name}> has no {name}"
    return value


def wait_for(condition: Callable[[], T | None], timeout: float = 60.0) -> T:
    """The first truthy value of ``condition``, polled until ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    url, proc = start_server()
    try:
        yield url
    finally:
        stop_server(proc)


@pytest.fixture(scope="module")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the browser saves downloads into."""
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def driver(downloads: Path) -> Iterator[Chrome]:
    d = start_driver(downloads)
    try:
        yield d
    finally:
        d.quit()
