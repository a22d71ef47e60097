"""torchrun's rendezvous arguments for --rdzv-backend=protoref: what is accepted, and a clear,
typed error naming the argument for everything else (no torch needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from protoref.torch.torchrun_conf import PASSWORD_ENV, TorchrunConfigError, parse_config


def _parse(endpoint: str, conf: dict[str, object] | None = None, **kw: object) -> object:
    args: dict[str, object] = {"run_id": "job", "min_nodes": 1, "max_nodes": 2, **kw}
    return parse_config(endpoint, conf=conf or {}, **args)  # type: ignore[arg-type]


def test_defaults_are_torchs(tmp_path: Path) -> None:
    cfg = parse_config(f"file:{tmp_path}", run_id="job", min_nodes=1, max_nodes=2, conf={})
    s = cfg.settings
    assert (s.join_timeout, s.last_call_timeout, s.close_timeout) == (600, 30, 30)
    assert (s.heartbeat_timeout, s.keep_alive_interval, s.keep_alive_max_attempt) == (5, 5, 3)
    assert cfg.store_url == f"file:{tmp_path}"
    assert cfg.read_timeout == 60


def test_settings_from_rdzv_conf(tmp_path: Path) -> None:
    conf = {
        "join_timeout": "30",
        "last_call_timeout": "0.5",
        "close_timeout": "3",
        "heartbeat_timeout": "2",
        "keep_alive_interval": "1",
        "keep_alive_max_attempt": "4",
        "read_timeout": "20",
        "timeout": 900,  # launch_agent always adds it: accepted, ignored
    }
    cfg = parse_config(f"file:{tmp_path}", run_id="j", min_nodes=2, max_nodes=4, conf=conf)
    s = cfg.settings
    assert (s.min_nodes, s.max_nodes, s.run_id) == (2, 4, "j")
    assert (s.join_timeout, s.last_call_timeout, s.close_timeout) == (30, 0.5, 3)
    assert (s.heartbeat_timeout, s.keep_alive_interval, s.keep_alive_max_attempt) == (2, 1, 4)
    assert cfg.read_timeout == 20


def test_file_endpoint_creates_its_folder_privately(tmp_path: Path) -> None:
    cfg = parse_config(f"file://{tmp_path}/job", run_id="j", min_nodes=1, max_nodes=1, conf={})
    assert cfg.store_url == f"file:{tmp_path}/job"
    assert (tmp_path / "job").is_dir()
    assert (tmp_path / "job").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("127.0.0.1:2379", "etcd://127.0.0.1:2379"),
        ("etcd://h:1/jobs/7", "etcd://h:1/jobs/7"),
        ("a:1,b:2,c:3", "etcd://a:1,b:2,c:3"),
        ("etcds://h:2379", "etcds://h:2379"),
    ],
)
def test_etcd_endpoints(endpoint: str, url: str) -> None:
    cfg = parse_config(endpoint, run_id="j", min_nodes=1, max_nodes=1, conf={})
    assert cfg.store_url == url


@pytest.mark.parametrize(
    ("endpoint", "conf", "needle"),
    [
        ("", {}, "--rdzv-endpoint is empty"),
        ("localhost", {}, "'localhost' is not host:port"),
        ("h:99999", {}, "'h:99999' is not host:port"),
        ("a:1,b", {}, "'b' is not host:port"),
        ("http://h:1", {}, "expected file:DIR"),
        ("file:", {}, "file:DIR needs a directory"),
        ("file:/nonexistent-parent-xyz/job", {}, "does not exist"),
        ("h:1", {"join_timout": "3"}, "unknown key(s) join_timout"),
        ("h:1", {"store_type": "file"}, "unknown key(s) store_type"),
        ("h:1", {"join_timeout": "soon"}, "join_timeout='soon': not a number"),
        ("h:1", {"join_timeout": "-1"}, "must be a positive number"),
        ("h:1", {"keep_alive_interval": "nan"}, "must be a positive number"),
        ("h:1", {"keep_alive_max_attempt": "0"}, "whole number >= 1"),
        ("h:1", {"keep_alive_max_attempt": "2.5"}, "whole number >= 1"),
        ("h:1", {"join_timeout": "10", "last_call_timeout": "10"}, "must be shorter"),
        ("h:1", {"etcd_cert": "/nonexistent.pem"}, "no such file"),
        ("h:1", {"etcd_user": "alice"}, PASSWORD_ENV),
    ],
)
def test_bad_endpoint_or_setting_is_named(
    endpoint: str, conf: dict[str, object], needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    with pytest.raises(TorchrunConfigError) as err:
        _parse(endpoint, conf)
    assert needle in str(err.value)
    assert isinstance(err.value, ValueError)  # torch's own config errors are ValueErrors


def test_bad_node_counts_are_named() -> None:
    with pytest.raises(TorchrunConfigError, match="min_nodes"):
        _parse("h:1", min_nodes=3, max_nodes=2)


def test_etcd_settings_on_a_file_store_are_refused(tmp_path: Path) -> None:
    pem = tmp_path / "ca.pem"
    pem.write_text("x", encoding="utf-8")
    with pytest.raises(TorchrunConfigError, match="file store, not etcd"):
        _parse(f"file:{tmp_path}", {"etcd_ca_cert": str(pem)})


@pytest.mark.parametrize(("raw", "kept"), [("0.5", 0.5), ("0", 0.0), (2, 2.0)])
def test_torch_215_cas_backoff_is_accepted_and_kept(
    tmp_path: Path, raw: object, kept: float
) -> None:
    cfg = parse_config(
        f"file:{tmp_path}",
        run_id="j",
        min_nodes=1,
        max_nodes=2,
        conf={"cas_backoff_max_seconds": raw},
    )
    assert cfg.cas_backoff_max_seconds == kept


@pytest.mark.parametrize("raw", ["-1", "inf", "nan", "soon"])
def test_a_bad_cas_backoff_is_refused_as_torch_215_refuses_it(tmp_path: Path, raw: str) -> None:
    with pytest.raises(TorchrunConfigError, match="cas_backoff_max_seconds"):
        _parse(f"file:{tmp_path}", {"cas_backoff_max_seconds": raw})
