"""Browser mode: a real headless Chromium (selenium) clicking the elements of the app served on loopback."""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from agentbench_crbc.errors import EnvError

from .app import ServerHandle, Shop, serve
from .shared import SharedPerOwner

if TYPE_CHECKING:
    from .text import Clickable

__all__ = ["Browser", "browser_available", "browser_paths", "get_server"]  # and the CHROMIUM, CHROMEDRIVER defaults

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: The environment variables that name other executables. Executables come only from what the user typed (these,
#: or the defaults): never from an env keyword argument, a config file or a run folder, which a shared run could
#: have written.
CHROMIUM_ENV, CHROMEDRIVER_ENV = "ABC_CHROMIUM", "ABC_CHROMEDRIVER"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)
INSTALL_HINT = ("install Chromium and its driver (Debian/Ubuntu: `apt-get install -y chromium chromium-driver`) "
                "and the extra: pip install 'agentbench-crbc[browser]'")

# Finds the element a clickable names (the last match, as WebShop's text_to_clickable keeps) and returns it,
# so that selenium then clicks it with real input events.
_FIND = """
const kind = arguments[0], key = arguments[1];
const norm = s => s.replace(/\\s+/g, ' ').trim().toLowerCase();
let found = null;
if (kind === 'button') {
  for (const b of document.querySelectorAll('button')) if (norm(b.textContent) === key) found = b;
} else if (kind === 'link') {
  for (const a of document.querySelectorAll('a.product-link')) if (norm(a.textContent) === key) found = a;
} else {
  for (const r of document.querySelectorAll('input[type=radio]'))
    if (r.value.toLowerCase() === key) found = document.querySelector('label[for="' + CSS.escape(r.id) + '"]');
}
return found;
"""


def browser_paths() -> tuple[str, str]:
    """``(chromium, chromedriver)``: ``$ABC_CHROMIUM`` and ``$ABC_CHROMEDRIVER`` where set, else the defaults."""
    return (os.environ.get(CHROMIUM_ENV) or CHROMIUM, os.environ.get(CHROMEDRIVER_ENV) or CHROMEDRIVER)


def browser_available(binary: str | None = None, driver: str | None = None) -> str | None:
    """None when browser mode can run here, else the reason it cannot (paths default to :func:`browser_paths`)."""
    default_binary, default_driver = browser_paths()
    binary, driver = binary or default_binary, driver or default_driver
    try:
        import selenium  # noqa: F401
    except ImportError:
        return f"selenium is not installed; {INSTALL_HINT}"
    for path in (binary, driver):
        if not os.access(path, os.X_OK):
            return f"{path} not found; {INSTALL_HINT}"
    return None


_SERVERS: SharedPerOwner[Shop, ServerHandle] = SharedPerOwner(serve)


def get_server(shop: Shop) -> ServerHandle:
    """The process's server for ``shop`` (127.0.0.1, a free port, a daemon thread; started once)."""
    return _SERVERS.get(shop)


class Browser:
    """One headless Chromium with a fresh profile, driven through selenium.

    :param base_url: the app's base URL (``http://127.0.0.1:<port>``).
    :param binary: the Chromium executable (passed as ``binary_location``, never looked up online; default
        :func:`browser_paths`).
    :param driver: the chromedriver executable (passed as ``Service(executable_path=...)``; default
        :func:`browser_paths`).
    :param timeout: seconds to wait for a page load.
    """

    def __init__(self, base_url: str, binary: str | None = None, driver: str | None = None,
                 timeout: float = 30.0, window: tuple[int, int] = (1280, 900)) -> None:
        default_binary, default_driver = browser_paths()
        binary, driver = binary or default_binary, driver or default_driver
        reason = browser_available(binary, driver)
        if reason is not None:
            raise EnvError(f"WebShop browser mode: {reason}")
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.base_url = base_url
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="abc-webshop-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={self._profile}")
        options.add_argument(f"--window-size={window[0]},{window[1]}")
        try:
            self.driver = webdriver.Chrome(options=options, service=Service(executable_path=driver))
        except Exception as err:
            shutil.rmtree(self._profile, ignore_errors=True)
            raise EnvError(f"could not start Chromium ({binary}) through {driver}: {err}") from err
        self.driver.set_page_load_timeout(timeout)
        self._finalizer = weakref.finalize(self, Browser._shutdown, self.driver, self._profile)

    @staticmethod
    def _shutdown(driver: Any, profile: str) -> None:
        try:
            driver.quit()
        finally:
            shutil.rmtree(profile, ignore_errors=True)

    # -- navigation ----------------------------------------------------------------------------------------
    def _navigate(self, act: Any) -> str:
        """Run ``act`` (a click or Enter that loads a page) and wait until the new page has loaded.

        The old page is marked with a window property that a new document does not have. (Waiting for an old
        element to go stale raced: mid-navigation Chromium can answer "node does not belong to the document" instead
        of a stale-element error.) Errors while the page is swapped are polled through until the timeout.
        """
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver.execute_script("window.__abcOldPage = true")
        act()
        WebDriverWait(self.driver, self.timeout, poll_frequency=0.005, ignored_exceptions=(WebDriverException,)).until(
            lambda d: d.execute_script("return window.__abcOldPage !== true && document.readyState === 'complete'"))
        return self.driver.page_source

    def get(self, path: str) -> str:
        """Open ``path`` of the app; returns the page source."""
        self.driver.get(self.base_url + path)
        return self.driver.page_source

    def search(self, query: str) -> str:
        """Type ``query`` into the search box and press Enter (submits the search form)."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        box = self.driver.find_element(By.ID, "search_input")
        box.clear()
        return self._navigate(lambda: box.send_keys(query.replace("\n", " ") + Keys.ENTER))

    def click(self, clickable: Clickable) -> str:
        """Click the real element behind ``clickable`` (button, product link or option label)."""
        element = self.driver.execute_script(_FIND, clickable.kind, clickable.key)
        if element is None:
            raise EnvError(f"no element for {clickable.kind} {clickable.key!r} on {self.driver.current_url}")
        return self._navigate(element.click)

    @property
    def path(self) -> str:
        """The current URL's decoded path (the app's route)."""
        return unquote(urlsplit(self.driver.current_url).path)

    def screenshot(self, path: str | Path) -> None:
        """Save a PNG of the current page."""
        self.driver.save_screenshot(str(path))

    def close(self) -> None:
        """Quit Chromium and delete its profile."""
        self._finalizer()
