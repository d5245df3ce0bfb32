"""The playground's layout, measured in a real browser (Debian's Chromium through Playwright)
at a desktop's 1280 pixels and a phone's 400: every capability can be reached and the list
says when some lie below, no line is cut at a panel's edge, carets stand under the columns
they point at, and the approval dialog's two answers look different."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.approvals.conftest import served
from tests.e2e.test_web import CHROMIUM, CHROMIUM_ARGS, SHOTS

WIDTHS = [1280, 400]
LONG = (
    "def main():\n"
    '    page = instances.list(sandbox="dev", limit=2)  # the first page, of two instances'
    " at most, to keep this short\n"
    '    return instances.get(sandbox="dev", name="nope").addresses + [item["name"] for item'
    ' in page["items"]]\n'
)
"""A program whose lines run past the editor at any width, failing at column 12 of line 3."""

OVERFLOW = """
(root) => {
  // Elements whose content runs past their box with no way to scroll to it: cut.
  const cut = [];
  for (const e of root.querySelectorAll("*")) {
    const style = getComputedStyle(e);
    if (style.display === "none" || e.closest(".collapsed, .visually-hidden, #highlight")) continue;
    const scrolls = ["auto", "scroll"].includes(style.overflowX);
    if (e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0 && !scrolls) cut.push(e.id || e.className || e.tagName);
    const box = e.getBoundingClientRect(), panel = e.closest("section").getBoundingClientRect();
    let scroller = e.parentElement;
    while (scroller && !["auto", "scroll"].includes(getComputedStyle(scroller).overflowX)) scroller = scroller.parentElement;
    if (box.right > panel.right + 1 && !(scroller && root.contains(scroller))) cut.push(`past the panel: ${e.id || e.tagName}`);
  }
  return cut;
}
"""

CARETS = """
(element) => {
  // Each source line with a caret line under it, in the element's text: the box of the
  // source's character at the first and the last caret's column, and of those carets.
  const text = element.textContent;
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  const nodes = [];
  let start = 0;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    nodes.push([node, start]);
    start += node.data.length;
  }
  const box = (at) => {
    const [node, first] = nodes.filter(([n, s]) => s <= at && at < s + n.data.length)[0];
    const range = document.createRange();
    range.setStart(node, at - first);
    range.setEnd(node, at - first + 1);
    const r = range.getClientRects()[0];
    return { x: r.left, right: r.right, y: r.top };
  };
  const lines = text.split("\\n");
  const pairs = [];
  let offset = 0;
  for (let i = 0; i < lines.length; i++) {
    const next = offset + lines[i].length + 1;
    if (i + 1 < lines.length && /^ *\\^+ *$/.test(lines[i + 1])) {
      const first = lines[i + 1].indexOf("^"), last = lines[i + 1].lastIndexOf("^");
      pairs.push({
        source: [box(offset + first), box(offset + Math.min(last, lines[i].length - 1))],
        caret: [box(next + first), box(next + last)],
      });
    }
    offset = next;
  }
  return pairs;
}
"""


def at_width(page: Page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 800})


def run(page: Page, source: str) -> None:
    page.fill("#source", source)
    page.click("#run")
    expect(page.locator("#status")).to_have_text(re.compile(r"^(Finished|Failed)\.$"))


@pytest.mark.parametrize("width", WIDTHS)
def test_every_capability_can_be_reached_and_the_list_says_how_many_lie_below(
    page: Page,
    width: int,
) -> None:
    at_width(page, width)
    page.reload()
    options = page.locator("#results li[role=option]")
    expect(options).to_have_count(8)
    results = page.locator("#results")
    assert results.evaluate("e => getComputedStyle(e).overflowY") == "auto"
    in_range = results.evaluate(
        "e => [...e.querySelectorAll('li[role=option]')].every((li) =>"
        " li.getBoundingClientRect().bottom - e.getBoundingClientRect().top + e.scrollTop"
        " <= e.scrollHeight)"
    )
    assert in_range
    assert results.evaluate("e => e.scrollHeight > e.clientHeight")  # 8 do not fit at 800 high
    cue = page.locator("#results-more")
    expect(cue).to_be_visible()
    below = results.evaluate(  # the capabilities not wholly in view above the cue
        "e => [...e.querySelectorAll('li[role=option]')].filter((li) =>"
        " li.getBoundingClientRect().bottom >"
        " document.getElementById('results-more').getBoundingClientRect().top + 1).length"
    )
    expect(cue).to_have_text(f"↓ {below} more below")
    cue_box, list_box = cue.bounding_box(), results.bounding_box()
    assert cue_box is not None and list_box is not None
    assert (
        list_box["y"] <= cue_box["y"]
        and cue_box["y"] + cue_box["height"] <= list_box["y"] + list_box["height"] + 1
    )  # over the list's bottom edge, where the eye leaves it

    page.emulate_media(reduced_motion="reduce")  # each click scrolls at once
    for _ in range(8):  # each click shows the next part of the list
        if cue.is_hidden():
            break
        shown = cue.text_content() or ""
        cue.click()
        expect(cue).not_to_have_text(shown)  # the list scrolled, and the count went down
    expect(cue).to_be_hidden()
    last = options.last.bounding_box()
    list_box = results.bounding_box()
    assert last is not None and list_box is not None
    assert (
        list_box["y"] <= last["y"]
        and last["y"] + last["height"] <= list_box["y"] + list_box["height"]
    )
    page.screenshot(path=SHOTS / f"list-{width}.png")


def test_a_long_line_in_the_editor_scrolls_and_the_edge_says_so(page: Page) -> None:
    at_width(page, 1280)
    page.fill("#source", LONG)
    editor = page.locator("#source")
    assert editor.evaluate("e => e.scrollWidth > e.clientWidth")
    assert editor.evaluate("e => getComputedStyle(e).overflowX") == "auto"
    shade = "e => getComputedStyle(document.querySelector('.code'), '::after').content"
    assert editor.evaluate(shade) != "none"  # lines go on past the right edge

    editor.evaluate("e => { e.scrollLeft = e.scrollWidth; e.dispatchEvent(new Event('scroll')); }")
    assert editor.evaluate(shade) == "none"
    # The end of the longest line, drawn by the highlighted copy, is in view: the copy
    # scrolled as far as the textarea did.
    end: dict[str, Any] = page.evaluate(
        """() => {
          const text = document.getElementById('highlight');
          const at = text.textContent.indexOf('"items"]]') + 8;  // the line's last character
          const walker = document.createTreeWalker(text, NodeFilter.SHOW_TEXT);
          let node = walker.nextNode(), start = 0;
          while (start + node.data.length <= at) { start += node.data.length; node = walker.nextNode(); }
          const range = document.createRange();
          range.setStart(node, at - start);
          range.setEnd(node, at - start + 1);
          const r = range.getBoundingClientRect();
          const area = document.getElementById('source').getBoundingClientRect();
          const editor = document.getElementById('source');
          return { right: r.right, left: r.left,
                   edge: area.left + editor.clientWidth, start: area.left };
        }"""
    )
    assert end["start"] < end["left"] and end["right"] <= end["edge"]


@pytest.fixture(scope="module")
def scrollbars_page(browser: Browser, demo_url: str) -> Iterator[Page]:
    """The demo page in a Chromium that draws its scrollbars, as a desktop one does
    (Playwright's headless one hides them, and the room they take with them)."""
    drawn = browser.browser_type.launch(
        executable_path=CHROMIUM,
        headless=True,
        args=CHROMIUM_ARGS,
        ignore_default_args=["--hide-scrollbars"],
    )
    page = drawn.new_page(viewport={"width": 1280, "height": 800})
    page.goto(demo_url)
    yield page
    drawn.close()


def test_the_gutter_and_the_colors_keep_step_with_the_text_to_its_last_line(
    scrollbars_page: Page,
) -> None:
    """Scrolled to its last line and its longest line's end, beside both scrollbars, the
    editor's line numbers and its highlighted copy scrolled exactly as far as its text."""
    page = scrollbars_page
    lines = "".join(f"    x{i} = {i}\n" for i in range(30))
    page.fill("#source", f"def main():\n{lines}{LONG.splitlines()[2]}\n")
    page.locator("#source").evaluate(
        "e => { e.scrollTop = e.scrollHeight; e.scrollLeft = e.scrollWidth;"
        " e.dispatchEvent(new Event('scroll')); }"
    )
    offsets = page.evaluate(
        "() => ['source', 'gutter', 'highlight'].map((id) => {"
        " const e = document.getElementById(id); return [e.scrollTop, e.scrollLeft]; })"
    )
    editor, gutter, highlight = offsets
    assert editor[0] > 0 and editor[1] > 0
    assert gutter[0] == editor[0] and highlight == editor


@pytest.mark.parametrize("width", WIDTHS)
def test_no_report_is_cut_at_the_panel_edge(page: Page, width: int) -> None:
    at_width(page, width)
    run(page, f"def main():\n    return ['{'v' * 300}', {{'{'k' * 120}': 1}}]\n")
    page.click("#model-view summary")
    assert page.locator("#outcome").evaluate(OVERFLOW) == []
    run(page, LONG)
    page.click("#toggle-traceback")
    page.click("#model-view summary")
    page.click("#results li[data-name='instances.list']")
    page.click("#detail summary")  # its JSON Schemas
    expect(page.locator("#detail-schemas")).to_be_visible()
    for panel in ("#outcome", "#program", "#capabilities"):
        assert page.locator(panel).evaluate(OVERFLOW) == [], panel
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("width", WIDTHS)
def test_carets_stand_under_the_columns_they_point_at(page: Page, width: int) -> None:
    at_width(page, width)
    run(page, LONG)
    page.click("#toggle-traceback")
    page.click("#model-view summary")
    for selector in ("#error-source", "#traceback", "#model-text"):
        pairs = page.locator(selector).evaluate(CARETS)
        assert pairs, selector
        for pair in pairs:
            (first, last), (first_caret, last_caret) = pair["source"], pair["caret"]
            assert abs(first_caret["x"] - first["x"]) < 0.5, selector
            assert abs(last_caret["x"] - last["x"]) < 0.5, selector
            assert first_caret["y"] == last_caret["y"] > first["y"] == last["y"], selector
    page.screenshot(path=SHOTS / f"carets-{width}.png", full_page=True)


def luminance(color: str) -> float:
    """The relative luminance of a CSS `rgb(r, g, b)` color (WCAG 2)."""
    channels = [int(c) / 255 for c in re.findall(r"\d+", color)[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


STYLE = "e => { const s = getComputedStyle(e); return [s.backgroundColor, s.color, s.outlineStyle, s.outlineColor]; }"


def test_approve_and_decline_look_different_and_decline_has_the_focus(
    browser: Browser,
) -> None:
    with served("--web") as (base, _):
        context = browser.new_context(viewport={"width": 400, "height": 800})
        try:
            page = context.new_page()
            page.goto(f"{base}/")
            page.fill("#source", "def main():\n    return tickets.delete(id=1)\n")
            page.click("#run")
            expect(page.locator("#approval")).to_be_visible()
            expect(page.locator("#decline")).to_be_focused()  # Enter never approves by accident
            approve = page.locator("#approve").evaluate(STYLE)
            decline = page.locator("#decline").evaluate(STYLE)
            assert approve[0] != decline[0]
            white = "rgb(255, 255, 255)"
            for background, color, _, _ in (approve, decline):
                solid = background if background != "rgba(0, 0, 0, 0)" else white
                assert contrast(solid, color) >= 4.5
            page.keyboard.press("Shift+Tab")  # the keyboard's focus, drawn
            expect(page.locator("#approve")).to_be_focused()
            focused = page.locator("#approve").evaluate(STYLE)
            assert focused[2] == "solid" and contrast(focused[3], white) >= 3
            page.screenshot(path=SHOTS / "approval-400.png")
            page.keyboard.press("Enter")
            expect(page.locator("#status")).to_have_text("Finished.")
        finally:
            context.close()
