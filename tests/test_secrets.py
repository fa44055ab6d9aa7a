"""Secrets never reach a file: credentials in config URLs are refused at compose; credentials from ~/.netrc and
proxy variables are used for downloads but appear in no log, message, params.yaml, dvc.lock, data/, reports/,
DVC cache or MLflow store."""

from __future__ import annotations

import base64
import hashlib
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, SEED_WORDS, copy_checkout, run
from http_server import FileServer
from pipeline import config
from pipeline.base.errors import PipelineError
from pipeline.base.secrets import has_credentials, redact, redact_password

# computed, so that no file (this one included, copied into the project) holds them beforehand; the same in every
# pytest-xdist worker (they are in the tests' ids, which the workers must agree on)
SECRET = "s3cretPW-" + hashlib.sha256(b"pe-test-secret").hexdigest()[:12]
PROXY_SECRET = "pr0xyPW-" + hashlib.sha256(b"pe-test-proxy-secret").hexdigest()[:12]


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


@pytest.mark.parametrize(
    "url, marked",
    [
        ("https://h/g.zip?token=SECRET", []),
        ("https://h/g.zip?v=2&Key=SECRET", []),
        ("https://h/g.zip?SIG=SECRET&sv=2024", []),
        ("https://h/g.zip?signature=SECRET", []),
        ("https://b.s3.amazonaws.com/g.zip?X-Amz-Date=1&X-Amz-Signature=SECRET", []),
        ("https://h/g.zip?x-amz-credential=SECRET", []),
        ("https://h/g.zip?X-Amz-Security-Token=SECRET", []),
        ("https://h/g.zip?Access_Token=SECRET", []),
        ("https://h/g.zip?api_key=SECRET", []),
        ("https://h/g.zip?password=SECRET", []),
        ("https://h/g.zip?PASSWD=SECRET", []),
        ("https://h/g.zip?v=1&myToken=SECRET", ["mytoken"]),
    ],
)
def test_credentials_in_url_queries_are_refused_at_compose(url, marked):
    """A secret query parameter (any case; or one the user marks in glove.download.secret_params) is refused in
    glove.url and in glove.mirrors, naming the key and the parameter, never showing its value."""
    url = url.replace("SECRET", SECRET)
    name = url.split(f"={SECRET}")[0].rsplit("?", 1)[-1].rsplit("&", 1)[-1]
    for overrides, key in [
        ([f'glove.url="{url}"'], "glove.url"),
        (["glove.url=https://ok/g.zip", f'glove.mirrors=["https://m/g.zip","{url}"]'], "glove.mirrors[1]"),
    ]:
        marks = [f"glove.download.secret_params=[{','.join(marked)}]"]
        params = config.compose(["glove=url", "glove.dim=3", *overrides, *marks], REPO)
        with pytest.raises(PipelineError) as info:
            config.validate(params)
        message = str(info.value)
        assert SECRET not in message and f"{name}=***" in message
        assert message.startswith(f"config key {key} = ") and "holds credentials (the query parameter" in message
        assert name in message.split("holds credentials")[1].split(")")[0]
        assert "~/.netrc" in message and "glove=zip glove.zip=" in message and "glove=path glove.path=" in message
    if not marked:  # unmarked, the same name is an ordinary parameter
        return
    params = config.compose(["glove=url", "glove.dim=3", f'glove.url="{url}"'], REPO)
    config.validate(params)  # no error
    assert params["glove"]["url"] == url


def test_ordinary_query_parameters_are_accepted():
    params = config.compose(["glove=url", "glove.dim=3", 'glove.url="https://h/g.zip?v=2&keyword=x&dl=1"'], REPO)
    config.validate(params)  # no error
    assert params["glove"]["url"] == "https://h/g.zip?v=2&keyword=x&dl=1"


@pytest.mark.parametrize(
    "url", [f"http://a:{SECRET}@h/g.zip", f"https://h/g.zip?X-Amz-Signature={SECRET}", f"https://h/g?token={SECRET}"]
)
def test_compose_command_refuses_and_writes_nothing(tmp_path, url):
    project = copy_checkout(tmp_path / "project")
    before = (project / "params.yaml").read_bytes()
    result = run(
        [sys.executable, "-m", "pipeline.compose", "glove=url", f'glove.url="{url}"', "glove.dim=3"],
        project,
        check=False,
    )
    assert result.returncode == 2 and "~/.netrc" in result.stderr and "config key glove.url" in result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert (project / "params.yaml").read_bytes() == before


def test_redact_and_detect():
    assert (
        redact(f"GET http://alice:{SECRET}@h:80/x failed; proxy https://p:{PROXY_SECRET}@proxy:3128")
        == "GET http://***@h:80/x failed; proxy https://***@proxy:3128"
    )
    assert has_credentials(f"http://alice:{SECRET}@h/") and has_credentials("ftp://bob@h/")
    assert not has_credentials("https://h/a@b") and not has_credentials("https://h:443/x")


@pytest.mark.parametrize(
    "text, shown",
    [
        ("https://bob:p@ss{S}@host/x", "https://***@host/x"),  # "@" in the password: the last "@" ends it
        ("https://bob:p:a{S}@host:8080/x", "https://***@host:8080/x"),  # ":" in the password
        ("https://bob:p@:ss{S}@@host?x=1", "https://***@host?x=1"),  # both, no path
        ("GET http://a:b@{S}@h1/x, then ftp://c:{S}@d@h2 failed", "GET http://***@h1/x, then ftp://***@h2 failed"),
        ("""url='https://u:{S}@x@h/a' and "http://v:{S}@h/b" """, """url='https://***@h/a' and "http://***@h/b" """),
        (
            "see https://h/g.zip?v=1&Token={S}&X-Amz-Signature={S}#top",
            "see https://h/g.zip?v=1&Token=***&X-Amz-Signature=***#top",
        ),
        ("'https://h/g?sig={S}' (https://k/?api_key={S})", "'https://h/g?sig=***' (https://k/?api_key=***)"),
        ("mail bob@host, or http://h/a@b?page=2", "mail bob@host, or http://h/a@b?page=2"),  # nothing to hide
    ],
)
def test_redact_removes_whole_passwords_and_query_secrets(text, shown):
    assert redact(text.replace("{S}", SECRET)) == shown
    assert redact(f"https://h/g?mine={SECRET}&v=1", ["MINE"]) == "https://h/g?mine=***&v=1"


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
def test_netrc_and_proxy_credentials_never_reach_a_file(tmp_path, monkeypatch, empty_mlflow_store):
    """The whole pipeline downloads GloVe through a proxy with credentials (HTTP_PROXY=http://user:pw@...) from a host
    that needs basic auth, given in a netrc file (NETRC). Then every file under the test's folder (the project: data/,
    reports/, params.yaml, dvc.lock, .dvc/ cache and run cache; the MLflow store and its artifacts) and the command's
    output are searched for both secrets, plain and base64-encoded as they travel in HTTP headers."""
    project = copy_checkout(tmp_path / "project")
    shutil.copyfile(empty_mlflow_store, tmp_path / "mlflow-test.db")  # MLflow's tables made once for the suite
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
            "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow-test.db'}",  # searched with the project
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


def test_tracking_and_store_uris_keep_the_user_and_lose_the_whole_password():
    """How MLflow and database URIs are shown (pipeline.server, the figures stage): `bob:***@`, never a password's tail."""
    from pipeline.outputs.tracking import redact as tracking_redact
    from pipeline.server import redacted

    uri = f"postgresql://bob:p@{SECRET}:x@db:5432/mlflow?sslmode=require&password={SECRET}"
    shown = "postgresql://bob:***@db:5432/mlflow?sslmode=require&password=***"
    assert redact_password(uri) == redacted(uri) == tracking_redact(uri) == shown
    assert redact_password(f"error at 'http://bob:{SECRET}@@h:5000/api'") == "error at 'http://bob:***@h:5000/api'"
