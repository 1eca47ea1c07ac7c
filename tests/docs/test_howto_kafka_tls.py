"""The Kafka security how-to (docs/how-to/kafka-security.md): its TLS settings file and its check
(``weir produce`` over mutual TLS) run with sh against the session's TLS broker (Tansu behind a
TLS proxy that requires a client certificate), the key's password from a file; and the
wrong-CA line the page quotes. The page's paths and broker are this machine's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka_tls import KEY_PASSWORD, TlsBroker
from tests.support.tutorial import Reader

DOCS = Path(__file__).resolve().parents[2] / "docs"
HOWTO = DOCS / "examples" / "howto"
PAGE = DOCS / "how-to" / "kafka-security.md"


@pytest.fixture
def reader(tmp_path: Path, kafka_tls: TlsBroker) -> Iterator[Reader]:
    reader = Reader(tmp_path, HOWTO)
    secret = tmp_path / "key-password"
    secret.write_text(KEY_PASSWORD + "\n")
    secret.chmod(0o600)
    pki = kafka_tls.pki
    reader.rewrite(
        {
            "/etc/weir/kafka/ca.pem": str(pki.ca),
            "/etc/weir/kafka/client.pem": str(pki.client_cert),
            "/etc/weir/kafka/client.key.password": str(secret),
            "/etc/weir/kafka/client.key": str(pki.client_key),
            "broker.example:9093": kafka_tls.bootstrap,
        }
    )
    try:
        yield reader
    finally:
        reader.stop_all()


def test_the_tls_check_produces_over_mutual_tls(reader: Reader) -> None:
    out = reader.attempt("sh", "kafka_tls_check.sh")
    assert out.returncode == 0, out.stderr.decode()
    assert json.loads(out.stdout.decode().strip().splitlines()[-1])["events"] == 1000
    assert KEY_PASSWORD not in out.stdout.decode() + out.stderr.decode()


def test_a_wrong_ca_is_the_line_the_page_quotes(reader: Reader, kafka_tls: TlsBroker) -> None:
    env = (reader.root / "kafka_tls.env").read_text()
    (reader.root / "kafka_tls.env").write_text(
        env.replace(str(kafka_tls.pki.ca), str(kafka_tls.pki.other_ca))
    )
    out = reader.attempt("sh", "kafka_tls_check.sh", timeout=60)
    assert out.returncode == 1
    assert "its TLS certificate is not trusted" in out.stderr.decode()
    assert "its TLS certificate is not trusted" in PAGE.read_text()


def test_the_page_includes_the_snippets() -> None:
    text = PAGE.read_text()
    for name in ("kafka_tls.env", "kafka_tls_check.sh", "kafka_sasl.env"):
        assert f'--8<-- "examples/howto/{name}"' in text, f"the page lacks {name}"
