"""Class 5: CAP_DAC_READ_SEARCH under landlock as root (red team round 10). It is kept only where the Python
installation sits under a directory other uids cannot search (the run's imports must pass it), and said once,
since it lets a run read other uids' files wherever its Landlock domain grants reading."""

import logging
import os

import pytest

from trl_ext.sandbox import landlock


@pytest.mark.skipif(os.geteuid() != 0, reason="the capability is kept only by a root trainer")
def test_read_search_is_kept_only_under_a_closed_directory_and_said_once(tmp_path, caplog):
    closed = tmp_path / "closed"
    (closed / "python").mkdir(parents=True)
    tmp_path.chmod(0o755)
    closed.chmod(0o700)
    landlock._warn_read_search.cache_clear()
    with caplog.at_level(logging.WARNING, logger="trl_ext.sandbox"):
        assert landlock.keep_read_search(["/usr/lib"]) is False
        assert caplog.records == []
        assert landlock.keep_read_search(["/usr/lib", str(closed / "python")]) is True
        assert landlock.keep_read_search([str(closed / "python")]) is True
    said = [r.getMessage() for r in caplog.records if "CAP_DAC_READ_SEARCH" in r.getMessage()]
    assert len(said) == 1 and str(closed / "python") in said[0] and "bubblewrap" in said[0]


def test_no_capability_is_kept_where_every_root_is_searchable():
    assert landlock.keep_read_search(["/usr/lib", "/usr/bin"]) is False
