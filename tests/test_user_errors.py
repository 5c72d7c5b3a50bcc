"""The parts behind the one-line errors (issue 38): model lookup (folder, alias, hub unreachable vs unknown id),
option schemas derived from signatures, YAML files read with their lines, the progress bar drawn late.

The hub cases need no network: a local HTTP server stands in for huggingface.co and answers as it does
(``X-Error-Code: RepoNotFound`` / ``GatedRepo`` / ``EntryNotFound``), so huggingface_hub raises its real
exception types; "unreachable" is a closed port on 127.0.0.1, and offline mode is ``HF_HUB_OFFLINE``.
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polytox._util.options import (
    Option,
    as_bool,
    check_options,
    option_from_annotation,
    signature_schema,
)
from polytox._util.schema import COMMON
from polytox._util.yamlfile import read_yaml_mapping
from polytox.errors import BadValueError, PolytoxError
from polytox.models.lookup import check_model, hub_failure, looks_like_path, missing_model_files

hub_constants = pytest.importorskip("huggingface_hub.constants")
hub_errors = pytest.importorskip("huggingface_hub.errors")


# ---- a stand-in for the hub ------------------------------------------------------------------------
class FakeHub(http.server.BaseHTTPRequestHandler):
    """``known/model`` has a config.json; ``gated/model`` is gated; ``noconfig/model`` has no config.json;
    every other id is unknown."""

    def answer(self) -> None:
        repo = "/".join(self.path.strip("/").split("/")[:2])
        if repo == "known/model":
            self.send_response(200)
            self.send_header("ETag", '"0123456789abcdef"')
            self.send_header("X-Repo-Commit", "a" * 40)
            self.send_header("Content-Length", "2")
        else:
            code, status = {"gated/model": ("GatedRepo", 401), "noconfig/model": ("EntryNotFound", 404)}.get(
                repo, ("RepoNotFound", 404))
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", f"{code} for {repo}")
            self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = answer
    do_GET = answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    online(monkeypatch, tmp_path, endpoint)
    yield endpoint
    server.shutdown()
    server.server_close()


def online(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, endpoint: str) -> None:
    """huggingface_hub with offline mode off, ``endpoint`` as the hub and an empty cache."""
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_constants, "ENDPOINT", endpoint)  # what HF_ENDPOINT sets at import
    template = endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(hub_constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_id_the_hub_knows_passes(fake_hub: str) -> None:
    check_model("known/model")


def test_an_unknown_id_is_told_apart_from_an_unreachable_hub(fake_hub: str, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    with pytest.raises(PolytoxError) as unknown:
        check_model("nobody/nothing")
    assert "the Hugging Face hub has no model 'nobody/nothing'" in str(unknown.value)
    assert isinstance(unknown.value.__cause__, hub_errors.RepositoryNotFoundError)
    with pytest.raises(PolytoxError, match="is a gated model on the Hugging Face hub"):
        check_model("gated/model")
    with pytest.raises(PolytoxError, match=r"has no config\.json: it is not a transformers model"):
        check_model("noconfig/model")
    online(monkeypatch, tmp_path, f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(PolytoxError) as unreachable:
        check_model("nobody/nothing")
    message = str(unreachable.value)
    assert "the Hugging Face hub cannot be reached" in message and "whether the hub knows the id is unknown" in message
    assert "has no model" not in message


def test_offline_mode_and_a_near_miss_of_an_alias(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    online(monkeypatch, tmp_path, f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")  # transformers' switch counts too
    with pytest.raises(PolytoxError, match="offline mode is on"):
        check_model("smollm2-135m")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PolytoxError) as info:
        check_model("smollm2-135m")
    message = str(info.value)
    assert "offline mode is on (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1)" in message
    assert "did you mean 'smollm2-135m-instruct'?" in message and "gemma-3-270m" in message


def test_hub_failure_classifies_only_lookup_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert "offline mode is on" in (hub_failure("x/y", hub_errors.OfflineModeIsEnabled("off")) or "")
    local = hub_errors.LocalEntryNotFoundError("not in the cache")
    local.__cause__ = ConnectionRefusedError(111, "Connection refused")
    assert "cannot be reached (ConnectionRefusedError" in (hub_failure("x/y", local) or "")
    assert hub_failure("x/y", ValueError("a bug")) is None  # not a lookup failure: keeps its traceback


def test_folders_paths_and_files(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert missing_model_files(folder) == ["weights (*.safetensors, pytorch_model*.bin)",
                                           "tokenizer files (tokenizer.json, tokenizer.model, vocab.json)"]
    with pytest.raises(PolytoxError, match="it lacks weights"):
        check_model(str(folder))
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "tokenizer.json").write_text("{}")
    check_model(str(folder))  # looks loadable: the loader itself takes it from here
    with pytest.raises(PolytoxError, match="is a file, not a model folder"):
        check_model(str(folder / "config.json"))
    with pytest.raises(PolytoxError, match="no such folder"):
        check_model(str(tmp_path / "nosuch"))
    with pytest.raises(PolytoxError, match="the model name is empty"):
        check_model(" ")
    assert looks_like_path("./m") and looks_like_path("/abs") and looks_like_path("a/b/c")
    assert not looks_like_path("gpt2") and not looks_like_path("owner/name")


# ---- option schemas --------------------------------------------------------------------------------
def factory(a: str = "", n: str | int = 64, auto_n: str | int = "auto", rate: str | float = 0.5,
            flag: str | bool = False, mode: Any = "x", **rest: Any) -> None:
    """A scorer-like factory (annotations as strings, as under ``from __future__ import annotations``)."""


def test_options_derive_from_the_signature() -> None:
    schema, var_kw = signature_schema(factory)
    assert var_kw and set(schema) == {"a", "n", "auto_n", "rate", "flag", "mode"}
    assert schema["n"] == Option("int") and schema["auto_n"] == Option("int", words=("auto",))
    # a number named in COMMON_OPTIONS takes that range (``rate`` >= 0); kind and words still come from the signature
    assert schema["rate"] == Option("float", words=(), range=COMMON["rate"].range) and schema["flag"] == Option("bool")
    assert COMMON["rate"].range is not None and COMMON["rate"].range.lo == 0
    assert option_from_annotation("Literal['ngram', 'full']", "ngram") == Option(choices=("ngram", "full"))
    assert Option("int", words=("auto",)).accepts() == "an integer or 'auto'"
    ok = {"n": "12", "auto_n": "auto", "rate": "1e-3", "flag": "yes", "a": "anything"}
    check_options("scorer 's'", schema, ok)
    check_options("scorer 's'", schema, {"n": 3, "rate": 1, "flag": True})  # YAML scalars
    with pytest.raises(BadValueError, match=r"scorer 's' option n='3.5': n takes an integer$") as info:
        check_options("scorer 's'", schema, {"n": "3.5"})
    assert info.value.key == "n"
    with pytest.raises(BadValueError, match="flag takes true or false"):
        check_options("scorer 's'", schema, {"flag": "maybe"})
    with pytest.raises(BadValueError, match="rate takes a number"):
        check_options("scorer 's'", schema, {"rate": "nan-ish"})
    with pytest.raises(PolytoxError, match=r"has no option 'nn' \(did you mean 'n'\?\); its options: a, .*cache"):
        check_options("scorer 's'", {**schema, "cache": Option()}, {"nn": "1"})
    assert as_bool("on") and as_bool(True) and not as_bool("false") and not as_bool("0")


def test_the_default_scorer_takes_the_options_of_polytox_ml() -> None:
    from polytox.registry import resolve
    from polytox.scoring import scorer_schema

    ml = scorer_schema(resolve("scorer", "polytox-ml"))
    default = scorer_schema(resolve("scorer", "default"))
    assert ml is not None and default is not None
    assert set(default) == set(ml) | {"routes"} and "lm_batch_size" in ml
    assert default["lm_batch_size"].accepts() == "an integer >= 0 or 'auto'"


# ---- YAML files ------------------------------------------------------------------------------------
def test_yaml_files_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("# a comment\nmodel: fake\n\nsamples: 3\n")
    config = read_yaml_mapping(path)
    assert config.data == {"model": "fake", "samples": 3} and config.lines == {"model": 2, "samples": 4}
    assert config.where("samples") == f"{path}:4" and config.where("nokey") == str(path)
    with pytest.raises(PolytoxError, match=rf"^{path}:4: unknown config key 'samples' \(did you mean 'sample'\?\)"):
        config.check_keys(["model", "sample"])
    path.write_text("model: fake\n  samples: 3\n")
    with pytest.raises(PolytoxError, match=rf"^{path}:2:10: invalid YAML: mapping values are not allowed here"):
        read_yaml_mapping(path)
    path.write_bytes(b"model: caf\xe9\n")
    with pytest.raises(PolytoxError, match=rf"^{path}: cannot read the config file: not UTF-8 text"):
        read_yaml_mapping(path)
    path.write_text("")
    assert read_yaml_mapping(path).data == {}


@pytest.mark.parametrize(("text", "reason"), [
    ("model_opt: &r [*r]\n", ":1:16: invalid YAML: alias *r refers to its own anchor"),
    ("a: &m {b: *m}\n", ":1:11: invalid YAML: alias *m refers to its own anchor"),
    ("a: " + "[" * 101 + "]" * 101 + "\n", ":1:103: invalid YAML: nested deeper than 100 levels"),
    ("a: &x 1\nb: [" + ", ".join(["*x"] * 101) + "]\n", ":2:405: invalid YAML: more than 100 aliases"),
    # "billion laughs": 9 aliases of 10 references each expand to 10^9 nodes
    ("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 10)),
     ":1:1: invalid YAML: aliases expand to more than 100000 nodes"),
])
def test_yaml_is_read_with_alias_and_depth_limits(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(PolytoxError) as info:
        read_yaml_mapping(path)
    assert str(info.value) == f"{path}{reason}"


def test_yaml_aliases_within_the_limits_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("base: &b {temperature: 1}\nother: *b\ndeep: " + "[" * 99 + "1" + "]" * 99 + "\n")
    data = read_yaml_mapping(path).data
    assert data["other"] == {"temperature": 1} == data["base"]
    inner = data["deep"]
    for _ in range(98):
        inner = inner[0]
    assert inner == [1]


# ---- the progress bar ------------------------------------------------------------------------------
def test_no_progress_bar_before_the_first_update(capsys: pytest.CaptureFixture[str]) -> None:
    from polytox.cli.common import progress_bar

    with pytest.raises(PolytoxError), progress_bar("generate+score"):
        raise PolytoxError("a validation error")  # what a command raises before any work
    assert "generate+score" not in capsys.readouterr().err
    with progress_bar("generate+score") as callback:
        callback("generate+score", 2, 4)
    assert "generate+score" in capsys.readouterr().err
