"""How every Kafka client weir makes talks to its brokers: the client library, TLS and SASL.

Each setting comes from a Kafka URL's query option or else from its ``WEIR_KAFKA_<OPTION>``
environment variable (a URL option wins):

==========================  ===================================================================
option                      meaning
==========================  ===================================================================
``client``                  auto (default: confluent-kafka, librdkafka, but a lean plaintext
                            source read fetches raw record batches, ``sources.kafka_raw``),
                            confluent or kafka-python
``security_protocol``       PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
``ssl_cafile``              PEM file of the CA(s) that signed the brokers' certificates
                            (default: the system's trusted CAs)
``ssl_certfile``            PEM client certificate, for brokers that require one (mutual TLS)
``ssl_keyfile``             its private key (PEM)
``ssl_key_password``        the key's password; prefer ``ssl_key_password_file``
``ssl_key_password_file``   a file holding it
``ssl_check_hostname``      true (default): the broker's certificate must name the host
``sasl_mechanism``          PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
``sasl_username``           the SASL user
``sasl_password``           its password; prefer the environment or ``sasl_password_file``:
                            a URL is visible in process lists
``sasl_password_file``      a file holding it (one line)
==========================  ===================================================================

``KafkaSecurity`` holds them, checked when it is made; its ``repr`` never shows a password.
``client_kwargs`` gives kafka-python's settings and ``rdkafka_config`` librdkafka's, so both
clients take the same options.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weir.base.errors import ConfigError
from weir.base.redact import REDACTED, redact_url
from weir.base.settings import Check, Choice, Number, Setting, Switch

CLIENTS = ("auto", "confluent", "kafka-python")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
OPTIONS = (
    "client",
    "security_protocol",
    "ssl_cafile",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_key_password",
    "ssl_key_password_file",
    "ssl_check_hostname",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "sasl_password_file",
)
_FILES = ("ssl_cafile", "ssl_certfile", "ssl_keyfile")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def env_var(option: str) -> str:
    """``ssl_cafile`` -> ``WEIR_KAFKA_SSL_CAFILE``."""
    return f"WEIR_KAFKA_{option.upper()}"


DEFAULT_PORT = 9092


def split_host(address: str) -> tuple[str, int]:
    """A broker's ``host:port`` -> ``(host, port)`` (``[::1]:9093`` too; no port, or one that is
    not a number: Kafka's 9092, as librdkafka takes it)."""
    host, _, port = address.strip().rpartition(":")
    if not host:
        host, port = address.strip(), ""
    return host.strip("[]"), int(port) if port.isdigit() else DEFAULT_PORT


_HELP = {
    "client": "auto (confluent-kafka, but lean plaintext source reads fetch raw record batches), "
    "confluent (confluent-kafka, librdkafka) or kafka-python",
    "security_protocol": "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
    "ssl_cafile": "PEM file of the CA(s) that signed the brokers' certificates (default: the "
    "system's trusted CAs)",
    "ssl_certfile": "PEM client certificate, for brokers that require one (mutual TLS)",
    "ssl_keyfile": "its private key (PEM)",
    "ssl_key_password": "the key's password; prefer WEIR_KAFKA_SSL_KEY_PASSWORD_FILE",
    "ssl_key_password_file": "a file holding the key's password",
    "ssl_check_hostname": "true: the broker's certificate must name the host",
    "sasl_mechanism": "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
    "sasl_username": "the SASL user",
    "sasl_password": "its password (a URL option is visible in process lists; this is not)",
    "sasl_password_file": "a file holding the SASL password (one line)",
}
_DEFAULTS = {"client": "auto", "security_protocol": "PLAINTEXT", "ssl_check_hostname": "true"}
_CHECKS: dict[str, Check] = {
    "client": Choice(CLIENTS),
    "security_protocol": Choice(PROTOCOLS),
    "sasl_mechanism": Choice(MECHANISMS),
    "ssl_check_hostname": Switch(),
}

# every Kafka client's settings, each also a URL option of the same name (the URL's wins);
# ``KafkaSecurity`` checks them when it is made (``resolve``)
KAFKA_SETTINGS: tuple[Setting, ...] = (
    *(
        Setting(
            f"kafka_{option}",
            _HELP[option] + " (or the URL option " + option + ")",
            _DEFAULTS.get(option),
            _CHECKS.get(option),
            env=env_var(option),
            env_only=True,
            secret=option in ("ssl_key_password", "sasl_password"),
        )
        for option in OPTIONS
    ),
    Setting(
        "kafka_connect_timeout_s",
        "how long a Kafka client retries an unreachable broker before the job fails",
        60.0,
        Number(0.001),
        env="WEIR_KAFKA_CONNECT_TIMEOUT_S",
        env_only=True,
    ),
)
CONNECT_TIMEOUT = KAFKA_SETTINGS[-1]


def _names(option: str) -> str:
    return f"{option} (URL option) or {env_var(option)}"


@dataclass(frozen=True, slots=True)
class KafkaSecurity:
    """One Kafka client's library, TLS and SASL settings; ``KafkaSecurity()`` is plaintext
    through the default client."""

    protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    client: str = CLIENTS[0]

    def __post_init__(self) -> None:
        if self.client not in CLIENTS:
            raise ConfigError(
                f"Kafka client={self.client!r} is not known; use {' or '.join(CLIENTS)} (set "
                f"by {_names('client')})"
            )
        if self.protocol not in PROTOCOLS:
            raise ConfigError(
                f"Kafka security_protocol={self.protocol!r} is not known; use one of "
                f"{', '.join(PROTOCOLS)} (set by {_names('security_protocol')})"
            )
        if self.tls:
            self._check_tls_files()
        elif any(getattr(self, f) for f in _FILES):
            given = next(f for f in _FILES if getattr(self, f))
            raise ConfigError(
                f"Kafka {given} is set but security_protocol={self.protocol} does not use TLS; "
                f"set security_protocol=SSL or SASL_SSL, or unset {_names(given)}"
            )
        if self.sasl:
            self._check_sasl()
        elif self.sasl_mechanism or self.sasl_username:
            raise ConfigError(
                f"Kafka SASL settings are given but security_protocol={self.protocol} does not "
                "use SASL; set security_protocol=SASL_SSL or SASL_PLAINTEXT"
            )

    def _check_tls_files(self) -> None:
        for option in _FILES:
            path = getattr(self, option)
            if path is not None and not (os.path.isfile(path) and os.access(path, os.R_OK)):
                what = "is not a readable file" if os.path.exists(path) else "does not exist"
                raise ConfigError(f"Kafka {option}={path} {what}; fix the path in {_names(option)}")
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile) and not self._cert_holds_key():
            missing = "ssl_keyfile" if self.ssl_certfile else "ssl_certfile"
            raise ConfigError(
                f"Kafka TLS client authentication needs both ssl_certfile and ssl_keyfile; set "
                f"{_names(missing)}"
            )

    def _cert_holds_key(self) -> bool:
        """A client certificate file may hold its key too (one PEM with both)."""
        if not self.ssl_certfile:
            return False
        with open(self.ssl_certfile, "rb") as fh:
            return b"PRIVATE KEY-----" in fh.read()

    def _check_sasl(self) -> None:
        if self.sasl_mechanism not in MECHANISMS:
            shown = "not set" if self.sasl_mechanism is None else f"{self.sasl_mechanism!r}"
            raise ConfigError(
                f"Kafka sasl_mechanism is {shown}; security_protocol={self.protocol} needs one "
                f"of {', '.join(MECHANISMS)} (set by {_names('sasl_mechanism')})"
            )
        if not self.sasl_username:
            raise ConfigError(
                f"Kafka SASL ({self.sasl_mechanism}) needs a user name; set "
                f"{_names('sasl_username')}"
            )
        if not self.sasl_password:
            raise ConfigError(
                f"Kafka SASL ({self.sasl_mechanism}) needs a password; set "
                f"{env_var('sasl_password')} or sasl_password_file (URL option) or "
                f"{env_var('sasl_password_file')}"
            )

    def __repr__(self) -> str:
        shown = [f"protocol={self.protocol!r}"]
        if self.client != CLIENTS[0]:
            shown.append(f"client={self.client!r}")
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "sasl_mechanism"):
            value = getattr(self, name)
            if value is not None:
                shown.append(f"{name}={value!r}")
        if self.tls and not self.ssl_check_hostname:
            shown.append("ssl_check_hostname=False")
        if self.sasl_username:
            shown.append(f"sasl_username={self.sasl_username!r}")
        for name in ("ssl_key_password", "sasl_password"):
            if getattr(self, name):
                shown.append(f"{name}={REDACTED!r}")
        return f"KafkaSecurity({', '.join(shown)})"

    __str__ = __repr__

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def client_kwargs(self) -> dict[str, Any]:
        """kafka-python's settings for this security (nothing for plaintext)."""
        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.tls:
            out.update(
                ssl_check_hostname=self.ssl_check_hostname,
                ssl_cafile=self.ssl_cafile,
                ssl_certfile=self.ssl_certfile,
                ssl_keyfile=self.ssl_keyfile,
                ssl_password=self.ssl_key_password,
            )
        if self.sasl:
            out.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_username,
                sasl_plain_password=self.sasl_password,
            )
        return out

    def rdkafka_config(self) -> dict[str, Any]:
        """librdkafka's settings for this security (confluent-kafka's configuration keys)."""
        out: dict[str, Any] = {"security.protocol": self.protocol}
        if self.tls:
            # librdkafka's own OpenSSL does not know the system's CA store unless told to probe
            out["ssl.ca.location"] = self.ssl_cafile or "probe"
            out["ssl.endpoint.identification.algorithm"] = (
                "https" if self.ssl_check_hostname else "none"
            )
            if self.ssl_certfile:
                out["ssl.certificate.location"] = self.ssl_certfile
                # a certificate file may hold its key too
                out["ssl.key.location"] = self.ssl_keyfile or self.ssl_certfile
            if self.ssl_key_password:
                out["ssl.key.password"] = self.ssl_key_password
        if self.sasl:
            out.update(
                {
                    "sasl.mechanism": self.sasl_mechanism,
                    "sasl.username": self.sasl_username,
                    "sasl.password": self.sasl_password,
                }
            )
        return out

    def options(self) -> dict[str, str]:
        """Every setting as URL options, secrets included: for a process that must build the
        same settings without this environment (a Spark task). Never show it."""
        raw: dict[str, Any] = {
            "client": self.client,
            "security_protocol": self.protocol,
            "ssl_cafile": self.ssl_cafile,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
            "ssl_key_password": self.ssl_key_password,
            "ssl_check_hostname": "true" if self.ssl_check_hostname else "false",
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_username": self.sasl_username,
            "sasl_password": self.sasl_password,
        }
        return {k: str(v) for k, v in raw.items() if v is not None}

    def describe(self) -> str:
        """What ``/jobs`` may show: the client when not the default, the protocol and
        mechanism, never a credential."""
        shown = [] if self.client == CLIENTS[0] else [f"client={self.client}"]
        if self.protocol != "PLAINTEXT":
            shown.append(f"security_protocol={self.protocol}")
        if self.sasl:
            shown.append(f"sasl_mechanism={self.sasl_mechanism}")
        return "&".join(shown)

    @classmethod
    def from_env(cls) -> KafkaSecurity:
        """The settings of ``WEIR_KAFKA_*`` alone (a job file's ``sources.kafka(...)``)."""
        return resolve({}, os.environ)


def resolve(options: Mapping[str, str], environ: Mapping[str, str]) -> KafkaSecurity:
    """The settings of URL ``options`` over those of ``environ``; only the security options of
    ``options`` are read (callers check the rest)."""

    def get(option: str) -> str | None:
        value = options.get(option)
        if value is None:
            value = environ.get(env_var(option))
        return value if value else None

    protocol = (get("security_protocol") or "PLAINTEXT").strip().upper()
    client = (get("client") or CLIENTS[0]).strip().lower()
    mechanism = get("sasl_mechanism")
    return KafkaSecurity(
        protocol=protocol,
        ssl_cafile=get("ssl_cafile"),
        ssl_certfile=get("ssl_certfile"),
        ssl_keyfile=get("ssl_keyfile"),
        ssl_key_password=_secret(get, "ssl_key_password"),
        ssl_check_hostname=_switch(get("ssl_check_hostname"), "ssl_check_hostname"),
        sasl_mechanism=None if mechanism is None else mechanism.strip().upper(),
        sasl_username=get("sasl_username"),
        sasl_password=_secret(get, "sasl_password"),
        client=client,
    )


def check_netloc(url: str, netloc: str) -> None:
    """Credentials never go before the host: they would be shown wherever the broker is."""
    if "@" in netloc:
        raise ConfigError(
            f"{redact_url(url)}: credentials before the host are not read; give the user as "
            "sasl_username=NAME and the password in WEIR_KAFKA_SASL_PASSWORD (or "
            "sasl_password_file=PATH)"
        )


def security_of(url: str, options: dict[str, str]) -> KafkaSecurity:
    """The TLS and SASL settings of a Kafka URL's options over ``WEIR_KAFKA_*``; an error names
    the URL without its secrets."""
    try:
        return resolve({k: v for k, v in options.items() if k in OPTIONS}, os.environ)
    except ConfigError as exc:
        raise ConfigError(f"{redact_url(url)}: {exc}") from None


def _secret(get: Any, option: str) -> str | None:
    """A secret given itself, else read from its ``<option>_file``."""
    value: str | None = get(option)
    path: str | None = get(f"{option}_file")
    if value is not None or path is None:
        return value
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().rstrip("\r\n")
    except OSError as exc:
        raise ConfigError(
            f"Kafka {option}_file={path} cannot be read ({exc.strerror}); fix the path in "
            f"{_names(option + '_file')}"
        ) from None
    if not text:
        raise ConfigError(f"Kafka {option}_file={path} is empty; write the {option} in it")
    return text


def _switch(raw: str | None, option: str) -> bool:
    if raw is None:
        return True
    folded = raw.strip().lower()
    if folded in _TRUE or folded in _FALSE:
        return folded in _TRUE
    raise ConfigError(f"Kafka {option}={raw!r} is not true or false; set {_names(option)}")
