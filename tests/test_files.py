"""Tests of atomic_files: whole files or the old ones, modes kept, no temp files left behind."""
from __future__ import annotations

import json
import os

import pytest

from localrag import files as af


def test_text_json_and_binary_writes(tmp_path):
    af.write_text_atomic(tmp_path / "new" / "report.txt", "Hit@5 0.926\nä\n")  # folders are created
    assert (tmp_path / "new" / "report.txt").read_bytes() == "Hit@5 0.926\nä\n".encode("utf-8")
    af.write_json_atomic(tmp_path / "info.json", {"b": 1, "a": "Ü"})
    # Keys sorted, non-ASCII kept, indent 1, final newline.
    assert (tmp_path / "info.json").read_text(encoding="utf-8") == '{\n "a": "Ü",\n "b": 1\n}\n'
    af.write_json_atomic(tmp_path / "cache.json", {"k": [1]}, indent=2)
    assert json.loads((tmp_path / "cache.json").read_text(encoding="utf-8")) == {"k": [1]}
    af.write_atomic(tmp_path / "arrays.bin", lambda f: f.write(b"\x00\x01\r\n"), binary=True)
    assert (tmp_path / "arrays.bin").read_bytes() == b"\x00\x01\r\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["arrays.bin", "cache.json", "info.json", "new"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path):
    target = tmp_path / "baseline.txt"
    target.write_text("old report\n", encoding="utf-8")

    def half_then_crash(handle):
        handle.write("half a rep")
        raise KeyboardInterrupt  # Ctrl-C mid-write: not an Exception, still cleaned up

    with pytest.raises(KeyboardInterrupt):
        af.write_atomic(target, half_then_crash)
    assert target.read_text(encoding="utf-8") == "old report\n"
    assert [p.name for p in tmp_path.iterdir()] == ["baseline.txt"]


@pytest.fixture
def umask():
    """Set the process umask for one test; the old one comes back afterwards."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def test_modes_new_files_follow_the_umask_old_files_keep_theirs(tmp_path, umask):
    # Trap: mkstemp creates 0600 files; a report or goldset must not turn private by being rewritten.
    af.write_text_atomic(tmp_path / "new.txt", "x")
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == af.new_file_mode() == 0o644
    umask(0o077)  # a private user: new files are theirs alone, as open() would make them
    assert af.current_umask() == 0o077
    af.write_text_atomic(tmp_path / "private.txt", "x")
    assert (tmp_path / "private.txt").stat().st_mode & 0o777 == 0o600
    umask(0o002)
    af.write_text_atomic(tmp_path / "group.txt", "x")
    assert (tmp_path / "group.txt").stat().st_mode & 0o777 == 0o664
    old = tmp_path / "shared.txt"
    old.write_text("x")
    os.chmod(old, 0o664)
    af.write_text_atomic(old, "y")
    assert old.stat().st_mode & 0o777 == 0o664 and old.read_text() == "y"


def test_missing_folder_is_an_error_unless_asked_to_create_it(tmp_path):
    with pytest.raises(FileNotFoundError):
        af.write_atomic(tmp_path / "absent" / "goldset.csv", lambda f: f.write("x"))
    assert not (tmp_path / "absent").exists()


def test_an_os_error_names_the_target_never_the_temp_file(tmp_path, monkeypatch):
    """A folder where a file should go failed in os.replace(temp, target) and named the temp file; a full disk or a
    read-only folder while staging named it too. The error is the same OSError (subclass by errno) about the
    target, and nothing is left behind."""
    folder = tmp_path / "report.txt"
    folder.mkdir()
    kept = tmp_path / "kept.txt"
    kept.write_text("old\n", encoding="utf-8")
    with pytest.raises(IsADirectoryError) as caught:
        af.write_texts_atomic([(kept, "new\n"), (folder, "text")])
    assert (caught.value.errno, caught.value.filename, caught.value.filename2) == (21, str(folder), None)
    assert kept.read_text(encoding="utf-8") == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == \
        ["kept.txt", "report.txt"]

    def read_only(**kwargs):
        raise OSError(30, "Read-only file system", str(tmp_path / ".kept.txt.x1y2.tmp"))

    monkeypatch.setattr(af.tempfile, "mkstemp", read_only)
    with pytest.raises(OSError) as caught:
        af.write_text_atomic(kept, "new\n")
    assert (caught.value.errno, caught.value.strerror, caught.value.filename) == (30, "Read-only file system",
                                                                                 str(kept))


def test_the_one_csv_writer_quotes_formula_text_but_not_numbers():
    from localrag.files import csv_text, restore_cell, spreadsheet_cell

    cells = ["=1+1", "+49 30 1234", "-minus.pdf", "@SUM(A1)", "\tTab", "\rCR", "-0.5000", "+1", "-3", "1e-3", "-",
             "plain", "", None, -0.25, 7]
    assert [spreadsheet_cell(c) for c in cells] == [
        "'=1+1", "'+49 30 1234", "'-minus.pdf", "'@SUM(A1)", "'\tTab", "'\rCR", "-0.5000", "+1", "-3", "1e-3",
        "'-", "plain", "", "", "-0.25", "7"]
    assert [restore_cell(spreadsheet_cell(c)) for c in cells if isinstance(c, str)] == [c for c in cells
                                                                                        if isinstance(c, str)]
    assert restore_cell("'-5") == "'-5"  # a person's own quote before a number is kept
    assert csv_text([["a", "b"], ["=x", 'say "hi", then'], [-1.5, None]], delimiter=";") == (
        'a;b\n\'=x;"say ""hi"", then"\n-1.5;\n')
