"""The secret workers authenticate each other with, found without configuration on one host.

In order: ``init_rpc(secret=...)``; ``PROTOREF_RPC_SECRET`` (the value);
``PROTOREF_RPC_SECRET_FILE`` (a file holding it, which must exist); else, when the master is on
this host (a loopback ``MASTER_ADDR``), a per-user secret file, created on first use as X11's
``~/.Xauthority`` and Jupyter's runtime tokens are: ``$XDG_CONFIG_HOME/protoref/rpc-secret``
(``~/.config/...``), mode 0600 in a folder of mode 0700, both owned by the user. Every worker the
same user starts on this host reads the same file, so their peers authenticate, and other users'
processes, which cannot read it, cannot join or call. A file or folder that another user owns or
that others may read or write is refused with an error saying how to fix it (it could have been
planted or read). Across hosts there is no such shared file: a non-loopback ``MASTER_ADDR``
requires a configured secret (the same on every host), and init_rpc says so.

Creation is atomic: the secret is written to a private temporary file which is then hard-linked
to its final name (``link`` fails if the name exists), so workers starting at once on one host
all read the one secret that won, never a half-written file.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import socket
import stat
from pathlib import Path
from typing import Final

from protoref.rpc.errors import PeerDiscoveryError

__all__ = [
    "SECRET_ENV",
    "SECRET_FILE_ENV",
    "SecretFileError",
    "default_secret_path",
    "is_loopback",
    "read_secret_file",
    "resolve_secret",
    "user_secret",
]

SECRET_ENV: Final = "PROTOREF_RPC_SECRET"
SECRET_FILE_ENV: Final = "PROTOREF_RPC_SECRET_FILE"
#: A secret file is read up to this many bytes (it holds one line).
MAX_SECRET_BYTES: Final = 4096


class SecretFileError(PeerDiscoveryError):
    """A secret file (or its folder) that must not be trusted, or cannot be used."""


def default_secret_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "protoref" / "rpc-secret"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is this host's loopback; a name that does not
    resolve is not."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def resolve_secret(explicit: bytes | str | None, master_addr: str) -> bytes:
    """The secret to authenticate peers with (see the module's docstring for the order)."""
    if explicit is not None:
        key = explicit.encode() if isinstance(explicit, str) else explicit
        if not key:
            raise PeerDiscoveryError("an empty shared secret authenticates nobody")
        return key
    value = os.environ.get(SECRET_ENV)
    if value:
        return value.encode()
    path = os.environ.get(SECRET_FILE_ENV)
    if path:
        return read_secret_file(Path(path), private_folder=False)
    if not is_loopback(master_addr):
        raise PeerDiscoveryError(
            f"MASTER_ADDR={master_addr} is not a loopback address, so workers may run on other "
            f"hosts, and they must share a secret to authenticate each other: set {SECRET_ENV} "
            f"to the same value on every host (for instance the output of "
            f"`python -c 'import secrets; print(secrets.token_hex(32))'`), or {SECRET_FILE_ENV} "
            "to a file holding it (mode 0600), or pass secret= to init_rpc. (On one host, with "
            "a loopback MASTER_ADDR, a per-user secret file is made for you.)"
        )
    return user_secret(default_secret_path())


def user_secret(path: Path) -> bytes:
    """The per-user secret at ``path``, created (0600, in a 0700 folder) if it is missing."""
    folder = path.parent
    folder.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    _check_folder(folder, private=True)
    if not path.exists() and not path.is_symlink():
        _create(path)
    return read_secret_file(path, private_folder=True)


def _create(path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_hex(32) + "\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another worker's secret won: use it
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_secret_file(path: Path, *, private_folder: bool) -> bytes:
    """The secret in ``path``, refused unless the file is a regular file (not a symlink) of
    this user that nobody else may read or write, in a folder nobody else may write to (with
    ``private_folder``: that nobody else may even enter, as the default one is made)."""
    _check_folder(path.parent, private=private_folder)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError as err:
        raise SecretFileError(
            f"secret file {path} does not exist (create it with mode 0600, holding one line)"
        ) from err
    except OSError as err:  # ELOOP: a symlink
        raise SecretFileError(f"secret file {path} cannot be opened safely: {err}") from err
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        _check_entry(path, st, "file", 0o077, "chmod 600")
        if not stat.S_ISREG(st.st_mode):
            raise SecretFileError(f"secret file {path} is not a regular file")
        data = f.read(MAX_SECRET_BYTES + 1)
    if len(data) > MAX_SECRET_BYTES:
        raise SecretFileError(f"secret file {path} is larger than {MAX_SECRET_BYTES} bytes")
    key = data.strip()
    if not key:
        raise SecretFileError(f"secret file {path} is empty")
    return key


def _check_folder(folder: Path, *, private: bool) -> None:
    try:
        st = folder.lstat()
    except FileNotFoundError as err:
        raise SecretFileError(f"folder {folder} of the secret file does not exist") from err
    if not stat.S_ISDIR(st.st_mode):
        raise SecretFileError(f"{folder} must be a folder (not a symlink or a file)")
    if private:
        _check_entry(folder, st, "folder", 0o077, "chmod 700")
    elif st.st_uid not in (os.getuid(), 0) or stat.S_IMODE(st.st_mode) & 0o022:
        # A folder others may write to lets them swap the file for theirs (root's is fine).
        raise SecretFileError(
            f"the folder {folder} of the secret file is writable by other users or owned by "
            f"uid {st.st_uid}: they could replace the secret; use a folder of yours "
            f"(`chmod go-w {folder}`)"
        )


def _check_entry(path: Path, st: os.stat_result, what: str, forbidden: int, fix: str) -> None:
    uid = os.getuid()
    if st.st_uid != uid:
        raise SecretFileError(
            f"the secret {what} {path} belongs to uid {st.st_uid}, not to you (uid {uid}): "
            "it may have been planted; remove it, or point "
            f"{SECRET_FILE_ENV} at one of yours"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & forbidden:
        raise SecretFileError(
            f"the secret {what} {path} has mode {mode:04o}: other users may "
            f"{'read or change' if what == 'file' else 'enter'} it; run `{fix} {path}`"
        )
