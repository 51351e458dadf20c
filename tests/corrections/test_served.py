"""corrections/served.py: served sources kept once each, within a day's bound, by every server
of a store into one file that forward translation can read."""

from __future__ import annotations

from transformer_cli.corrections.served import ServedText


def test_sources_are_kept_once_within_the_bound_and_processes_share_the_file(tmp_path):
    one = ServedText(tmp_path, "de", per_day=4)
    other = ServedText(tmp_path, "de", per_day=4)  # another server of the store
    assert one.add(["Ein Hund .", "  Ein   Hund . ", "", "Eine Katze ."]) == 2
    assert other.add(["Eine Katze .", "Ein Baum ."]) == 1  # what the first kept counts
    assert one.add(["Ein Haus .", "Ein Auto .", "Ein Boot ."]) == 2  # its day's bound: 4
    assert one.add(["Ein Zug ."]) == 0
    assert (tmp_path / "served.de").read_text(encoding="utf-8").splitlines() == [
        "Ein Hund .",
        "Eine Katze .",
        "Ein Baum .",
        "Ein Haus .",
        "Ein Auto .",
    ]
