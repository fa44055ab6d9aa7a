"""pipeline.inputs.download against a real HTTP server on 127.0.0.1: resume, restart, mirrors, checksums, proxies."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading

import pytest

from http_server import FileServer
from pipeline.inputs import download as download_module
from pipeline.inputs.download import DownloadPolicy, download
from pipeline.base.errors import PipelineError

DATA = bytes(range(256)) * 4096  # 1 MiB, every byte value
DIGEST = hashlib.sha256(DATA).hexdigest()
# The timeouts guard a hang: no test expects them to fire (the local server answers within milliseconds, a loaded
# machine's pauses are a fraction of a second), and a test that needs one sets its own.
FAST = DownloadPolicy(connect_timeout=2, read_timeout=2, retries=2, backoff=0.01, progress=False)


@pytest.fixture
def server(monkeypatch):
    """A FileServer, with proxy variables cleared so that requests go straight to it."""
    for var in (
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ):
        monkeypatch.delenv(var, raising=False)
    with FileServer() as running:
        yield running


def files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_clean_download(server, tmp_path):
    """One request, the exact bytes at the target, the SHA-256 reported, nothing else left in the folder."""
    url = server.add("/f.bin", DATA)
    result = download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert (tmp_path / "f.bin").read_bytes() == DATA
    assert result == {"url": url, "bytes": len(DATA), "sha256": DIGEST, "cached": False, "resumed_from": 0}
    assert [r["status"] for r in server.log] == [200]
    assert files(tmp_path) == ["f.bin"]


def test_existing_target_with_right_digest_is_not_downloaded_again(server, tmp_path):
    url = server.add("/f.bin", DATA)
    download([url], tmp_path / "f.bin", DIGEST, FAST)
    again = download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert again["cached"] and again["sha256"] == DIGEST
    assert len(server.log) == 1


def test_dropped_connection_resumes_with_range(server, tmp_path):
    """The body is cut in half; the retry asks for the rest with Range and appends it."""
    url = server.add("/f.bin", DATA, faults=["drop"])
    result = download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert (tmp_path / "f.bin").read_bytes() == DATA
    assert [(r["range"], r["status"]) for r in server.log] == [(None, 200), (f"bytes={len(DATA) // 2}-", 206)]
    assert server.log[1]["if_range"] == '"v1"'  # the ETag of the first answer guards the resume
    assert result["resumed_from"] == len(DATA) // 2
    assert files(tmp_path) == ["f.bin"]


def test_read_timeout_then_resume(server, tmp_path):
    """A server that goes silent mid-body trips the read timeout; the retry resumes."""
    # the silence (10 s, in a thread the test does not wait for) is ten times the timeout; the timeout (1 s) is
    # far above the pauses of a loaded machine, which would otherwise trip it before the middle of the body
    url = server.add("/f.bin", DATA, faults=["stall"], stall=10.0)
    policy = DownloadPolicy(connect_timeout=2, read_timeout=1.0, retries=2, backoff=0.01, progress=False)
    download([url], tmp_path / "f.bin", DIGEST, policy)
    assert (tmp_path / "f.bin").read_bytes() == DATA
    assert server.log[1]["range"] == f"bytes={len(DATA) // 2}-"


def test_server_without_range_support_restarts_from_zero(server, tmp_path):
    """After a drop, a server that ignores Range answers 200 with the whole body: the file is rewritten."""
    url = server.add("/f.bin", DATA, ranges=False, faults=["drop"])
    result = download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert (tmp_path / "f.bin").read_bytes() == DATA
    assert [(r["range"], r["status"]) for r in server.log] == [(None, 200), (f"bytes={len(DATA) // 2}-", 200)]
    assert result["resumed_from"] == 0
    assert files(tmp_path) == ["f.bin"]


def test_partial_from_an_earlier_run_resumes(server, tmp_path):
    """A .part file left by yesterday's run (same URL, same ETag) is continued, not restarted."""
    url = server.add("/f.bin", DATA)
    (tmp_path / "f.bin.part").write_bytes(DATA[:1000])
    (tmp_path / "f.bin.part.json").write_text(json.dumps({"url": url, "validator": '"v1"'}))
    result = download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert result["resumed_from"] == 1000
    assert server.log[0]["range"] == "bytes=1000-" and server.log[0]["status"] == 206
    assert (tmp_path / "f.bin").read_bytes() == DATA
    assert files(tmp_path) == ["f.bin"]


def test_changed_file_on_server_is_fetched_whole(server, tmp_path):
    """If-Range with an old ETag: the server sends the new file whole, and that is what we keep."""
    url = server.add("/f.bin", DATA, etag='"v2"')
    (tmp_path / "f.bin.part").write_bytes(b"old content of version 1")
    (tmp_path / "f.bin.part.json").write_text(json.dumps({"url": url, "validator": '"v1"'}))
    download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert server.log[0]["if_range"] == '"v1"' and server.log[0]["status"] == 200
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_stale_partial_with_wrong_digest_gets_one_fresh_try(server, tmp_path):
    """A partial of unknown origin (no validator) that resumes into a wrong digest is discarded and fetched anew."""
    url = server.add("/f.bin", DATA, etag=None)
    (tmp_path / "f.bin.part").write_bytes(b"x" * 5000)
    result = download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert [(r["range"], r["status"]) for r in server.log] == [("bytes=5000-", 206), (None, 200)]
    assert result["resumed_from"] == 0
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_server_compressing_anyway_is_decoded_and_never_resumed(server, tmp_path):
    """Content-Encoding: gzip despite "identity": the decoded bytes are kept; a drop restarts from zero."""
    url = server.add("/f.bin", DATA, gzip=True, faults=["drop"])
    result = download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert (tmp_path / "f.bin").read_bytes() == DATA and result["resumed_from"] == 0
    assert [r["range"] for r in server.log] == [None, None]
    assert server.log[0]["status"] == 200 and files(tmp_path) == ["f.bin"]


def test_404_on_first_mirror_then_second(server, tmp_path):
    missing = server.url("/gone/f.bin")
    mirror = server.add("/mirror/f.bin", DATA)
    result = download([missing, mirror], tmp_path / "f.bin", DIGEST, FAST)
    assert result["url"] == mirror
    assert [(r["path"], r["status"]) for r in server.log] == [("/gone/f.bin", 404), ("/mirror/f.bin", 200)]
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_transient_503_is_retried(server, tmp_path):
    url = server.add("/f.bin", DATA, faults=[503, 503])
    download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert [r["status"] for r in server.log] == [503, 503, 200]
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_wrong_checksum_deletes_the_file_and_says_so(server, tmp_path):
    """A checksum mismatch is not a network problem: the message gives the checksum fix, not the network hint."""
    url = server.add("/f.bin", DATA)
    wrong = hashlib.sha256(b"another file").hexdigest()
    with pytest.raises(PipelineError) as info:
        download([url], tmp_path / "f.bin", wrong, FAST, hint="NETWORK HINT", mismatch_hint="CHECKSUM HINT")
    message = str(info.value)
    assert url in message and f"got {DIGEST}, expected {wrong}" in message and "deleted" in message
    assert message.rstrip().endswith("CHECKSUM HINT") and "NETWORK HINT" not in message
    assert files(tmp_path) == []


def test_checksum_mismatch_and_network_failure_give_the_network_hint(server, tmp_path):
    """One mirror serves the wrong file, another is down: the network hint stays (a mirror may come back)."""
    url = server.add("/f.bin", DATA)
    wrong = hashlib.sha256(b"another file").hexdigest()
    with pytest.raises(PipelineError) as info:
        download(
            [url, server.url("/gone")],
            tmp_path / "f.bin",
            wrong,
            FAST,
            hint="NETWORK HINT",
            mismatch_hint="CHECKSUM HINT",
        )
    assert str(info.value).rstrip().endswith("NETWORK HINT")


def test_every_url_failing_is_one_log_line_each_then_one_short_message(server, tmp_path, pipeline_log):
    """404, a refused connection (not retried: it would only repeat), and a server that keeps failing (retried): one
    log line naming each URL and its failure, then one line that names the hint."""
    import logging

    closed = FileServer()
    refused = closed.url("/f.bin")  # bound, never started, then closed: connections are refused
    closed.httpd.server_close()
    flaky = server.add("/flaky/f.bin", DATA, faults=[503, 503, 503])
    missing = server.url("/gone/f.bin")
    with pytest.raises(PipelineError) as info:
        download([missing, refused, flaky], tmp_path / "f.bin", DIGEST, FAST, hint="Fix: use glove=6B-50d.")
    message = str(info.value)
    assert message == ("could not download f.bin from 3 URLs (each logged above). Fix: use glove=6B-50d.")
    warnings = [r.getMessage() for r in pipeline_log.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 3, warnings
    assert missing in warnings[0] and "404" in warnings[0]
    assert refused in warnings[1] and "connection refused" in warnings[1] and "retrying" not in warnings[1]
    assert flaky in warnings[2] and "503" in warnings[2]
    assert [r["path"] for r in server.log].count("/flaky/f.bin") == 3  # FAST: 2 retries, then given up
    assert not (tmp_path / "f.bin").exists() and files(tmp_path) == []


def test_gave_up_mid_body_keeps_the_partial_for_next_time(server, tmp_path):
    """Drops until retries run out: the error says the partial is kept; the next run resumes and finishes."""
    url = server.add("/f.bin", DATA, faults=["drop", 503, 503, 503])
    with pytest.raises(PipelineError, match=r"kept in .*f\.bin\.part.*resumes"):
        download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert not (tmp_path / "f.bin").exists()
    assert (tmp_path / "f.bin.part").stat().st_size == len(DATA) // 2
    download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert server.log[-1]["range"] == f"bytes={len(DATA) // 2}-"
    assert (tmp_path / "f.bin").read_bytes() == DATA
    assert files(tmp_path) == ["f.bin"]


def test_not_enough_disk_space_is_refused_before_writing(server, tmp_path):
    url = server.add("/f.bin", DATA)
    free = shutil.disk_usage(tmp_path).free
    policy = DownloadPolicy(retries=0, backoff=0.01, progress=False, reserve_bytes=free + (1 << 40))
    with pytest.raises(PipelineError, match="not enough free disk space"):
        download([url], tmp_path / "f.bin", DIGEST, policy)
    assert files(tmp_path) == []


def test_proxy_from_environment(server, tmp_path, monkeypatch):
    """HTTP_PROXY is honoured: the request for an unresolvable host goes to the proxy, in proxy form."""
    server.add("/f.bin", DATA)
    monkeypatch.setenv("HTTP_PROXY", server.base)
    url = "http://glove.example.invalid/f.bin"
    download([url], tmp_path / "f.bin", DIGEST, FAST)
    assert server.log[0]["target"] == url
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_two_downloads_into_one_folder_take_turns(server, tmp_path):
    """Two concurrent calls for the same file: one downloads, the other waits and finds it done."""
    url = server.add("/f.bin", DATA * 8)
    digest = hashlib.sha256(DATA * 8).hexdigest()
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(download([url], tmp_path / "f.bin", digest, FAST)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(r["cached"] for r in results) == [False, True]
    assert len(server.log) == 1
    assert files(tmp_path) == ["f.bin"]


def test_progress_bar_only_when_asked(server, tmp_path, capsys, monkeypatch):
    url = server.add("/f.bin", DATA)
    monkeypatch.setenv("CI", "true")
    download([url], tmp_path / "a.bin", DIGEST, DownloadPolicy(progress=None))
    assert "100%" not in capsys.readouterr().err  # auto: quiet in CI (and when stderr is not a terminal)
    download([url], tmp_path / "b.bin", DIGEST, DownloadPolicy(progress=True))
    assert "100%" in capsys.readouterr().err


def test_policy_from_config_takes_the_shipped_values():
    from pathlib import Path

    from pipeline import config
    from pipeline.config.schema import validate

    # conf/'s values (conf/glove/shared/every_source.yaml), which every option keeps; the schema checks them
    download_cfg = validate(config.compose([], Path(__file__).resolve().parents[1])).glove.download
    policy = DownloadPolicy.from_config(download_cfg)
    assert policy.retries == download_cfg.retries and policy.read_timeout == download_cfg.read_timeout
    assert policy.connect_timeout == download_cfg.connect_timeout and policy.backoff == download_cfg.backoff
    assert policy.progress is None


# ---------------------------------------------------------------- never splice two versions of a file

OLD = bytes(reversed(DATA))  # yesterday's version of the file: same size, other bytes


@pytest.mark.parametrize("record", [None, '"v0"'])
def test_partial_of_an_older_version_is_never_spliced_onto_the_new_one(server, tmp_path, record):
    """A .part of the old version, no SHA-256 pinned, a server that sends no ETag/Last-Modified: nothing proves the
    bytes are the same file, so the download starts over (no Range request) and the result is the new file exactly.
    With a validator recorded from the old version, the server cannot confirm it either: same outcome."""
    url = server.add("/f.bin", DATA, etag=None)
    (tmp_path / "f.bin.part").write_bytes(OLD[: len(OLD) // 3])
    if record:
        (tmp_path / "f.bin.part.json").write_text(json.dumps({"url": url, "validator": record}))
    result = download([url], tmp_path / "f.bin", None, FAST)
    assert (tmp_path / "f.bin").read_bytes() == DATA
    assert result["resumed_from"] == 0 and result["sha256"] == DIGEST
    assert [r["status"] for r in server.log] == ([200] if record is None else [200])
    assert all(r["range"] is None or r["if_range"] == record for r in server.log)
    assert files(tmp_path) == ["f.bin"]


def test_drop_without_validator_or_pin_restarts_from_zero(server, tmp_path):
    """A server without validators drops mid-body; unpinned, the retry reads the file whole (never Range)."""
    url = server.add("/f.bin", DATA, etag=None, faults=["drop"])
    result = download([url], tmp_path / "f.bin", None, FAST)
    assert (tmp_path / "f.bin").read_bytes() == DATA and result["resumed_from"] == 0
    assert [(r["range"], r["status"]) for r in server.log] == [(None, 200), (None, 200)]


def test_last_modified_validator_allows_resume(server, tmp_path):
    """No ETag, but a Last-Modified date: recorded, sent back as If-Range, the server answers 206."""
    date = "Wed, 21 Oct 2026 07:28:00 GMT"
    url = server.add("/f.bin", DATA, etag=None, last_modified=date, faults=["drop"])
    result = download([url], tmp_path / "f.bin", None, FAST)
    assert (tmp_path / "f.bin").read_bytes() == DATA and result["resumed_from"] == len(DATA) // 2
    assert [(r["if_range"], r["status"]) for r in server.log] == [(None, 200), (date, 206)]


def test_unpinned_changed_file_with_etag_is_fetched_whole(server, tmp_path):
    """Unpinned: the old .part's ETag no longer matches, the server sends the new file whole (200)."""
    url = server.add("/f.bin", DATA, etag='"v2"')
    (tmp_path / "f.bin.part").write_bytes(OLD[:5000])
    (tmp_path / "f.bin.part.json").write_text(json.dumps({"url": url, "validator": '"v1"'}))
    download([url], tmp_path / "f.bin", None, FAST)
    assert [(r["if_range"], r["status"]) for r in server.log] == [('"v1"', 200)]
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_server_ignoring_if_range_is_caught_by_its_etag(server, tmp_path):
    """A broken server answers 206 despite If-Range naming an old ETag; its new ETag gives it away: restart."""
    url = server.add("/f.bin", DATA, etag='"v2"', if_range=False)
    (tmp_path / "f.bin.part").write_bytes(OLD[:5000])
    (tmp_path / "f.bin.part.json").write_text(json.dumps({"url": url, "validator": '"v1"'}))
    result = download([url], tmp_path / "f.bin", None, FAST)
    assert [(r["range"], r["status"]) for r in server.log] == [("bytes=5000-", 206), (None, 200)]
    assert (tmp_path / "f.bin").read_bytes() == DATA and result["resumed_from"] == 0


def test_partial_of_another_mirror_is_not_resumed(server, tmp_path):
    """A .part recorded from mirror A is not continued from mirror B (unpinned): B's file is read whole."""
    a = server.url("/a/f.bin")
    b = server.add("/b/f.bin", DATA)
    (tmp_path / "f.bin.part").write_bytes(OLD[:5000])
    (tmp_path / "f.bin.part.json").write_text(json.dumps({"url": a, "validator": '"v1"'}))
    download([b], tmp_path / "f.bin", None, FAST)
    assert [(r["range"], r["status"]) for r in server.log] == [(None, 200)]
    assert (tmp_path / "f.bin").read_bytes() == DATA


def test_gave_up_unresumable_partial_is_deleted(server, tmp_path):
    """Retries exhausted on a server without validators, unpinned: the partial cannot be resumed safely, so it is
    removed and the message does not promise a resume."""
    url = server.add("/f.bin", DATA, etag=None, faults=["drop", 503, 503, 503])
    with pytest.raises(PipelineError) as info:
        download([url], tmp_path / "f.bin", None, FAST)
    assert "kept in" not in str(info.value)
    assert files(tmp_path) == []


# ---------------------------------------------------------------- an unpinned cached file is re-validated


def test_unpinned_cached_file_changed_on_the_server_is_downloaded_again(server, tmp_path, pipeline_log):
    """The recorded ETag goes back as If-None-Match; the server's new file (new ETag) answers 200 and is fetched."""
    url = server.add("/f.bin", OLD)
    download([url], tmp_path / "f.bin", None, FAST)
    assert json.loads((tmp_path / "f.bin.json").read_text()) == {"url": url, "validator": '"v1"'}
    server.add("/f.bin", DATA, etag='"v2"')
    result = download([url], tmp_path / "f.bin", None, FAST)
    assert (tmp_path / "f.bin").read_bytes() == DATA and result["sha256"] == DIGEST and not result["cached"]
    assert [(r["if_none_match"], r["status"]) for r in server.log] == [(None, 200), ('"v1"', 200), (None, 200)]
    assert json.loads((tmp_path / "f.bin.json").read_text())["validator"] == '"v2"'
    assert f"{url} has changed on the server" in pipeline_log.text
    assert files(tmp_path) == ["f.bin", "f.bin.json"]


@pytest.mark.parametrize("validator", ["etag", "last_modified"])
def test_unpinned_cached_file_unchanged_is_reused_after_a_304(server, tmp_path, pipeline_log, validator):
    """If-None-Match (or If-Modified-Since) -> 304, no body: the cached copy is used and one line says so."""
    date = "Wed, 21 Oct 2026 07:28:00 GMT"
    kwargs = {"etag": None, "last_modified": date} if validator == "last_modified" else {}
    url = server.add("/f.bin", DATA, **kwargs)
    download([url], tmp_path / "f.bin", None, FAST)
    pipeline_log.clear()
    result = download([url], tmp_path / "f.bin", None, FAST)
    assert result["cached"] and result["sha256"] == DIGEST
    sent = server.log[1]["if_modified_since"] if kwargs else server.log[1]["if_none_match"]
    assert len(server.log) == 2 and server.log[1]["status"] == 304 and sent == (date if kwargs else '"v1"')
    assert [r.getMessage() for r in pipeline_log.records] == [
        f"{url} is unchanged on the server (HTTP 304): reusing the cached copy {tmp_path / 'f.bin'}"
    ]


def test_unpinned_cached_file_without_validators_is_reused_unverified(server, tmp_path, pipeline_log):
    """Nothing to ask the server with: no request, one line saying the copy is unverified and how to refresh it."""
    url = server.add("/f.bin", DATA, etag=None)
    download([url], tmp_path / "f.bin", None, FAST)
    pipeline_log.clear()
    result = download([url], tmp_path / "f.bin", None, FAST)
    assert result["cached"] and len(server.log) == 1 and files(tmp_path) == ["f.bin"]
    (line,) = [r.getMessage() for r in pipeline_log.records]
    assert f"reusing the cached copy {tmp_path / 'f.bin'} of {url} unverified" in line and "-f glove" in line


def test_unpinned_cached_file_is_reused_when_the_server_is_down(tmp_path, pipeline_log):
    """Offline: the conditional request fails at once (no retries), the cached copy is used, one warning line."""
    with FileServer() as running:
        url = running.add("/f.bin", DATA)
        download([url], tmp_path / "f.bin", None, FAST)
    pipeline_log.clear()
    result = download([url], tmp_path / "f.bin", None, FAST)
    assert result["cached"] and (tmp_path / "f.bin").read_bytes() == DATA
    (record,) = pipeline_log.records
    assert record.levelname == "WARNING" and record.exc_info is None and "Traceback" not in pipeline_log.text
    assert record.getMessage().startswith(f"could not check whether {url} changed (connection refused): reusing")


def test_glove_stage_download_revalidates_its_cache(server, tmp_path):
    """The glove stage's path (glove_sources.from_url, as `-f glove` runs it) re-validates the cached download: a
    file changed on the server reaches the store."""
    from pathlib import Path

    from omegaconf import OmegaConf

    from pipeline import config
    from pipeline.config.schema import GloveConfig
    from pipeline.inputs.glove_sources import from_url

    def glove_text(scale: float) -> bytes:
        return "".join(f"w{i} {scale * i:.1f} {scale:.1f}\n" for i in range(1, 6)).encode()

    url = server.add("/g.txt", glove_text(1.0))
    cfg = OmegaConf.to_object(
        OmegaConf.merge(
            OmegaConf.structured(GloveConfig),
            config.compose(["glove=url"], Path(__file__).resolve().parents[1])["glove"],
            {"name": "t", "source": "url", "url": url, "dim": 2, "download": {"retries": 0}},
        )
    )
    store = tmp_path / "store"
    first = from_url(cfg, store, tmp_path, tmp_path / "cache")["origin"]
    server.add("/g.txt", glove_text(2.0), etag='"v2"')
    second = from_url(cfg, store, tmp_path, tmp_path / "cache")["origin"]
    assert first["sha256"] != second["sha256"]  # the changed file reached the store
    downloaded = {p.name: p.read_bytes() for p in store.iterdir()}
    third = from_url(cfg, store, tmp_path, tmp_path / "cache")["origin"]
    assert third["sha256"] == second["sha256"]
    assert [r["status"] for r in server.log] == [200, 200, 200, 304]  # the third was the cached file, revalidated
    # the store does not say whether the download came from the cache: the same bytes (and DVC hash) either way
    assert {p.name: p.read_bytes() for p in store.iterdir()} == downloaded and "cached" not in third


def test_offline_every_url_is_one_log_line_then_the_error(tmp_path, pipeline_log, monkeypatch):
    """Offline (a host name that does not resolve, connections refused): no URL is retried with backoff, one log line
    per URL, then one message under 300 characters."""
    import logging

    closed = FileServer()
    urls = ["http://glove.invalid/f.bin", *(closed.url(f"/{name}/f.bin") for name in ("b", "c"))]  # RFC 2606
    closed.httpd.server_close()
    policy = DownloadPolicy(connect_timeout=2, read_timeout=2, retries=5, backoff=1, progress=False)
    slept: list[float] = []
    monkeypatch.setattr(download_module.time, "sleep", slept.append)  # the backoff between retries
    with pytest.raises(PipelineError) as info:
        download(urls, tmp_path / "f.bin", DIGEST, policy, hint="Fix: glove=6B-50d.")
    assert slept == []
    warnings = [r.getMessage() for r in pipeline_log.records if r.levelno >= logging.WARNING]
    assert len(warnings) == len(urls), warnings
    assert "cannot resolve the host name glove.invalid" in warnings[0]
    for url, warning in zip(urls, warnings):
        assert warning.startswith(f"download of {url} failed: ") and "retrying" not in warning
    assert str(info.value) == "could not download f.bin from 3 URLs (each logged above). Fix: glove=6B-50d."
