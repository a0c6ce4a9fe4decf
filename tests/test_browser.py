"""TensorBoard's profile tab in a real headless Chromium (Debian's ``chromium``), as a user
sees it: both runs listed, a screenshot saved; and the browser driver itself.

Without Chromium the tests that need it skip, each with one line naming what to install
(``tests/conftest.py``, ``@pytest.mark.needs``); ``.ci/run`` installs it
(``.ci/install-tools``) and fails when any test skipped."""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from compare.viewers.browser import BrowserError, Chromium, find_chromium
from compare.viewers.tensorboard import profile_runs, screenshot_profile

WIDTH, HEIGHT = 1400, 900


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


def _processes_mentioning(*needles: str) -> list[str]:
    """Live processes whose command line or environment mentions any of ``needles`` (Chromium's
    crashpad handlers leave its process group; its profile folder is in their environment)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X") and any(n in cmdline + environ for n in needles):
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.needs("chromium")
def test_profile_tab_lists_both_runs_and_is_screenshotted(profile_logdir, tmp_path):
    logdir, runs = profile_logdir
    png = tmp_path / "profile_tab.png"
    work = tmp_path / "work"
    listed = screenshot_profile(logdir, png, work_dir=work, width=WIDTH, height=HEIGHT)
    # The Sessions list on the page names both runs, pipeline first, as the plugin's API does.
    assert sorted(listed) == sorted(profile_runs(logdir))
    assert sorted(name.split("/")[0] for name in listed) == sorted(runs)
    assert _png_size(png) == (WIDTH, HEIGHT)
    assert png.stat().st_size > 20_000  # a rendered page, not a blank one
    assert "TensorBoard" in (work / "tensorboard.log").read_text()
    # TensorBoard (and its data server) and Chromium (and its helpers) are all gone.
    assert _processes_mentioning(str(logdir), str(work)) == []
    assert not any(work.glob("chromium-profile-*")), "Chromium's profile folder was left behind"


@pytest.mark.browser
@pytest.mark.needs("chromium")
def test_chromium_renders_a_page_and_leaves_nothing_behind(tmp_path):
    with Chromium(width=640, height=480, profile_parent=tmp_path) as browser:
        page = browser.new_page()
        page.navigate("data:text/html,<title>t</title><p id=p>rendered%20here</p>"
                      "<script>setTimeout(()=>document.title='ready',200)</script>")
        assert page.wait_for("document.title === 'ready' && document.title", timeout=20) == "ready"
        assert page.evaluate("document.getElementById('p').innerText") == "rendered here"
        with pytest.raises(BrowserError, match="did not appear within"):
            page.wait_for("document.getElementById('nope')", timeout=1, what="#nope")
        with pytest.raises(BrowserError, match="script failed"):
            page.evaluate("null.x")
        shot = page.screenshot(tmp_path / "page.png")
        assert _processes_mentioning(str(tmp_path))  # the checks below can see live ones
        assert browser.leftover_pids()
    assert _png_size(shot) == (640, 480)
    assert _processes_mentioning(str(tmp_path)) == [] and browser.leftover_pids() == []
    assert not any(tmp_path.glob("chromium-profile-*"))


def test_missing_chromium_is_one_loud_line(monkeypatch, tmp_path):
    monkeypatch.setenv("CHROMIUM", str(tmp_path / "no-such-chromium"))
    with pytest.raises(BrowserError, match="not an executable file"):
        find_chromium()
    monkeypatch.delenv("CHROMIUM")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrowserError) as e:
        Chromium()
    assert "apt-get install chromium" in str(e.value) and "\n" not in str(e.value)


def test_a_browser_that_exits_at_once_is_reported_not_waited_for(tmp_path):
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\necho 'cannot open display' >&2\nexit 1\n")
    fake.chmod(0o755)
    # It may die before our first message is written or while we wait for the answer.
    died = "exited (while waiting for|before) Browser.getVersion.*cannot open display"
    with pytest.raises(BrowserError, match=died):
        Chromium(executable=str(fake), timeout=20, log_path=tmp_path / "chromium.log").start()


@pytest.mark.browser
@pytest.mark.needs("chromium")
def test_close_kills_a_helper_that_left_the_process_group(tmp_path):
    # Chromium's crashpad handlers start their own sessions; close() finds such helpers by the
    # marker in their environment. Stand one in with a sleeping process that carries it.
    import subprocess

    from compare.viewers.browser import MARKER

    with Chromium(profile_parent=tmp_path) as browser:
        straggler = subprocess.Popen(["sleep", "300"], start_new_session=True,
                                     env=dict(os.environ, **{MARKER: browser.profile_dir}))
        assert straggler.pid in browser.leftover_pids()
    assert straggler.wait(timeout=10) == -9
    assert browser.leftover_pids() == []
