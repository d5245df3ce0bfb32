"""The playground tests' Chromium and demo page, shared with the end-to-end ones."""

from __future__ import annotations

from tests.e2e.test_web import browser, demo_url, page

__all__ = ["browser", "demo_url", "page"]
