"""``/docs`` works offline: Swagger UI's files come from the installed package, and a
browser that may reach nothing but the service renders every operation."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fastapi.testclient import TestClient

from planner.api.app import create_app
from planner.api.settings import Settings
from tests.support.browser import browser, downloads, driver, server, wait_for

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

__all__ = ["downloads", "driver", "server"]  # fixtures used by name below


def _client() -> TestClient:
    return TestClient(create_app(Settings(solver_pool="threads", solver_workers=1)))


def test_docs_page_names_no_other_host() -> None:
    with _client() as client:
        page = client.get("/docs")
        assert page.status_code == 200
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ?["']([^"']+)["']""", page.text)
        found = [u for pair in urls for u in pair if u]
        assert found, page.text
        for url in found:
            assert url.startswith("/"), f"/docs loads {url} from elsewhere"
        for url in found:
            if url != "/openapi.json":
                assert client.get(url).status_code == 200, url
        assert client.get("/redoc").status_code == 404  # FastAPI's CDN page is off


@browser
def test_docs_render_every_operation_without_network(driver: Chrome, server: str) -> None:
    from selenium.webdriver.common.by import By

    driver.execute_cdp_cmd("Network.enable", {})
    # A CDN answers over https: blocked, as on a machine without internet; and every resource
    # the page loaded must come from the service itself.
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["https://*"]})
    try:
        driver.get(f"{server}/docs")
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, ".opblock"))
        paths = {e.text for e in driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
        for path in ("/plan", "/validate", "/healthz", "/targets"):
            assert any(p.startswith(path) for p in paths), paths
        loaded = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        assert loaded
        assert all(url.startswith(server) for url in loaded), loaded
    finally:
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
