"""localrag/progress.py: plain progress lines on a non-terminal stderr, throttled by an injected clock."""
from __future__ import annotations

from localrag import progress
from localrag.progress import Progress, progress_iter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_at_most_every_ten_seconds_then_a_closing_line(capsys):
    clock = Clock()
    bar = Progress("Embedding chunks", 22_730, "chunk", clock=clock, terminal=False)
    for seconds in (2.0, 9.9):  # within the first 10 s: nothing
        clock.now = 100 + seconds
        bar.update(64)
    assert capsys.readouterr().err == ""
    clock.now = 110.0  # 10 s after the start: a line
    bar.update(1_072)
    clock.now = 119.5  # 9.5 s after that line: none
    bar.update(64)
    clock.now = 120.4  # 10.4 s after it: one
    bar.update(64)
    clock.now = 125.0
    bar.update(22_730 - 1_328)
    bar.close()
    bar.close()  # closing twice prints nothing more
    assert capsys.readouterr().err == ("Embedding chunks: 1,200/22,730 (5 %), 10 s elapsed\n"
                                       "Embedding chunks: 1,328/22,730 (5 %), 20 s elapsed\n"
                                       "Embedding chunks: 22,730/22,730 (100 %), 25 s elapsed\n")


def test_a_task_without_a_total_counts_only(capsys):
    clock = Clock()
    with Progress("Embedding chunks", None, "chunk", clock=clock, terminal=False) as bar:
        clock.now = 112.0
        bar.update(640)
        clock.now = 115.0
        bar.update(64)
    assert capsys.readouterr().err == ("Embedding chunks: 640, 12 s elapsed\n"
                                       "Embedding chunks: 704, 15 s elapsed\n")


def test_a_short_task_prints_nothing_and_quiet_prints_nothing(capsys):
    clock = Clock()
    assert list(progress_iter(range(3), "Questions (hybrid)", 3, "q", clock=clock, terminal=False)) == [0, 1, 2]
    assert capsys.readouterr().err == ""  # done within 10 s: no line, no closing line
    items = []
    for item in progress_iter(range(3), "Questions (hybrid)", 3, "q", show=False, clock=clock, terminal=False):
        clock.now += 30  # a slow task under --quiet: still nothing
        items.append(item)
    assert items == [0, 1, 2] and capsys.readouterr().err == ""


def test_the_iterator_counts_each_item_and_closes(capsys):
    clock = Clock()
    for _ in progress_iter(range(4), "Lint: questions", 4, "q", clock=clock, terminal=False):
        clock.now += 6  # a line after the second item (12 s), another after the fourth (24 s; 12 s later)
    # The line of the fourth item showed the final count: closing adds no copy of it.
    assert capsys.readouterr().err == ("Lint: questions: 2/4 (50 %), 12 s elapsed\n"
                                       "Lint: questions: 4/4 (100 %), 24 s elapsed\n")
    assert progress.LINE_SECONDS == 10.0


def test_a_slow_step_without_updates_still_gets_its_line(capsys):
    # One embedding batch may take longer than 10 s on a loaded machine: the ticker prints while it runs.
    clock = Clock()
    bar = Progress("Embedding chunks", 1_000, "chunk", clock=clock, terminal=False)
    bar.update(64)
    clock.now = 109.0
    bar.tick()  # 9 s: nothing yet
    clock.now = 110.0
    bar.tick()  # 10 s without an update: the line
    clock.now = 115.0
    bar.tick()  # 5 s after that line: nothing
    clock.now = 120.0
    bar.tick()
    bar.close()  # the last line showed the final count: no closing line
    assert capsys.readouterr().err == ("Embedding chunks: 64/1,000 (6 %), 10 s elapsed\n"
                                       "Embedding chunks: 64/1,000 (6 %), 20 s elapsed\n")


def test_the_ticker_thread_prints_while_no_update_comes_and_stops_at_close(capsys, monkeypatch):
    import time

    monkeypatch.setattr(progress, "LINE_SECONDS", 0.2)
    bar = Progress("Reading PDFs", 3, "file", terminal=False)
    deadline = time.monotonic() + 10
    while "Reading PDFs: 0/3 (0 %)" not in capsys.readouterr().err:  # no update() at all
        assert time.monotonic() < deadline, "the ticker printed no line"
        time.sleep(0.05)
    bar.update(3)
    bar.close()
    time.sleep(0.5)  # closed: the ticker has stopped
    assert capsys.readouterr().err in ("", "Reading PDFs: 3/3 (100 %), 0 s elapsed\n")


def test_an_announced_task_prints_its_first_line_at_once(capsys):
    clock = Clock()
    with Progress("Reading PDFs", 74, "file", clock=clock, terminal=False, announce=True) as bar:
        assert capsys.readouterr().err == "Reading PDFs: 0/74 (0 %), 0 s elapsed\n"
        clock.now = 104.0
        bar.update(74)
    # The close line shows the final count (the start line showed 0).
    assert capsys.readouterr().err == "Reading PDFs: 74/74 (100 %), 4 s elapsed\n"
    with Progress("Reading PDFs", 74, "file", clock=clock, terminal=False, show=False, announce=True):
        pass
    assert capsys.readouterr().err == ""  # --quiet: not even the start


def test_a_finished_count_already_shown_is_not_repeated(capsys):
    # Reading PDFs is done, but its task stays open while the last chunks are embedded: one 3/3 line, not one a tick.
    clock = Clock()
    bar = Progress("Reading PDFs", 3, "file", clock=clock, terminal=False)
    clock.now = 110.0
    bar.update(3)
    for clock.now in (120.0, 130.0, 140.0):
        bar.tick()
    bar.close()
    assert capsys.readouterr().err == "Reading PDFs: 3/3 (100 %), 10 s elapsed\n"


def test_a_task_whose_work_is_another_tasks_prints_nothing_and_a_waiting_one_says_for_what(capsys):
    # Reading PDFs once printed "Reading PDFs: 1/2 (50 %)" every 10 s for 140 s while the first file's chunks were
    # embedded: its count stood still, and the line did not say why.
    clock = Clock()
    bar = Progress("Reading PDFs", 2, "file", clock=clock, terminal=False)
    bar.set_doing("reading a.pdf")
    clock.now = 110.0
    bar.tick()
    bar.set_doing("reading b.pdf")
    bar.update(1)
    with bar.paused():  # a.pdf's chunks are embedded, with their own progress lines
        for clock.now in (120.0, 130.0, 240.0):
            bar.tick()
    assert capsys.readouterr().err == "Reading PDFs: 0/2 (0 %), reading a.pdf, 10 s elapsed\n"
    clock.now = 241.0
    bar.tick()  # its work again, 131 s after its last line: it says on which file it waits
    clock.now = 245.0
    bar.set_doing(None)
    bar.update(1)
    bar.close()
    assert capsys.readouterr().err == ("Reading PDFs: 1/2 (50 %), reading b.pdf, 141 s elapsed\n"
                                       "Reading PDFs: 2/2 (100 %), 145 s elapsed\n")


def test_items_made_by_another_task_pause_the_one_that_takes_them(capsys):
    clock = Clock()
    bar = Progress("Embedding chunks", None, "chunk", clock=clock, terminal=False)

    def files():  # each file takes 30 s to read: not this task's time
        for name in ("a.pdf", "b.pdf"):
            clock.now += 30
            bar.tick()
            yield name

    taken = []
    for name in bar.paused_while_fetched(files()):
        taken.append(name)
        clock.now += 12  # its chunks embedded
        bar.update(64)
    bar.close()
    assert taken == ["a.pdf", "b.pdf"]
    assert capsys.readouterr().err == ("Embedding chunks: 64, 42 s elapsed\n"
                                       "Embedding chunks: 128, 84 s elapsed\n")
    assert bar.pause_depth == 0


def test_while_a_sync_embeds_a_file_its_pdf_count_is_not_repeated(tmp_path, capsys, monkeypatch):
    # The case, in a real sync: each chunk stored at once (INDEX_GROUP_CHUNKS = 1), each embedding slow.
    import time

    from conftest import write_corpus
    from langchain_huggingface import HuggingFaceEmbeddings

    import local_rag

    docs = write_corpus(tmp_path / "docs", {"a.pdf": ["Alpha page about red apples."],
                                           "b.pdf": ["Beta page about green pears."]})
    monkeypatch.setattr(progress, "LINE_SECONDS", 0.25)
    monkeypatch.setattr(local_rag, "INDEX_GROUP_CHUNKS", 1)
    original = HuggingFaceEmbeddings.embed_documents

    def slow(self, texts):
        time.sleep(1.5)
        return original(self, texts)

    monkeypatch.setattr(HuggingFaceEmbeddings, "embed_documents", slow)
    local_rag.LocalRAG(tmp_path / "index", reranker_model=None).sync([docs])
    lines = capsys.readouterr().err.splitlines()
    # While a.pdf's chunk is embedded, the PDF count does not stand still in the log; a line of it waits for b.pdf.
    assert [line for line in lines if line.startswith("Reading PDFs: 1/2 ")
            and not line.startswith("Reading PDFs: 1/2 (50 %), reading b.pdf, ")] == []
    assert [line for line in lines if line.startswith("Embedding chunks: 1, ")]  # a.pdf's chunk: its own lines
    assert "Reading PDFs: 0/2 (0 %), reading a.pdf, 0 s elapsed" in lines  # announced at once, with its file


def test_waiting_says_how_long_every_line_seconds_and_nothing_when_the_wait_is_short(monkeypatch):
    import time

    monkeypatch.setattr(progress, "LINE_SECONDS", 0.2)
    said: list[float] = []
    with progress.waiting(said.append):
        time.sleep(0.5)
    # Due at 0.2 s and 0.4 s (a busy machine may say the second late, after the block: then not at all).
    assert len(said) in (1, 2) and said[0] >= 0.2 and said == sorted(said)
    lines = len(said)
    time.sleep(0.3)
    assert len(said) == lines  # nothing after the block
    with progress.waiting(said.append):
        time.sleep(0.05)
    assert len(said) == lines  # a short wait says nothing
    monkeypatch.setattr(progress, "LINE_SECONDS", float("inf"))  # as in every other test: no thread, no line
    with progress.waiting(said.append):
        time.sleep(0.3)
    assert len(said) == lines
