"""Download, checksum and strict-reading behaviour, against a real HTTP server on 127.0.0.1."""

import gzip
import hashlib
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers import write_corpus

from transformer_cli.config import DataConfig
from transformer_cli.data.sources import current_sha256, fetch_corpus, read_lines, read_parallel
from transformer_cli.errors import TfmError, UsageError


class CountingHandler(SimpleHTTPRequestHandler):
    requests: list[str] = []
    truncate: set[str] = set()

    def log_message(self, *args):
        pass

    def do_GET(self):
        type(self).requests.append(self.path)
        name = self.path.rsplit("/", 1)[-1]
        if name in self.truncate:  # announce the full size, send half, hang up
            body = (Path(self.directory) / name).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.close()
            return
        super().do_GET()


@pytest.fixture
def server(tmp_path):
    root = write_corpus(tmp_path / "served")
    CountingHandler.requests, CountingHandler.truncate = [], set()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(CountingHandler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", root
    httpd.shutdown()
    httpd.server_close()


def sums(folder: Path) -> dict[str, str]:
    return {p.name: current_sha256(p) for p in folder.iterdir()}


def data_cfg(tmp_path, url, **kw) -> DataConfig:
    return DataConfig(corpus="files", source=url, cache_dir=str(tmp_path / "cache"), **kw)


def test_download_verifies_and_caches(tmp_path, server):
    url, root = server
    cfg = data_cfg(tmp_path, url, sha256=sums(root))
    files = fetch_corpus(cfg, url)
    assert len(files) == 6 and len(CountingHandler.requests) == 6
    for f in files:
        assert f.path.read_bytes() == (root / f.path.name).read_bytes()
        assert f.sha256 == hashlib.sha256(f.path.read_bytes()).hexdigest()
    fetch_corpus(cfg, url)  # second time: served from the cache
    assert len(CountingHandler.requests) == 6


def test_corrupted_download_is_rejected_and_not_cached(tmp_path, server):
    url, root = server
    expected = sums(root)
    (root / "val.de.gz").write_bytes(gzip.compress(b"tampered\n"))
    with pytest.raises(UsageError, match=r"checksum mismatch for http://127.0.0.1:\d+/val.de.gz"):
        fetch_corpus(data_cfg(tmp_path, url, sha256=expected), url)
    cached = {p.name for p in (tmp_path / "cache" / "files").iterdir()}
    assert "val.de.gz" not in cached and not any(n.endswith(".part") for n in cached)


def test_truncated_download_fails_after_retries(tmp_path, server):
    url, _ = server
    CountingHandler.truncate = {"train.de.gz"}
    with pytest.raises(TfmError, match="download failed after 3 attempts: .*train.de.gz: truncated"):
        fetch_corpus(data_cfg(tmp_path, url), url)
    assert not (tmp_path / "cache" / "files" / "train.de.gz").exists()


def test_damaged_cache_entry_is_fetched_again(tmp_path, server):
    url, root = server
    cfg = data_cfg(tmp_path, url, sha256=sums(root))
    fetch_corpus(cfg, url)
    (tmp_path / "cache" / "files" / "test_2016_flickr.en.gz").write_bytes(b"junk")
    fetch_corpus(cfg, url)
    assert CountingHandler.requests.count("/test_2016_flickr.en.gz") == 2


def test_missing_file_on_server(tmp_path, server):
    url, root = server
    (root / "val.en.gz").unlink()
    with pytest.raises(TfmError, match="HTTP 404"):
        fetch_corpus(data_cfg(tmp_path, url), url)


def test_plain_text_files_are_found_when_no_gz(tmp_path, server):
    url, root = server
    plain = write_corpus(tmp_path / "plain", gz=False)
    files = fetch_corpus(data_cfg(tmp_path, str(plain)), str(plain))
    assert {f.path.name for f in files} == {p.name for p in plain.iterdir()}


def test_local_folder_missing_file_and_mismatch(tmp_path):
    folder = write_corpus(tmp_path / "local")
    (folder / "val.en.gz").unlink()
    with pytest.raises(UsageError) as refused:
        fetch_corpus(data_cfg(tmp_path, str(folder)), str(folder))
    assert str(refused.value) == f"data source {folder} has no en file of 'val': looked for val.en.gz or val.en"
    folder = write_corpus(tmp_path / "local2")
    cfg = data_cfg(tmp_path, str(folder), sha256={"train.en.gz": "0" * 64})
    with pytest.raises(UsageError, match=r"checksum mismatch for .*train.en.gz"):
        fetch_corpus(cfg, str(folder))


def test_a_split_in_a_local_folder_both_plain_and_gzipped_is_refused_naming_both(tmp_path):
    """The rule of corpus_files.py: the two may differ, so neither is read over the other."""
    folder = write_corpus(tmp_path / "local")
    (folder / "val.de").write_text("Ein Hund.\n")
    with pytest.raises(UsageError) as refused:
        fetch_corpus(data_cfg(tmp_path, str(folder)), str(folder))
    assert str(refused.value) == (
        f"data source {folder} holds the de text of 'val' twice, as val.de.gz and val.de: keep one of them"
    )


def test_non_utf8_names_file_and_line(tmp_path):
    p = tmp_path / "x.de"
    p.write_bytes("gut\nauch gut\nschlecht \xff hier\n".encode("latin-1"))
    with pytest.raises(UsageError, match=r"x.de:3: not valid UTF-8 \(byte 0xff at column 10\)"):
        read_lines(p)


def test_misaligned_and_empty_corpora(tmp_path):
    a, b, e = tmp_path / "a.de", tmp_path / "a.en", tmp_path / "e.en"
    a.write_text("eins\nzwei\n")
    b.write_text("one\n")
    e.write_text("\n\n")
    with pytest.raises(UsageError, match=r"misaligned corpus: .*a.de has 2 lines but .*a.en has 1"):
        read_parallel(a, b)
    with pytest.raises(UsageError, match=r"e.en: empty corpus"):
        read_parallel(a, e)


def test_damaged_gzip_is_named(tmp_path):
    p = tmp_path / "t.en.gz"
    whole = gzip.compress("".join(f"line {i}\n" for i in range(5000)).encode())
    p.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(UsageError, match=r"t.en.gz: cannot read"):
        read_lines(p)


def test_a_byte_order_mark_is_left_out_and_said(tmp_path, caplog):
    import gzip as gz

    from transformer_cli.data.sources import iter_line_blocks

    plain, packed = tmp_path / "train.de", tmp_path / "train.en.gz"
    plain.write_bytes(b"\xef\xbb\xbfEin Hund.\nZwei Katzen.\n")
    packed.write_bytes(gz.compress(b"\xef\xbb\xbfA dog.\nTwo cats.\n"))
    assert [line for block in iter_line_blocks(plain, 1) for line in block] == ["Ein Hund.", "Zwei Katzen."]
    assert next(iter_line_blocks(packed, 10)) == ["A dog.", "Two cats."]
    said = [r.getMessage() for r in caplog.records]
    assert any(f"{plain} starts with a UTF-8 byte-order mark: left out" in m for m in said)
    assert any(str(packed) in m for m in said)
