"""Secrets never reach a file: credentials in config URLs are refused at compose; credentials from ~/.netrc and
proxy variables are used for downloads but appear in no log, message, params.yaml, dvc.lock, data/, reports/,
DVC cache or MLflow store."""

from __future__ import annotations

import base64
import hashlib
import sys
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, SEED_WORDS, copy_checkout, run
from http_server import FileServer
from pipeline import config
from pipeline.base.errors import PipelineError
from pipeline.base.secrets import has_credentials, redact

# drawn per run, so that no file (this one included, copied into the project) holds them beforehand
SECRET = f"s3cretPW-{uuid.uuid4().hex[:12]}"
PROXY_SECRET = f"pr0xyPW-{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["glove=url", f"glove.url=https://alice:{SECRET}@host/glove.zip", "glove.dim=3"], "glove.url"),
        (["glove=url", "glove.url=https://alice@host/glove.zip", "glove.dim=3"], "glove.url"),
        (["glove=6B-100d", f"glove.mirrors=[https://m1/g.zip,http://bob:{SECRET}@m2/g.zip]"], r"glove.mirrors\[1\]"),
        ([f"tracking.uri=http://bob:{SECRET}@host:5000"], "tracking.uri"),
    ],
)
def test_credentials_in_config_urls_are_refused_at_compose(overrides, key):
    """The message names the key and the fix (~/.netrc or MLflow's variables) and never repeats the secret."""
    params = config.compose(overrides, REPO)
    with pytest.raises(PipelineError) as info:
        config.validate(params)
    message = str(info.value)
    assert SECRET not in message and "alice@" not in message
    assert f"config key {key.replace(chr(92), '')}" in message and "holds credentials" in message
    assert ("~/.netrc" in message) if key != "tracking.uri" else ("MLFLOW_TRACKING_PASSWORD" in message)


def test_compose_command_refuses_and_writes_nothing(tmp_path):
    project = copy_checkout(tmp_path / "project")
    before = (project / "params.yaml").read_bytes()
    result = run(
        [sys.executable, "-m", "pipeline.compose", "glove=url", f"glove.url=http://a:{SECRET}@h/g.zip", "glove.dim=3"],
        project,
        check=False,
    )
    assert result.returncode == 2 and "~/.netrc" in result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert (project / "params.yaml").read_bytes() == before


def test_redact_and_detect():
    assert (
        redact(f"GET http://alice:{SECRET}@h:80/x failed; proxy https://p:{PROXY_SECRET}@proxy:3128")
        == "GET http://***@h:80/x failed; proxy https://***@proxy:3128"
    )
    assert has_credentials(f"http://alice:{SECRET}@h/") and has_credentials("ftp://bob@h/")
    assert not has_credentials("https://h/a@b") and not has_credentials("https://h:443/x")


def test_download_error_messages_and_logs_are_redacted(tmp_path, caplog, monkeypatch):
    """A URL that reaches download() with credentials (e.g. a redirect target or a direct caller) is never echoed."""
    from pipeline.inputs.download import DownloadPolicy, download

    for var in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    with FileServer() as server:
        url = server.url("/missing.zip").replace("http://", f"http://alice:{SECRET}@")
        with pytest.raises(PipelineError) as info:
            download([url], tmp_path / "g.zip", None, DownloadPolicy(retries=0, backoff=0, progress=False))
    assert "404" in str(info.value) and SECRET not in str(info.value)
    assert SECRET not in caplog.text and "***@127.0.0.1" in str(info.value)


def glove_zip(path: Path, dim: int = 8) -> bytes:
    """A zip of a small GloVe text file holding the seed sentences' words."""
    rng = np.random.default_rng(1)
    text = "".join(f"{w} " + " ".join(f"{x:.5f}" for x in rng.normal(size=dim)) + "\n" for w in SEED_WORDS + ["the"])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("glove.test.8d.txt", text)
    return path.read_bytes()


@pytest.mark.slow
def test_netrc_and_proxy_credentials_never_reach_a_file(tmp_path, monkeypatch):
    """The whole pipeline downloads GloVe through a proxy with credentials (HTTP_PROXY=http://user:pw@...) from a host
    that needs basic auth, given in a netrc file (NETRC). Then every file under the test's folder (the project: data/,
    reports/, params.yaml, dvc.lock, .dvc/ cache and run cache; the MLflow store and its artifacts) and the command's
    output are searched for both secrets, plain and base64-encoded as they travel in HTTP headers."""
    project = copy_checkout(tmp_path / "project")
    netrc = tmp_path / "secrets" / "netrc"
    netrc.parent.mkdir()
    netrc.write_text(f"machine glove.example.invalid login alice password {SECRET}\n")
    netrc.chmod(0o600)
    data = glove_zip(tmp_path / "secrets" / "glove.zip")
    with FileServer() as server:
        server.add("/glove.zip", data, auth=f"alice:{SECRET}")
        proxy = server.base.replace("http://", f"http://proxyuser:{PROXY_SECRET}@")
        env = {
            "NETRC": str(netrc),
            "HTTP_PROXY": proxy,
            "http_proxy": proxy,
            "NO_PROXY": "",
            "no_proxy": "",
            "DVC_NO_ANALYTICS": "1",
        }
        result = run(
            [
                sys.executable,
                "-m",
                "pipeline.repro",
                "glove=url",
                "glove.url=http://glove.example.invalid/glove.zip",
                "glove.dim=8",
                f"glove.zip_sha256={hashlib.sha256(data).hexdigest()}",
            ],
            project,
            **env,
        )
        served = server.requests("/glove.zip")
    # the route answers 401 without the right basic-auth header: requests sent the netrc credentials
    assert [r["status"] for r in served] == [200] and served[0]["authorization"].startswith("Basic ")
    assert (project / "data" / "glove" / "manifest.json").exists() and (project / "reports" / "report.html").exists()
    secrets = [SECRET, PROXY_SECRET]
    secrets += [
        base64.b64encode(f"alice:{SECRET}".encode()).decode(),
        base64.b64encode(f"proxyuser:{PROXY_SECRET}".encode()).decode(),
    ]
    output = result.stdout + result.stderr
    assert not [s for s in secrets if s in output]
    leaks, searched = [], 0
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.parent != netrc.parent:
            content = path.read_bytes()
            searched += 1
            leaks += [(str(path.relative_to(tmp_path)), s) for s in secrets if s.encode() in content]
    assert leaks == []
    assert searched > 100  # the project, its DVC cache and the MLflow store were really searched
    assert any(p.name == "mlflow-test.db" for p in tmp_path.rglob("*.db"))
