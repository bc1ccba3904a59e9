"""Headless Chromium for web-page tests (Debian's `chromium` and `chromium-driver` packages,
driven by Selenium), and where tests leave artifacts such as screenshots.

Why Debian's packages: no browser download is possible on our machines, and the distro's
chromedriver always matches its chromium. `make browser` installs both.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = "install Debian's chromium and chromium-driver packages: `make browser`"


def artifacts_dir() -> Path:
    """`$PHALANX_TEST_ARTIFACTS`, else build/test-artifacts in the checkout (git-ignored)."""
    path = Path(os.environ.get("PHALANX_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def chromium(width: int, height: int) -> Iterator[webdriver.Chrome]:
    """A headless Chromium window of `width` x `height` CSS pixels."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver is None:
        raise RuntimeError(f"headless Chromium is needed for this test: {INSTALL_HINT}")
    options = webdriver.ChromeOptions()
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.binary_location = browser
    for flag in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield chrome
    finally:
        chrome.quit()


def page_state(browser: webdriver.Chrome) -> str:
    """What to show when a wait on the page times out: its console and its visible text."""
    console = "\n".join(str(entry.get("message")) for entry in browser.get_log("browser"))  # type: ignore[no-untyped-call]
    text = browser.find_element("tag name", "body").text
    return f"browser console:\n{console or '(empty)'}\npage text:\n{text}"
