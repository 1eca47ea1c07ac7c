"""Kafka over TLS and SASL for tests, on loopback.

Tansu 0.6.0 takes ``--cert``/``--key`` but serves plaintext on every listener scheme it accepts,
so TLS comes from a terminating proxy in front of a plain Tansu broker: Python's ``ssl`` (OpenSSL)
in a thread, requiring a client certificate signed by the test CA (mutual TLS), with the broker
advertising the proxy's address so every connection of a client goes through TLS. The CA and
certificates are made by ``openssl`` in the fixture's directory. ``tansu --authentication``
runs the SASL SCRAM exchange for real, but no login succeeds: ``tansu user create`` is refused
once authentication is on, and a user created before it was turned on (S3 storage kept across
the restart) is still answered ``e=unknown-user``. So this broker refuses every password.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.broker import free_port, tansu

KEY_PASSWORD = "key-pass-Q7xv-never-shown"  # the client key's password: grep outputs for it


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA that signed the server and client certificates
    server_cert: Path  # names localhost and 127.0.0.1
    server_key: Path
    client_cert: Path
    client_key: Path  # encrypted with KEY_PASSWORD
    other_ca: Path  # a CA that signed nothing here: a client trusting only it must fail
    wrong_name_cert: Path  # signed by ``ca`` but naming only other.invalid
    wrong_name_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(cwd: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.pem", "-days", "2", "-subj", f"/CN=weir test {name}", cwd=cwd)  # fmt: skip


def _signed(cwd: Path, name: str, cn: str, san: str | None) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.csr", "-subj", f"/CN={cn}", cwd=cwd)  # fmt: skip
    ext = cwd / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", ext.name,
             cwd=cwd)  # fmt: skip


def make_pki(cwd: Path) -> Pki:
    _ca(cwd, "ca")
    _ca(cwd, "other-ca")
    _signed(cwd, "server", "localhost", "DNS:localhost,IP:127.0.0.1")
    _signed(cwd, "client", "weir-test-client", None)
    _signed(cwd, "wrong-name", "other.invalid", "DNS:other.invalid")
    _openssl("pkey", "-in", "client.key", "-out", "client-enc.key", "-aes256", "-passout",
             f"pass:{KEY_PASSWORD}", cwd=cwd)  # fmt: skip
    for key in cwd.glob("*.key"):
        key.chmod(0o600)
    return Pki(
        cwd / "ca.pem", cwd / "server.pem", cwd / "server.key", cwd / "client.pem",
        cwd / "client-enc.key", cwd / "other-ca.pem", cwd / "wrong-name.pem",
        cwd / "wrong-name.key",
    )  # fmt: skip


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


class TlsProxy:
    """TLS on ``127.0.0.1:port`` in front of plaintext ``127.0.0.1:target``, in a thread."""

    def __init__(self, port: int, target: int, cert: Path, key: Path, ca: Path) -> None:
        self.port, self.target = port, target
        self.ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca))
        self.ctx.load_cert_chain(str(cert), str(key))
        self.ctx.verify_mode = ssl.CERT_REQUIRED
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.port, ssl=self.ctx)
        )
        self.ready.set()
        try:
            self.loop.run_forever()
        finally:
            server.close()
            self.loop.run_until_complete(server.wait_closed())
            self.loop.close()

    def __enter__(self) -> TlsProxy:
        self.thread.start()
        assert self.ready.wait(10), "the TLS proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass(frozen=True)
class TlsBroker:
    bootstrap: str  # 127.0.0.1:port of the TLS listener
    plain: str  # the broker's own plaintext port (not advertised)
    wrong_name: str  # a TLS listener whose certificate names only other.invalid
    pki: Pki


@contextlib.contextmanager
def tansu_tls(work: Path) -> Iterator[TlsBroker]:
    pki = make_pki(work)
    plain, tls_port, wrong = free_port(), free_port(), free_port()
    with (
        tansu(_dir(work / "tansu-tls"), plain, tls_port),
        TlsProxy(tls_port, plain, pki.server_cert, pki.server_key, pki.ca),
        TlsProxy(wrong, plain, pki.wrong_name_cert, pki.wrong_name_key, pki.ca),
    ):
        yield TlsBroker(f"127.0.0.1:{tls_port}", f"127.0.0.1:{plain}", f"127.0.0.1:{wrong}", pki)


@contextlib.contextmanager
def tansu_sasl(work: Path) -> Iterator[str]:
    """A Tansu broker that requires SASL (SCRAM) authentication and knows no user."""
    with tansu(_dir(work / "tansu-sasl"), extra=("--authentication",)) as bootstrap:
        yield bootstrap


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
