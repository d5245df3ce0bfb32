"""Search ranking, one rule per test, on small catalogs."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from codemode import CodeMode
from codemode.authz import AllowAll
from codemode.capabilities.search import MAX_QUERY_BYTES, tokenize
from codemode.demo.host import create


def catalog(
    entries: Iterable[tuple[str, str, list[str]]], disabled: Iterable[str] = ()
) -> CodeMode:
    cm = CodeMode(authorizer=AllowAll(), disabled=disabled)
    for name, summary, terms in entries:

        def handler() -> None:
            return None

        cm.capability(name, summary=summary, search_terms=terms)(handler)
    return cm


def names(cm: CodeMode, query: str) -> list[str]:
    return [hit.name for hit in cm.search(query).results]


GITHUB = catalog(
    [
        ("issues.create", "Create a GitHub issue.", []),
        ("issues.list", "List GitHub issues of a repository.", []),
        ("pulls.merge", "Merge a GitHub pull request.", []),
        ("reviews.createReview", "Submit a review on a pull request.", []),
        ("db.mysql", "Run a MySQL query.", []),
        ("records.lookup", "Look up one record by key.", ["find record"]),
        ("records.list", "List records.", []),
        ("files.readXMLFile", "Read an XML file.", []),
    ]
)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("createReview", ["create", "review"]),
        ("XMLFile", ["xml", "file"]),
        ("readXMLFile", ["read", "xml", "file"]),
        ("GitHub", ["github"]),
        ("MySQL", ["mysql"]),
        ("records.lookup_by-key", ["records", "lookup", "by", "key"]),
    ],
)
def test_identifiers_split_the_way_people_type_them(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_a_token_does_not_match_inside_another_word() -> None:
    assert names(GITHUB, "sql") == []


def test_prefix_matches_a_camel_case_part() -> None:
    assert names(GITHUB, "crea")[0] == "issues.create"
    assert "reviews.createReview" in names(GITHUB, "crea")


def test_matching_more_of_the_query_ranks_first() -> None:
    found = names(GITHUB, "create github issue")
    assert found[:2] == ["issues.create", "issues.list"]
    assert found.index("pulls.merge") > 1  # one word of three: found, but after


def test_words_of_the_same_meaning_find_a_capability() -> None:
    cm = catalog(
        [
            ("hosts.power", "Start or stop an instance.", []),
            ("hosts.labels", "Add tags to an instance.", []),
            ("people.get", "Get one owner.", []),
            ("hosts.drop", "Delete an instance.", []),
        ]
    )
    assert names(cm, "boot vm")[0] == "hosts.power"
    assert names(cm, "label server")[0] == "hosts.labels"
    assert names(cm, "show user")[0] == "people.get"
    assert names(cm, "remove machine")[0] == "hosts.drop"


def test_the_demo_vocabulary_finds_what_a_model_asks_for(tmp_path: Path) -> None:
    with create(tmp_path / "demo.sqlite3") as demo:
        assert names(demo, "start vm")[0] == "instances.set_state"
        assert names(demo, "add label")[0] == "instances.tag"
        assert names(demo, "delete instance") != []
        assert names(demo, "person email")[0] == "owners.get"


def test_an_exact_dotted_name_comes_first() -> None:
    assert names(GITHUB, "records.list")[0] == "records.list"


def test_name_weighs_more_than_summary() -> None:
    cm = catalog([("alpha.report", "Make a summary.", []), ("beta.summary", "Make a report.", [])])
    assert names(cm, "summary") == ["beta.summary", "alpha.report"]


def test_search_terms_weigh_more_than_the_description() -> None:
    cm = catalog(
        [("a.one", "Thing one; handy for invoices.", []), ("b.two", "Thing two.", ["invoices"])]
    )
    assert names(cm, "invoices") == ["b.two", "a.one"]


def test_rare_tokens_weigh_more_than_common_ones() -> None:
    cm = catalog(
        [
            ("data.export", "Export data as csv.", []),
            ("data.load", "Load data.", []),
            ("data.clean", "Clean data.", []),
        ]
    )
    assert names(cm, "data csv")[0] == "data.export"


def test_ties_are_broken_by_name() -> None:
    cm = catalog([("zeta.list", "List things.", []), ("alpha.list", "List things.", [])])
    assert names(cm, "list things") == ["alpha.list", "zeta.list"]


def test_one_typo_in_a_long_token_is_tolerated() -> None:
    assert names(GITHUB, "recrods")[:2] == ["records.list", "records.lookup"]
    assert names(GITHUB, "isue") == []  # a typo counts only in five letters or more


def test_plurals_fold() -> None:
    cm = catalog([("instance.get", "Get one instance.", [])])
    assert names(cm, "instances") == ["instance.get"]


def test_an_empty_query_lists_the_catalog_in_name_order_a_page_at_a_time() -> None:
    everything = sorted(c for c in GITHUB.catalog.enabled)
    for query in ("", "   ", "*"):
        first = GITHUB.search(query, limit=3)
        assert [h.name for h in first.results] == everything[:3]
        assert first.truncated and first.next_offset == 3
    rest = GITHUB.search("", limit=50, offset=3)
    assert [h.name for h in rest.results] == everything[3:]
    assert not rest.truncated and rest.next_offset is None


def test_a_query_that_matches_nothing_says_what_to_try() -> None:
    for query in ("the and of", "...", "-", "zzzqqq"):
        result = GITHUB.search(query)
        assert result.results == () and result.truncated is False
        assert result.hint == (
            "Nothing matched. Namespaces: db, files, issues, pulls, records, reviews. Try "
            "fewer or other words, or an empty query to list every capability."
        )


def test_disabled_capabilities_are_invisible_even_through_their_terms() -> None:
    cm = catalog(
        [("vault.read", "Read a secret.", ["password"]), ("vault.list", "List secrets.", [])],
        disabled={"vault.read"},
    )
    assert names(cm, "password") == []
    assert "vault.read" not in names(cm, "vault.read")
    assert names(cm, "secret") == ["vault.list"]
    assert names(cm, "") == ["vault.list"]
    assert cm.search("zzz").hint is not None and "read" not in (cm.search("zzz").hint or "")


def test_the_response_is_bounded_and_says_so() -> None:
    cm = catalog([(f"items.get{i:03d}", "Get an item.", []) for i in range(60)])
    result = cm.search("item", limit=10)
    assert len(result.results) == 10 and result.truncated
    assert (
        not cm.search("items.get001").truncated
        or cm.search("items.get001").results[0].name == "items.get001"
    )


def test_an_oversized_query_is_cut_not_refused() -> None:
    assert names(GITHUB, "issue " * (MAX_QUERY_BYTES)) != []


def test_a_page_of_many_matches_is_the_best_first_then_ties_by_name() -> None:
    """More match than a page holds: the page is the best scored, then those tied at the
    page's last score by name, and each next page goes on where the last one stopped."""
    cm = catalog(
        [(f"items.get{i:03d}", "Get an item.", []) for i in reversed(range(80))]
        + [(f"item.pick{i}", "Get an item.", []) for i in (3, 1, 2)]
    )
    expected = ["item.pick1", "item.pick2", "item.pick3"]
    expected += [f"items.get{i:03d}" for i in range(80)]
    pages = [cm.search("item", limit=10, offset=offset) for offset in range(0, 83, 10)]
    assert [hit.name for page in pages for hit in page.results] == expected
    assert [page.next_offset for page in pages] == [*range(10, 90, 10)[:8], None]
    assert [hit.name for hit in cm.search("item", limit=3, offset=2).results] == expected[2:5]
    exact = cm.search("items.get042", limit=50)
    assert exact.results[0].name == "items.get042" and exact.truncated
