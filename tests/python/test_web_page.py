"""The chat page `folio serve` answers at / (src/server/web), in a real
browser: Debian's Chromium, headless, driven by selenium through Debian's
chromedriver (nothing is downloaded).

- On the real SmolLM2 model the page streams a greedy reply equal to what
  the same request gives through the API.
- Stop (Esc) ends a long reply, and the engine is left with no running
  request.
- Hostile markup in messages (a user's, and an assistant reply restored
  from the browser's storage) shows as text and runs nothing; the page is
  served with a Content-Security-Policy that allows only its own files.
- With --api-key the page asks for the key and then works.

Screenshots (desktop and phone width) go to build/test-artifacts/ (or
$FOLIO_TEST_ARTIFACTS). Skips, saying why, only where Chromium cannot start.
"""
import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

import smollm2
from test_server import Server, wait_until

webdriver = pytest.importorskip("selenium.webdriver",
                                reason="selenium is not installed (tools/requirements-test.txt)")
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ARTIFACTS = Path(os.environ.get("FOLIO_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[2] / "build/test-artifacts"))
HOSTILE = '<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2">'


@pytest.fixture
def browser():
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed (tools/setup.sh "
                    "installs them)")
    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900"):
        options.add_argument(arg)
    try:
        b = webdriver.Chrome(service=Service(driver), options=options)
    except WebDriverException as e:
        pytest.skip(f"Chromium cannot start here: {e.msg}")
    yield b
    b.quit()


def url(server):
    return f"http://{server.host}:{server.port}/"


def open_page(browser, server):
    browser.get(url(server))
    WebDriverWait(browser, 30).until(lambda b: b.find_element(By.TAG_NAME, "body")
                                     .get_attribute("data-ready") == "1")


def set_field(browser, css, value):
    el = browser.find_element(By.CSS_SELECTOR, css)
    if not el.is_displayed():  # the settings are folded away
        browser.find_element(By.CSS_SELECTOR, "#settings summary").click()
    el.clear()
    if value:
        el.send_keys(value)


def send(browser, text):
    box = browser.find_element(By.CSS_SELECTOR, "#prompt")
    box.clear()
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def last_reply(browser, timeout=120):
    """The last assistant message once it is done: (raw text, finish). Read
    in one script call, as the page re-renders its messages while it
    streams."""
    def done(b):
        got = b.execute_script(
            "const m = [...document.querySelectorAll('#messages .msg.assistant')].pop();"
            "return m && m.dataset.done === '1' ? [m.dataset.raw, m.dataset.finish] : null;")
        return got or False
    raw, finish = WebDriverWait(browser, timeout).until(done)
    return raw, finish


def screenshot(browser, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / name))


def test_the_page_streams_the_api_s_reply_on_smollm2(browser):
    model = smollm2.require()
    s = Server("--model", str(model))
    try:
        with urllib.request.urlopen(url(s)) as r:
            csp = r.headers["Content-Security-Policy"]
            assert "script-src 'self'" in csp and "default-src 'none'" in csp
            assert r.headers["Content-Type"].startswith("text/html")
        open_page(browser, s)
        set_field(browser, "#temperature", "0")
        set_field(browser, "#seed", "1")
        set_field(browser, "#max-tokens", "48")
        question = "What is the capital of France? Answer in one sentence."
        send(browser, question)
        text, finish = last_reply(browser)
        status, reply = s.post("/v1/chat/completions", {
            "messages": [{"role": "user", "content": question}], "temperature": 0, "seed": 1,
            "max_tokens": 48})
        assert status == 200, reply
        assert text == reply["choices"][0]["message"]["content"]
        assert finish == reply["choices"][0]["finish_reason"]
        assert "Paris" in text
        stats = browser.find_elements(By.CSS_SELECTOR, "#messages .msg.assistant .stats")
        assert stats and "prompt" in stats[-1].text, [x.text for x in stats]
        assert "KV" in browser.find_element(By.CSS_SELECTOR, "#status").text or \
            browser.find_element(By.CSS_SELECTOR, "#status").text
        # Regenerate sends the same conversation: its whole pages now come
        # from the prefix cache, and the stats say so.
        browser.find_element(By.CSS_SELECTOR, "#messages .msg.assistant .regenerate").click()
        again, _ = last_reply(browser)
        assert again == text
        stats = browser.find_elements(By.CSS_SELECTOR, "#messages .msg.assistant .stats")
        assert "cached" in stats[-1].text, stats[-1].text
        screenshot(browser, "chat-desktop.png")
        browser.set_window_size(390, 844)
        screenshot(browser, "chat-phone.png")
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_conversations_are_kept_and_switched(browser):
    s = Server()
    try:
        open_page(browser, s)
        set_field(browser, "#max-tokens", "3")
        send(browser, "first chat")
        last_reply(browser)
        browser.find_element(By.CSS_SELECTOR, "#new-chat").click()
        assert not browser.find_elements(By.CSS_SELECTOR, "#messages .msg")
        send(browser, "second chat")
        last_reply(browser)
        # Both survive a reload, and the list switches between them.
        open_page(browser, s)
        options = browser.find_elements(By.CSS_SELECTOR, "#chats option")
        assert [o.text for o in options] == ["second chat", "first chat"]
        options[1].click()
        users = browser.find_elements(By.CSS_SELECTOR, "#messages .msg.user .content")
        assert [u.text for u in users] == ["first chat"]
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_stop_ends_the_request_in_the_engine(browser):
    s = Server("--step-delay-us", "20000")  # the built-in model, slowed down
    try:
        open_page(browser, s)
        set_field(browser, "#max-tokens", "400")
        send(browser, "go on")
        WebDriverWait(browser, 30).until(lambda b: b.execute_script(
            "const m = [...document.querySelectorAll('#messages .msg.assistant')].pop();"
            "return m && (m.dataset.raw || '').length > 5;"))
        browser.find_element(By.CSS_SELECTOR, "#prompt").send_keys(Keys.ESCAPE)
        _, finish = last_reply(browser, timeout=30)
        assert finish == "aborted"
        assert wait_until(lambda: s.metrics()["folio_requests_running"] == 0, timeout=10)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_hostile_markup_shows_as_text_and_runs_nothing(browser):
    s = Server()
    try:
        open_page(browser, s)
        set_field(browser, "#max-tokens", "4")
        send(browser, HOSTILE)
        last_reply(browser)
        user = browser.find_elements(By.CSS_SELECTOR, "#messages .msg.user .content")[-1]
        assert "<script>" in user.text and "onerror" in user.text
        assert browser.execute_script("return window.pwned === undefined")
        assert not browser.find_elements(By.CSS_SELECTOR, "#messages img, #messages script")
        # An assistant reply goes through the Markdown renderer: restore one
        # from the browser's storage and reload.
        reply = "Here:\n\n```html\n" + HOSTILE + "\n```\n\nand **bold** `" + HOSTILE + "`"
        browser.execute_script(
            "localStorage.setItem('folio.chats', JSON.stringify({current: 'x', chats: {x: "
            "{title: 't', messages: [{role: 'user', content: 'q'}, {role: 'assistant', "
            "content: arguments[0], finish: 'stop'}]}}}));", reply)
        open_page(browser, s)
        msg = browser.find_elements(By.CSS_SELECTOR, "#messages .msg.assistant")[-1]
        assert msg.get_attribute("data-raw") == reply
        assert msg.find_element(By.CSS_SELECTOR, "pre code").text == HOSTILE
        assert msg.find_element(By.CSS_SELECTOR, "strong").text == "bold"
        assert browser.execute_script("return window.pwned === undefined")
        assert not browser.find_elements(By.CSS_SELECTOR, "#messages img, #messages script")
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_with_an_api_key_the_page_asks_for_it(browser):
    s = Server("--api-key", "s3cret")
    try:
        open_page(browser, s)  # the page itself needs no key
        dialog = browser.find_element(By.CSS_SELECTOR, "#api-key-dialog")
        WebDriverWait(browser, 30).until(lambda b: dialog.is_displayed())
        set_field(browser, "#api-key", "s3cret")
        browser.find_element(By.CSS_SELECTOR, "#api-key-save").click()
        set_field(browser, "#max-tokens", "4")
        send(browser, "hi")
        _, finish = last_reply(browser)
        assert finish in ("stop", "length")
        # Without the key the API stays closed.
        req = urllib.request.Request(url(s) + "v1/models")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code == 401
    finally:
        assert s.stop() == 0, "".join(s.log)
