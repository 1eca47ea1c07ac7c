"""Kafka TLS and SASL settings: URL options over WEIR_KAFKA_*, validation naming the value and
the fix, what kafka-python is given, and URLs shown without their secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.base.errors import ConfigError
from weir.base.redact import redact_url
from weir.engine import sinks, sources
from weir.engine.kafka_security import KafkaSecurity, resolve
from weir.engine.spark.inputs import parse_kafka_url

SECRET = "pw-Yq81-never-shown"


@pytest.fixture
def pem(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


def test_a_url_option_wins_over_the_environment(pem: Path) -> None:
    env = {
        "WEIR_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "WEIR_KAFKA_SASL_MECHANISM": "PLAIN",
        "WEIR_KAFKA_SASL_USERNAME": "env-user",
        "WEIR_KAFKA_SASL_PASSWORD": SECRET,
        "WEIR_KAFKA_SSL_CAFILE": "/nowhere/ca.pem",
    }
    got = resolve({"sasl_mechanism": "scram-sha-512", "ssl_cafile": str(pem)}, env)
    assert got == KafkaSecurity(
        "SASL_SSL", ssl_cafile=str(pem), sasl_mechanism="SCRAM-SHA-512",
        sasl_username="env-user", sasl_password=SECRET,
    )  # fmt: skip
    assert resolve({}, {}) == KafkaSecurity()


def test_what_kafka_python_is_given(pem: Path, tmp_path: Path) -> None:
    secret_file = tmp_path / "pw"
    secret_file.write_text(SECRET + "\n")
    got = resolve(
        {"security_protocol": "sasl_ssl", "sasl_mechanism": "SCRAM-SHA-256",
         "sasl_username": "u", "sasl_password_file": str(secret_file), "ssl_cafile": str(pem),
         "ssl_check_hostname": "false"},
        {},
    )  # fmt: skip
    assert got.client_kwargs() == {
        "security_protocol": "SASL_SSL", "ssl_check_hostname": False, "ssl_cafile": str(pem),
        "ssl_certfile": None, "ssl_keyfile": None, "ssl_password": None,
        "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "u",
        "sasl_plain_password": SECRET,
    }  # fmt: skip
    # a Spark task rebuilds the same settings from the options alone
    assert resolve(got.options(), {}) == got
    assert KafkaSecurity().client_kwargs() == {"security_protocol": "PLAINTEXT"}


def test_repr_and_describe_never_show_a_password(pem: Path) -> None:
    sec = KafkaSecurity(
        "SASL_SSL", ssl_cafile=str(pem), ssl_key_password=SECRET, sasl_mechanism="PLAIN",
        sasl_username="u", sasl_password=SECRET,
    )  # fmt: skip
    for text in (repr(sec), str(sec), f"{sec}", sec.describe()):
        assert SECRET not in text
    assert "sasl_password='***'" in repr(sec) and "sasl_username='u'" in repr(sec)
    assert sec.describe() == "security_protocol=SASL_SSL&sasl_mechanism=PLAIN"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"security_protocol": "TLS"}, r"security_protocol='TLS' is not known; use one of "
         r"PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"},
         r"sasl_mechanism is 'GSSAPI'; .* needs one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"security_protocol": "SASL_PLAINTEXT"}, r"sasl_mechanism is not set"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
          "sasl_password": SECRET}, r"needs a user name; set sasl_username .* or "
         r"WEIR_KAFKA_SASL_USERNAME"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
          "sasl_username": "u"}, r"needs a password; set WEIR_KAFKA_SASL_PASSWORD"),
        ({"security_protocol": "SSL", "ssl_cafile": "/no/such/ca.pem"},
         r"ssl_cafile=/no/such/ca.pem does not exist; fix the path in ssl_cafile"),
        ({"ssl_cafile": "/etc/hostname"}, r"ssl_cafile is set but security_protocol=PLAINTEXT "
         r"does not use TLS; set security_protocol=SSL"),
        ({"sasl_mechanism": "PLAIN"}, r"does not use SASL; set security_protocol=SASL_SSL"),
        ({"security_protocol": "SSL", "ssl_check_hostname": "maybe"},
         r"ssl_check_hostname='maybe' is not true or false"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "u",
          "sasl_password_file": "/no/such/pw"}, r"sasl_password_file=/no/such/pw cannot be "
         r"read \(No such file or directory\)"),
    ],
)  # fmt: skip
def test_bad_settings_name_the_value_and_the_fix(options: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        resolve(options, {})
    assert SECRET not in str(err.value)


def test_a_directory_is_not_a_readable_certificate(tmp_path: Path, pem: Path) -> None:
    with pytest.raises(ConfigError, match=rf"ssl_certfile={tmp_path} is not a readable file"):
        KafkaSecurity("SSL", ssl_cafile=str(pem), ssl_certfile=str(tmp_path))
    with pytest.raises(ConfigError, match=r"needs both ssl_certfile and ssl_keyfile; set "
                       r"ssl_keyfile"):  # fmt: skip
        KafkaSecurity("SSL", ssl_certfile=str(pem))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"kafka://h:9093/t?sasl_password={SECRET}&group=g",
         "kafka://h:9093/t?sasl_password=***&group=g"),
        (f"kafka://u:{SECRET}@h:9093/t", "kafka://u:***@h:9093/t"),
        (f"kafka://h/t?ssl_key_password={SECRET}&sasl_password_file=/run/pw",
         "kafka://h/t?ssl_key_password=***&sasl_password_file=/run/pw"),
        (f"s3://b/p?token={SECRET}", "s3://b/p?token=***"),
        ("kafka://h:9092/t?start=earliest", "kafka://h:9092/t?start=earliest"),
        ("/var/lib/weir", "/var/lib/weir"),
    ],
)  # fmt: skip
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_every_kafka_url_takes_the_security_options(
    pem: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEIR_KAFKA_SASL_PASSWORD", SECRET)
    query = f"security_protocol=SASL_SSL&sasl_mechanism=PLAIN&sasl_username=u&ssl_cafile={pem}"
    src = sources.from_url(f"kafka://h:9093/t?group=g&{query}")
    assert isinstance(src, sources.KafkaSource) and src.security.sasl_password == SECRET
    assert src.describe() == (
        "kafka://h:9093/t?start=earliest&group=g&security_protocol=SASL_SSL&sasl_mechanism=PLAIN"
    )
    sink = sinks.from_url(f"kafka://h:9093/out?{query}")
    assert isinstance(sink, sinks.KafkaSink) and sink.security == src.security
    assert sink.describe() == "kafka://h:9093/out?security_protocol=SASL_SSL&sasl_mechanism=PLAIN"
    assert parse_kafka_url(f"kafka://h:9093/t?from=earliest&{query}")[:2] == ("h:9093", "t")


def test_errors_about_a_url_never_show_its_secrets() -> None:
    with pytest.raises(ConfigError, match=r"credentials before the host are not read") as err:
        sources.from_url(f"kafka://u:{SECRET}@h:9093/t")
    assert SECRET not in str(err.value) and "u:***@h:9093" in str(err.value)
    with pytest.raises(ConfigError, match=r"unknown option 'acks'") as err:
        sources.from_url(f"kafka://h:9093/t?acks=1&sasl_password={SECRET}")
    assert SECRET not in str(err.value)
    with pytest.raises(ConfigError, match=r"needs a user name") as err:
        sinks.from_url(
            f"kafka://h:9093/t?security_protocol=SASL_PLAINTEXT&sasl_mechanism=PLAIN"
            f"&sasl_password={SECRET}"
        )
    assert SECRET not in str(err.value) and "sasl_password=***" in str(err.value)
    with pytest.raises(ConfigError, match=r"unknown option 'acks'") as err:
        parse_kafka_url(f"kafka://h:9093/t?acks=1&sasl_password={SECRET}")
    assert SECRET not in str(err.value)


def test_the_client_library_is_an_option_validated_by_name() -> None:
    """``client`` picks the library (auto by default: confluent, or raw record batches for
    lean plaintext source reads), from the URL over WEIR_KAFKA_CLIENT; a Spark task gets it
    through ``options()``; ``/jobs`` shows it when not the default."""
    assert KafkaSecurity().client == "auto"
    got = resolve({}, {"WEIR_KAFKA_CLIENT": "Kafka-Python"})
    assert got.client == "kafka-python" and resolve(got.options(), {}) == got
    assert resolve({"client": "confluent"}, {"WEIR_KAFKA_CLIENT": "kafka-python"}).client == (
        "confluent"
    )
    assert got.describe() == "client=kafka-python" and "client='kafka-python'" in repr(got)
    with pytest.raises(
        ConfigError,
        match=r"client='aiokafka' is not known; use auto or confluent or "
        r"kafka-python \(set by client \(URL option\) or WEIR_KAFKA_CLIENT\)",
    ):
        resolve({}, {"WEIR_KAFKA_CLIENT": "aiokafka"})
    with pytest.raises(ConfigError, match=r"client='x'.*WEIR_KAFKA_CLIENT"):
        sources.from_url("kafka://h:9092/t?client=x")


def test_what_librdkafka_is_given(pem: Path, tmp_path: Path) -> None:
    """The same settings as kafka-python's, in librdkafka's names."""
    both = tmp_path / "client.pem"  # a certificate file that holds its key too
    both.write_text("-----BEGIN CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\n")
    sec = KafkaSecurity(
        "SASL_SSL", ssl_cafile=str(pem), ssl_certfile=str(both), ssl_key_password=SECRET,
        ssl_check_hostname=False, sasl_mechanism="SCRAM-SHA-512", sasl_username="u",
        sasl_password=SECRET,
    )  # fmt: skip
    assert sec.rdkafka_config() == {
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(pem),
        "ssl.endpoint.identification.algorithm": "none",
        "ssl.certificate.location": str(both), "ssl.key.location": str(both),
        "ssl.key.password": SECRET, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
        "sasl.password": SECRET,
    }  # fmt: skip
    # no CA file: librdkafka's own OpenSSL probes the system's CA paths
    assert KafkaSecurity("SSL").rdkafka_config() == {
        "security.protocol": "SSL", "ssl.ca.location": "probe",
        "ssl.endpoint.identification.algorithm": "https",
    }  # fmt: skip
    assert KafkaSecurity().rdkafka_config() == {"security.protocol": "PLAINTEXT"}
